"""A simulated cloud: launches from a fixed catalogue, deterministically.

Launch picks the cheapest available offering compatible with the request
(instance-type options x allowed zones x allowed capacity types), preferring a
reserved offering when one is allowed, like Karpenter's fake provider. Ties go
to the earlier option, then zone name. Metal, GPU and accelerator options are
left out while a generic option can launch, as the AWS provider does.

A deleted instance shuts down for ``shutdown_seconds`` of simulated time (state ``shutting-down``, still
returned by ``get``, as EC2 reports it) before it is gone; 0 (the default) removes it at once.

With a ``shaper`` (a preset catalogue), each EC2NodeClass gets the types as its AMI family and
kubelet shape them (``NodeClassShape``, shared with the live provider); availability and prices
stay those of the one catalogue, so capacity shortages apply to every NodeClass.

Capacity reservations (the catalogue's ``capacityReservations``) are the account's: an EC2NodeClass
that selects one with ``capacityReservationSelectorTerms`` gets a ``reserved`` offering for it (see
``cloud.aws.capacityreservation``), a launch into it takes one of its instances and a terminated
instance gives it back (once its shutdown is over). With the ``ReservedCapacity`` gate off no reserved offering exists.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from reconciler.cloud.aws import capacityreservation as reservations
from reconciler.cloud.overlay import launch_price, priced
from reconciler.cloud.types import (
    UNAVAILABLE_OFFERING_TTL_SECONDS,
    Instance,
    InstanceNotFoundError,
    InstanceType,
    InsufficientCapacityError,
    LaunchRequest,
    Offering,
    prefer_generic,
)
from reconciler.model import labels as wk

if TYPE_CHECKING:
    from reconciler.cloud.aws.preset import PresetShaper
    from reconciler.cloud.overlay import OverlayBook

_KEPT_CHOICES = 512  # launch choices kept per catalogue list before starting again


def _listed(values: Sequence[str] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(values)


class SimulatedUnavailableOfferings:
    """The simulated cloud's unavailable-offerings cache, in the AWS cache's shape (what interruption marks).

    An offering marked here is unavailable for ``UNAVAILABLE_OFFERING_TTL_SECONDS`` of simulated time; a
    marked reservation counts as full (see ``mark_reservation_unavailable``).
    """

    def __init__(self, cloud: SimulatedCloud) -> None:
        self._cloud = cloud

    def mark_unavailable(self, capacity_type: str, instance_type: str, zone: str, reason: str = "") -> None:
        until = self._cloud.now() + timedelta(seconds=UNAVAILABLE_OFFERING_TTL_SECONDS)
        with contextlib.suppress(KeyError):  # a type no longer in the catalogue has nothing to mark
            self._cloud.mark_unavailable(instance_type, zone, capacity_type, until=until)

    def mark_reservation_unavailable(self, reservation_id: str) -> None:
        """Like the live cache: the reservation counts as full until the next refresh of its count (here:
        until an instance in it terminates)."""
        self._cloud.calls.append(("mark-reservation-unavailable", reservation_id))
        if reservation_id in self._cloud.reservations:
            self._cloud.reservation_left[reservation_id] = 0


class SimulatedCloud:
    name = "simulated"

    def __init__(
        self,
        instance_types: Iterable[InstanceType],
        clock: Callable[[], datetime],
        shaper: PresetShaper | None = None,
        shutdown_seconds: float = 0.0,
        *,
        capacity_reservations: Iterable[reservations.CapacityReservation] = (),
        reserved_capacity: bool = True,
    ) -> None:
        self._types: dict[str, InstanceType] = {t.name: t for t in instance_types}
        self.shutdown = timedelta(seconds=shutdown_seconds)
        self._gone_at: dict[str, datetime] = {}  # shutting-down instance -> when it is terminated
        self.reservations = {r.id: r for r in capacity_reservations}
        self.reservation_left = {r.id: r.available for r in self.reservations.values()}
        self.reserved_capacity = reserved_capacity  # the ReservedCapacity gate
        # The NodeOverlays in effect, as the engine last evaluated them (``lifecycle.nodepool_types``).
        self.price_overlays: OverlayBook | None = None
        self._clock = clock
        self._shaper = shaper
        self._version = 0  # bumped whenever an offering's availability changes
        # The catalogue list ``_choose`` last chose from, and its choices by request (see ``_choose``).
        self._choices: tuple[Sequence[InstanceType] | None, dict[tuple[Any, ...], Any]] = (None, {})
        self._shaped: dict[str, tuple[int, list[InstanceType]]] = {}  # NodeClass shape key -> its types
        self._listed: tuple[int, list[InstanceType]] = (-1, [])
        self._instances: dict[str, Instance] = {}
        self._launches = 0
        self._restore: dict[tuple[str, str, str], datetime] = {}  # (type, zone, capacity type) -> available again
        self.calls: list[tuple[str, str]] = []  # (operation, subject), for tests and reports
        self.unavailable = SimulatedUnavailableOfferings(self)

    # -- catalogue -------------------------------------------------------------------------
    def catalog(self) -> list[InstanceType]:
        """The types now; the same list object while nothing changed (so per-list evaluations, such as the
        NodeOverlays', are kept between passes). Callers must not modify it."""
        self._restore_expired()
        if self._listed[0] != self._version:
            self._listed = (self._version, list(self._types.values()))
        return self._listed[1]

    def mark_unavailable(
        self, instance_type: str, zone: str | None, capacity_type: str | None, *, until: datetime | None = None
    ) -> int:
        """Make matching offerings unavailable, from now on or ``until`` then (an interrupted spot offering
        is avoided for 3 minutes, as the live provider's cache does); returns how many changed."""
        existing = self._types.get(instance_type)
        if existing is None:
            raise KeyError(instance_type)
        changed = 0
        offerings = []
        for offering in existing.offerings:
            matches = (zone is None or offering.zone == zone) and (
                capacity_type is None or offering.capacity_type == capacity_type
            )
            if matches and offering.available:
                offering = replace(offering, available=False)
                changed += 1
                if until is not None:
                    self._restore[instance_type, offering.zone, offering.capacity_type] = until
            offerings.append(offering)
        self._types[instance_type] = replace(existing, offerings=tuple(offerings))
        self._version += 1
        return changed

    def _restore_expired(self) -> None:
        if not self._restore:
            return
        now = self._clock()
        for key in [k for k, until in self._restore.items() if until <= now]:
            del self._restore[key]
            name, zone, capacity_type = key
            existing = self._types[name]
            offerings = tuple(
                replace(o, available=True) if (o.zone, o.capacity_type) == (zone, capacity_type) else o
                for o in existing.offerings
            )
            self._types[name] = replace(existing, offerings=offerings)
            self._version += 1

    def now(self) -> datetime:
        return self._clock()

    def register_existing(self, instance: Instance) -> None:
        """Adopt an instance that a scenario declares as already running."""
        self._instances[instance.provider_id] = instance

    def offering(self, instance_type: str, zone: str, capacity_type: str) -> Offering | None:
        known = self._types.get(instance_type)
        if known is None:
            return None
        for offering in known.offerings:
            if offering.zone == zone and offering.capacity_type == capacity_type:
                return offering
        if capacity_type == wk.CAPACITY_TYPE_RESERVED:
            # Reserved offerings belong to NodeClasses; a node in a reservation is priced as they are.
            on_demand = self.offering(instance_type, zone, wk.CAPACITY_TYPE_ON_DEMAND)
            if on_demand is not None:
                return replace(on_demand, capacity_type=capacity_type, price_source=reservations.PRICE_SOURCE,
                               price=on_demand.price / reservations.RESERVED_PRICE_DIVISOR)
        return None

    def price_of(self, instance_type: str, zone: str, capacity_type: str, nodepool: str | None = None) -> float | None:
        """The offering's price; None when the catalogue has no such offering (never a made-up 0). With a
        ``nodepool``, the NodeOverlays the engine last evaluated (``price_overlays``) are in effect."""
        offering = self.offering(instance_type, zone, capacity_type)
        return None if offering is None else priced(self.price_overlays, nodepool, instance_type, offering)[0]

    def price_source_of(self, instance_type: str, zone: str, capacity_type: str, nodepool: str | None = None) -> str:
        offering = self.offering(instance_type, zone, capacity_type)
        return "" if offering is None else priced(self.price_overlays, nodepool, instance_type, offering)[1]

    # -- CloudProvider ---------------------------------------------------------------------
    async def instance_types(self, nodeclass: Mapping[str, Any] | None) -> list[InstanceType]:
        return self._with_reserved(self._shaped_types(nodeclass), nodeclass)

    def selected_reservations(self, nodeclass: Mapping[str, Any] | None) -> list[reservations.CapacityReservation]:
        """The reservations the EC2NodeClass selects: its terms against the catalogue's reservations, plus those
        its status lists that the catalogue does not know (a cluster snapshot's; no instance left in them)."""
        if nodeclass is None or not self.reserved_capacity:
            return []
        spec = nodeclass.get("spec") or {}
        now = self._clock()
        chosen = {r.id: r for r in reservations.select(spec.get("capacityReservationSelectorTerms") or [],
                                                       self.reservations.values(), now)}
        for entry in ((nodeclass.get("status") or {}).get("capacityReservations") or []):
            if entry.get("id") and entry["id"] not in self.reservations:
                chosen.setdefault(entry["id"], reservations.CapacityReservation.from_status(entry))
        return [chosen[key] for key in sorted(chosen)]

    async def reservation_status(self, nodeclass: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        """The EC2NodeClass's ``status.capacityReservations`` as its controller would write it; None when the
        class selects no reservations and lists none (nothing to write)."""
        spec = nodeclass.get("spec") or {}
        if not spec.get("capacityReservationSelectorTerms") and not (nodeclass.get("status") or {}).get(
                "capacityReservations"):
            return None
        now = self._clock()
        return [r.to_status(now) for r in self.selected_reservations(nodeclass)]

    def reservation(self, reservation_id: str) -> reservations.CapacityReservation | None:
        return self.reservations.get(reservation_id)

    async def capacity_reservations(self, ids: Iterable[str]) -> dict[str, reservations.CapacityReservation]:
        """The catalogue's reservations with these IDs, with the instances left in them now."""
        return {
            rid: reservations.with_count(self.reservations[rid], self.reservation_left.get(rid, 0))
            for rid in ids if rid in self.reservations
        }

    def _with_reserved(self, types: list[InstanceType], nodeclass: Mapping[str, Any] | None) -> list[InstanceType]:
        selected = self.selected_reservations(nodeclass)
        if not selected:
            return types
        now = self._clock()
        by_type = {r.instance_type for r in selected}
        result = []
        for instance_type in types:
            if instance_type.name not in by_type:
                result.append(instance_type)
                continue
            on_demand = [o for o in instance_type.offerings if o.capacity_type == wk.CAPACITY_TYPE_ON_DEMAND]
            added = reservations.reserved_offerings(
                instance_type.name, selected,
                on_demand_price=min((o.price for o in on_demand), default=None),
                zones={o.zone for o in instance_type.offerings},
                zone_ids={o.zone: o.zone_id for o in instance_type.offerings if o.zone_id},
                available_count=lambda r: self.reservation_left.get(r.id, 0),
                runnable=True,
                now=now,
            )
            result.append(replace(instance_type, offerings=(*instance_type.offerings, *added)))
        return result

    def _shaped_types(self, nodeclass: Mapping[str, Any] | None) -> list[InstanceType]:
        base = self.catalog()
        if nodeclass is None or self._shaper is None:
            return base
        from reconciler.cloud.aws.instancetype import NodeClassShape

        shape = NodeClassShape.of_manifest(nodeclass)
        if shape.key == NodeClassShape.of_manifest(None).key:
            return base
        cached = self._shaped.get(shape.key)
        if cached is not None and cached[0] == self._version:
            return cached[1]
        shaped = []
        for instance_type in base:
            if not self._shaper.covers(instance_type.name):
                shaped.append(instance_type)
                continue
            rebuilt = self._shaper.reshape(instance_type, shape)
            if rebuilt is not None:
                shaped.append(rebuilt)
        self._shaped[shape.key] = (self._version, shaped)
        return shaped

    async def create(self, request: LaunchRequest, nodeclass: Mapping[str, Any] | None) -> Instance:
        self.calls.append(("create", request.nodeclaim))
        choice = self._choose(request, await self.instance_types(nodeclass))
        if choice is None:
            tried = [
                (name, offering.zone, offering.capacity_type)
                for name in request.instance_types
                for offering in self._types.get(name, InstanceType(name, capacity=request.requests)).offerings
                if request.allows(offering)
            ]
            raise InsufficientCapacityError(
                f"no available offering for nodeclaim {request.nodeclaim} among "
                f"{len(request.instance_types)} instance types", tried
            )
        instance_type, offering = choice
        self._launches += 1
        digest = hashlib.sha256(f"{request.nodeclaim}/{self._launches}".encode()).hexdigest()[:17]
        provider_id = f"aws:///{offering.zone}/i-{digest}"
        labels = dict(instance_type.labels)
        labels.update({wk.ZONE: offering.zone, wk.CAPACITY_TYPE: offering.capacity_type})
        if offering.reservation_id:
            self.reservation_left[offering.reservation_id] = self.reservation_left.get(offering.reservation_id, 1) - 1
            labels.update(offering.reservation_labels())
        if offering.zone_id:
            labels[wk.ZONE_ID] = offering.zone_id
        instance = Instance(
            provider_id=provider_id,
            instance_type=instance_type.name,
            zone=offering.zone,
            capacity_type=offering.capacity_type,
            price=offering.price,
            nodeclaim=request.nodeclaim,
            nodepool=request.nodepool,
            image_id="ami-simulated",
            launched_at=self._clock(),
            capacity=instance_type.capacity,
            allocatable=instance_type.allocatable,
            labels=labels,
            tags={"karpenter.sh/nodeclaim": request.nodeclaim, "karpenter.sh/nodepool": request.nodepool},
            price_source=offering.price_source,
        )
        self._instances[provider_id] = instance
        return instance

    async def delete(self, provider_id: str) -> None:
        self.calls.append(("delete", provider_id))
        self._finish_shutdowns()
        instance = self._instances.get(provider_id)
        if instance is None:
            raise InstanceNotFoundError(f"instance {provider_id} not found")
        if provider_id in self._gone_at:
            return  # already shutting down (as EC2: no second terminate)
        if not self.shutdown:
            self._terminated(provider_id)
            return
        instance.state = "shutting-down"
        self._gone_at[provider_id] = self._clock() + self.shutdown

    def _terminated(self, provider_id: str) -> None:
        """The instance is gone; a reserved one gives its place back to its reservation (as EC2 does once
        the instance has terminated, not when termination starts)."""
        instance = self._instances.pop(provider_id, None)
        reservation_id = instance.labels.get(wk.CAPACITY_RESERVATION_ID, "") if instance is not None else ""
        if reservation_id in self.reservation_left:
            self.reservation_left[reservation_id] += 1

    async def get(self, provider_id: str) -> Instance:
        self._finish_shutdowns()
        try:
            instance = self._instances[provider_id]
        except KeyError:
            raise InstanceNotFoundError(f"instance {provider_id} not found") from None
        reservation = self.reservations.get(instance.labels.get(wk.CAPACITY_RESERVATION_ID, ""))
        if reservation is not None and reservation.ended(self._clock()):
            # An ended ODCR leaves its instances running as plain on-demand capacity.
            labels = {k: v for k, v in instance.labels.items() if k not in wk.RESERVATION_LABELS}
            labels[wk.CAPACITY_TYPE] = wk.CAPACITY_TYPE_ON_DEMAND
            instance = replace(instance, capacity_type=wk.CAPACITY_TYPE_ON_DEMAND, labels=labels)
            self._instances[provider_id] = instance
        return instance

    async def list(self) -> list[Instance]:
        self._finish_shutdowns()
        return list(self._instances.values())

    async def terminated_now(self, provider_id: str) -> None:
        """EC2 ended the instance itself (an instance-terminated interruption): gone without a shutdown."""
        self._gone_at.pop(provider_id, None)
        if provider_id not in self._instances:
            raise InstanceNotFoundError(f"instance {provider_id} not found")
        self._terminated(provider_id)

    def shutting_down(self) -> dict[str, datetime]:
        """Instances still shutting down -> when they will be terminated."""
        self._finish_shutdowns()
        return dict(self._gone_at)

    def _finish_shutdowns(self) -> None:
        if not self._gone_at:
            return
        now = self._clock()
        for provider_id in [p for p, at in self._gone_at.items() if at <= now]:
            del self._gone_at[provider_id]
            self._terminated(provider_id)

    async def is_drifted(self, instance: Instance, nodeclass: Mapping[str, Any] | None) -> str | None:
        return None

    # -- internals -------------------------------------------------------------------------
    def _choose(
        self, request: LaunchRequest, catalog: Sequence[InstanceType]  # ``list`` here would be the method
    ) -> tuple[InstanceType, Offering] | None:
        """The offering a launch takes. Kept per catalogue list (the same object while no offering changed, and
        its types never edited) and per what the request's offerings are judged by, when the catalogue's prices
        are the launch's (no NodeOverlay prices): a plan's launches ask the same options over and over, and each
        walk judged every option's every offering."""
        if self.price_overlays is not None and request.price_overlaid and request.nodepool:
            return self._choose_afresh(request, catalog)
        kept_catalog, kept = self._choices
        if kept_catalog is not catalog or len(kept) >= _KEPT_CHOICES:
            kept = {}
            self._choices = (catalog, kept)
        key = (tuple(request.instance_types), _listed(request.capacity_types), _listed(request.zones),
               request.excluded_zones, request.excluded_capacity_types, _listed(request.zone_ids),
               request.excluded_zone_ids, _listed(request.reservation_ids), request.excluded_reservation_ids)
        if key not in kept:
            kept[key] = self._choose_afresh(request, catalog)
        return kept[key]

    def _choose_afresh(
        self, request: LaunchRequest, catalog: Sequence[InstanceType]
    ) -> tuple[InstanceType, Offering] | None:
        types = {t.name: t for t in catalog}
        allowed: dict[str, tuple[int, InstanceType, list[Offering]]] = {}
        for position, name in enumerate(request.instance_types):
            instance_type = types.get(name)
            if instance_type is None:
                continue
            offerings = [o for o in instance_type.offerings if o.available and request.allows(o)]
            if offerings:
                allowed[name] = (position, instance_type, offerings)
        best: tuple[tuple[int, float, int, str], InstanceType, Offering] | None = None
        for instance_type in prefer_generic([entry[1] for entry in allowed.values()]):
            position, _, offerings = allowed[instance_type.name]
            for offering in offerings:
                # Reserved first: ODCRs, then capacity blocks, then interruptible ODCRs (upstream's order).
                if offering.capacity_type != wk.CAPACITY_TYPE_RESERVED:
                    reserved_first = 3
                elif offering.reservation_type == wk.RESERVATION_TYPE_CAPACITY_BLOCK:
                    reserved_first = 1
                else:
                    reserved_first = 2 if offering.interruptible else 0
                price = launch_price(self.price_overlays, request, instance_type.name, offering)
                rank = (reserved_first, price, position, offering.zone)
                if best is None or rank < best[0]:
                    best = (rank, instance_type, offering)
        return None if best is None else (best[1], best[2])
