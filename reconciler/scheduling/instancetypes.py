"""Per-batch instance-type index: requirements, allocatable and offerings precomputed once per type.

Everything the scheduler asks of an instance type many thousands of times per
batch (is it compatible with these requirements, does it fit these requests,
does it have an available offering in the allowed zones/capacity types, what
is its cheapest such offering) is answered here from precomputed data.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.cloud.types import InstanceType, Offering
from reconciler.model import labels as wk
from reconciler.model.requirements import Requirement, Requirements
from reconciler.model.resources import Resources

# The part of a claim's requirements that selects offerings: (zone, capacity type, zone ID, reservation ID).
OfferingKey = tuple[Requirement | None, Requirement | None, Requirement | None, Requirement | None]


def offering_allowed(
    offering: Offering,
    zones: Requirement | None,
    capacity_types: Requirement | None,
    zone_ids: Requirement | None,
    reservations: Requirement | None = None,
) -> bool:
    """An offering without a known zone ID ("", custom catalogues) is not judged by the zone-ID requirement;
    one outside any reservation has no reservation-ID label, so only ``NotIn``/``DoesNotExist`` admit it."""
    return (
        (zones is None or zones.has(offering.zone))
        and (capacity_types is None or capacity_types.has(offering.capacity_type))
        and (zone_ids is None or not offering.zone_id or zone_ids.has(offering.zone_id))
        and (reservations is None or _reservation_allowed(reservations, offering.reservation_id))
    )


def _reservation_allowed(requirement: Requirement, reservation_id: str) -> bool:
    if reservation_id:
        return requirement.has(reservation_id)
    # No label: NotIn [...] and DoesNotExist admit it; In, Exists and bounds need a value.
    if requirement.complement:
        return bool(requirement.values) and requirement.gte is None and requirement.lte is None
    return not requirement.values


@dataclass(slots=True, eq=False)
class TypeInfo:
    instance_type: InstanceType
    name: str
    requirements: Requirements
    allocatable: dict[str, int]
    capacity: Resources
    offerings: tuple[Offering, ...]  # available ones only
    reserved: tuple[Offering, ...] = ()  # the available reserved offerings among them
    # (zone requirement, capacity-type requirement) -> the offerings they allow; consolidation prices
    # every option of every simulated claim, and claims mostly share these two requirements.
    _allowed: dict[OfferingKey, tuple[Offering, ...]] = field(
        default_factory=dict, repr=False
    )
    _highest: dict[OfferingKey, dict[str, float]] = field(
        default_factory=dict, repr=False
    )

    def compatible(self, requirements: Requirements) -> bool:
        return self.requirements.intersects(requirements) is None

    def fits(self, requests: Mapping[str, int]) -> bool:
        allocatable = self.allocatable
        for name, value in requests.items():  # noqa: SIM110 - explicit loop, hot path
            if value > 0 and value > allocatable.get(name, 0):
                return False
        return True

    def offerings_for(self, requirements: Requirements) -> list[Offering]:
        key = offering_key(requirements)
        found = self._allowed.get(key)
        if found is None:
            found = self._allowed[key] = tuple(o for o in self.offerings if offering_allowed(o, *key))
        return list(found)

    def highest_prices(
        self, requirements: Requirements, key: OfferingKey | None = None
    ) -> dict[str, float]:
        """Capacity type -> its most expensive allowed offering (the worst case of launching that type).

        ``key``: ``offering_key(requirements)``, when pricing many types against the same requirements."""
        if key is None:
            key = offering_key(requirements)
        found = self._highest.get(key)
        if found is None:
            found = {}
            for offering in self.offerings_for(requirements):
                if offering.price > found.get(offering.capacity_type, -math.inf):
                    found[offering.capacity_type] = offering.price
            self._highest[key] = found
        return found

    def has_offering(self, requirements: Requirements) -> bool:
        zones, capacity_types, zone_ids, reservations = offering_key(requirements)
        if zones is None and capacity_types is None and zone_ids is None and reservations is None:
            return bool(self.offerings)
        for o in self.offerings:  # noqa: SIM110 - explicit loop, hot path
            if offering_allowed(o, zones, capacity_types, zone_ids, reservations):
                return True
        return False

    def cheapest_price(self, requirements: Requirements) -> float:
        prices = [o.price for o in self.offerings_for(requirements)]
        return min(prices) if prices else math.inf


def offering_key(requirements: Requirements) -> OfferingKey:
    """The part of ``requirements`` that selects offerings: zone, capacity type, zone ID and reservation ID."""
    return (
        requirements.get(wk.ZONE),
        requirements.get(wk.CAPACITY_TYPE),
        requirements.get(wk.ZONE_ID),
        requirements.get(wk.CAPACITY_RESERVATION_ID),
    )


# Well-known keys an instance type resolves itself; when its labels lack one, it has no value for it
# (``DoesNotExist``), as Karpenter's AWS provider declares, so ``Exists``/``In``/``Gt``/``Lt`` on that
# key exclude it. Zone, zone ID and capacity type come from offerings (the zone ID only where the
# catalogue knows it), the NodePool key from the pool.
RESOLVED_BY_TYPE = wk.WELL_KNOWN_LABELS - {wk.NODEPOOL, wk.ZONE, wk.CAPACITY_TYPE, wk.ZONE_ID}


def type_requirements(instance_type: InstanceType) -> Requirements:
    """Labels as single-value requirements, ``DoesNotExist`` for the type's missing well-known keys,
    plus zone, zone ID (when every available offering knows it) and capacity type from available offerings,
    and the reservation labels of its reserved offerings (Karpenter's AWS provider lists every reservation
    of the type, available or not: the offerings decide which can launch)."""
    available = [o for o in instance_type.offerings if o.available]
    labels = dict(instance_type.labels)
    labels.setdefault(wk.INSTANCE_TYPE, instance_type.name)
    labels.setdefault(wk.ARCH, instance_type.arch)
    zone_ids = frozenset(o.zone_id for o in available)
    reservations: tuple[tuple[str, frozenset[str]], ...] = ()
    if any(o.reservation_id for o in instance_type.offerings):
        by_key: dict[str, set[str]] = {}
        for o in instance_type.offerings:
            for key, value in o.reservation_labels().items():
                by_key.setdefault(key, set()).add(value)
        reservations = tuple(sorted((key, frozenset(values)) for key, values in by_key.items()))
    return _requirements_for(
        tuple(sorted(labels.items())),
        frozenset(o.zone for o in available),
        frozenset(o.capacity_type for o in available),
        zone_ids if zone_ids and "" not in zone_ids else None,
        reservations,
    )


@functools.lru_cache(maxsize=16_384)
def _requirements_for(
    labels: tuple[tuple[str, str], ...],
    zones: frozenset[str],
    capacity_types: frozenset[str],
    zone_ids: frozenset[str] | None,
    reservations: tuple[tuple[str, frozenset[str]], ...] = (),
) -> Requirements:
    # Requirements are immutable, so one instance per distinct type shape is shared across
    # scheduling contexts (catalogues are re-read every pass; building these dominated).
    requirements = [Requirement.single(key, value) for key, value in labels]
    requirements.extend(Requirement(key, False, values) for key, values in reservations)
    defined = {key for key, _ in labels} | {key for key, _ in reservations}
    requirements.extend(Requirement(key, False, frozenset()) for key in RESOLVED_BY_TYPE - defined)
    requirements.append(Requirement(wk.ZONE, False, zones))
    requirements.append(Requirement(wk.CAPACITY_TYPE, False, capacity_types))
    if zone_ids is not None:
        requirements.append(Requirement(wk.ZONE_ID, False, zone_ids))
    return Requirements.of(*requirements)


class TypeIndex:
    """``TypeInfo`` per instance type, shared between NodePools that list the same type object."""

    def __init__(self) -> None:
        self._by_id: dict[int, TypeInfo] = {}

    def info(self, instance_type: InstanceType) -> TypeInfo:
        found = self._by_id.get(id(instance_type))
        if found is None:
            found = TypeInfo(
                instance_type=instance_type,
                name=instance_type.name,
                requirements=type_requirements(instance_type),
                allocatable=dict(instance_type.allocatable),
                capacity=instance_type.capacity,
                offerings=tuple(o for o in instance_type.offerings if o.available),
                reserved=tuple(o for o in instance_type.offerings if o.available and o.reservation_id),
            )
            self._by_id[id(instance_type)] = found
        return found

    def infos(self, instance_types: Iterable[InstanceType]) -> list[TypeInfo]:
        return [self.info(it) for it in instance_types]


def order_by_price(types: Sequence[TypeInfo], requirements: Requirements) -> list[TypeInfo]:
    """Cheapest compatible available offering first; ties by name (Karpenter's OrderByPrice)."""
    return sorted(types, key=lambda t: (t.cheapest_price(requirements), t.name))


def max_capacity(types: Iterable[TypeInfo]) -> dict[str, int]:
    result: dict[str, int] = {}
    for info in types:
        for name, value in info.capacity.items():
            if value > result.get(name, 0):
                result[name] = value
    return result


def min_values_shortfall(types: Sequence[TypeInfo], requirements: Requirements) -> dict[str, tuple[int, int]]:
    """Keys whose ``minValues`` the types cannot meet: key -> (wanted, distinct values available)."""
    shortfall = {}
    for key, requirement in requirements.items():
        if requirement.min_values is None:
            continue
        values: set[str] = set()
        for info in types:
            own = info.requirements.get(key)
            if own is not None and not own.complement:
                values.update(v for v in own.values if requirement.has(v))
        if len(values) < requirement.min_values:
            shortfall[key] = (requirement.min_values, len(values))
    return shortfall
