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
from dataclasses import dataclass

from reconciler.cloud.types import InstanceType, Offering
from reconciler.model import labels as wk
from reconciler.model.requirements import Requirement, Requirements
from reconciler.model.resources import Resources


@dataclass(slots=True, eq=False)
class TypeInfo:
    instance_type: InstanceType
    name: str
    requirements: Requirements
    allocatable: dict[str, int]
    capacity: Resources
    offerings: tuple[Offering, ...]  # available ones only

    def compatible(self, requirements: Requirements) -> bool:
        return self.requirements.intersects(requirements) is None

    def fits(self, requests: Mapping[str, int]) -> bool:
        allocatable = self.allocatable
        for name, value in requests.items():  # noqa: SIM110 - explicit loop, hot path
            if value > 0 and value > allocatable.get(name, 0):
                return False
        return True

    def offerings_for(self, requirements: Requirements) -> list[Offering]:
        zones = requirements.get(wk.ZONE)
        capacity_types = requirements.get(wk.CAPACITY_TYPE)
        return [
            o for o in self.offerings
            if (zones is None or zones.has(o.zone)) and (capacity_types is None or capacity_types.has(o.capacity_type))
        ]

    def has_offering(self, requirements: Requirements) -> bool:
        zones = requirements.get(wk.ZONE)
        capacity_types = requirements.get(wk.CAPACITY_TYPE)
        if zones is None and capacity_types is None:
            return bool(self.offerings)
        for o in self.offerings:
            if (zones is None or zones.has(o.zone)) and (capacity_types is None or capacity_types.has(o.capacity_type)):
                return True
        return False

    def cheapest_price(self, requirements: Requirements) -> float:
        prices = [o.price for o in self.offerings_for(requirements)]
        return min(prices) if prices else math.inf


def type_requirements(instance_type: InstanceType) -> Requirements:
    """Labels as single-value requirements, plus zone and capacity type from available offerings."""
    available = [o for o in instance_type.offerings if o.available]
    labels = dict(instance_type.labels)
    labels.setdefault(wk.INSTANCE_TYPE, instance_type.name)
    labels.setdefault(wk.ARCH, instance_type.arch)
    return _requirements_for(
        tuple(sorted(labels.items())),
        frozenset(o.zone for o in available),
        frozenset(o.capacity_type for o in available),
    )


@functools.lru_cache(maxsize=16_384)
def _requirements_for(
    labels: tuple[tuple[str, str], ...], zones: frozenset[str], capacity_types: frozenset[str]
) -> Requirements:
    # Requirements are immutable, so one instance per distinct type shape is shared across
    # scheduling contexts (catalogues are re-read every pass; building these dominated).
    requirements = [Requirement.single(key, value) for key, value in labels]
    requirements.append(Requirement(wk.ZONE, False, zones))
    requirements.append(Requirement(wk.CAPACITY_TYPE, False, capacity_types))
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
