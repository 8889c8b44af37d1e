"""NodeOverlays applied to each NodePool's instance types (gate ``NodeOverlay``). Pure.

``scheduling.overlay_evaluation.evaluate`` reads every overlay against every NodePool's instance types, as
Karpenter's nodeoverlay controller does, and returns an ``OverlayBook`` (this module: the cloud providers read
it, so it needs nothing of the scheduler): per pool and instance type, the price change for each
offering the overlay's requirements select and the extended resources it adds, plus each overlay's
``ValidationSucceeded`` condition. ``OverlayBook.apply`` then gives a pool's types with the overlays in
effect; every price the engine reads (scheduling, consolidation, ``simulate`` and ``plan`` costs) comes
from those offerings, so a Savings-Plan discount shows wherever a price does.

Matching: an overlay applies to an instance type of a pool when its requirements are compatible with
the type's labels, the pool's labels and ``karpenter.sh/nodepool`` (a key none of them defines fails
unless the operator is NotIn/DoesNotExist); its price changes apply to the type's offerings whose zone,
capacity type, zone ID and reservation its requirements allow, its capacity to the whole type when any
offering is selected.

Merging, by weight (highest first; equal weights: later name first): an offering's price comes from the
heaviest overlay that selects it, extended resources merge with the heaviest overlay's value winning. Two
overlays of the same weight that set the price of the same offering, or the same resource of the same
type, conflict: the one processed second (earlier name) is not applied at all and its condition says
``Conflict``. Overlays that fail runtime validation (``RuntimeValidation``) are not applied either.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from reconciler.cloud.types import InstanceType, Offering
from reconciler.model.requirements import Requirements
from reconciler.model.resources import Resources

CONDITION = "ValidationSucceeded"
OfferingId = tuple[str, str, str, str]  # zone, capacity type, zone ID, reservation ID


def adjusted_price(price: float, change: str) -> float:
    """Karpenter's ``AdjustedPrice``: an unsigned value replaces the price; ``+x``/``-x`` add to it; ``+x%``/
    ``-x%`` scale it; the result is never below 0."""
    if not change:
        return price
    if not change.startswith(("+", "-")):
        return float(change)
    adjusted = price * (1 + float(change[:-1]) / 100) if change.endswith("%") else price + float(change)
    return max(adjusted, 0.0)


@dataclass(slots=True, frozen=True)
class Overlay:
    """One NodeOverlay, parsed."""

    name: str
    weight: int
    requirements: Requirements
    price_change: str  # "" when the overlay sets no price
    capacity: Resources
    generation: int = 0
    problem: str = ""  # a runtime validation failure: the overlay is not applied

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any]) -> Overlay:
        """Parse; an overlay the API would reject (or the scheduler cannot read) comes back with ``problem``."""
        from reconciler.api import ValidationFailure, parse_object
        from reconciler.model.requirements import RequirementError

        metadata = manifest.get("metadata") or {}
        name = str(metadata.get("name", ""))
        generation = int(metadata.get("generation") or 0)
        spec = manifest.get("spec") or {}
        try:
            parse_object(manifest)
            requirements = Requirements.from_manifest(spec.get("requirements") or [], path="spec.requirements")
            capacity = Resources.from_manifest(spec.get("capacity"), path="spec.capacity")
        except (ValidationFailure, RequirementError, ValueError) as err:
            return cls(name, int(spec.get("weight") or 0) if isinstance(spec.get("weight"), int) else 0,
                       Requirements.of(), "", Resources.of(), generation, str(err))
        change = spec.get("price") if spec.get("price") is not None else spec.get("priceAdjustment")
        return cls(name, int(spec.get("weight") or 0), requirements, str(change or ""), capacity, generation)



def by_weight(overlays: Iterable[Overlay]) -> list[Overlay]:
    """Processing order: weight descending, then name descending (Karpenter's OrderByWeight)."""
    by_name = sorted(overlays, key=lambda o: o.name, reverse=True)
    return sorted(by_name, key=lambda o: -o.weight)  # stable: names stay descending within a weight


@dataclass(slots=True)
class _PriceUpdate:
    change: str
    overlay: str
    lowest_weight: int


@dataclass(slots=True)
class _CapacityUpdate:
    resources: dict[str, tuple[int, str]] = field(default_factory=dict)  # resource -> (milli amount, overlay)
    lowest_weight: int = 0
    lowest_resources: frozenset[str] = frozenset()


@dataclass(slots=True)
class _TypeUpdate:
    prices: dict[OfferingId, _PriceUpdate] = field(default_factory=dict)
    capacity: _CapacityUpdate | None = None


def offering_id(offering: Offering) -> OfferingId:
    return (offering.zone, offering.capacity_type, offering.zone_id, offering.reservation_id)


@dataclass(slots=True)
class OverlayBook:
    """The evaluated overlays: what changes per NodePool and instance type, and each overlay's condition."""

    updates: dict[str, dict[str, _TypeUpdate]] = field(default_factory=dict)  # pool -> type -> update
    conflicts: dict[str, str] = field(default_factory=dict)  # overlay -> why it is not applied
    applied: dict[str, int] = field(default_factory=dict)  # overlay -> instance types it changes
    names: tuple[str, ...] = ()
    _applied_cache: dict[tuple[str, int], tuple[Sequence[InstanceType], list[InstanceType]]] = field(
        default_factory=dict, repr=False)

    def apply(self, pool: str, types: Sequence[InstanceType]) -> Sequence[InstanceType]:
        """The pool's types with its overlays in effect (the same list when none applies)."""
        changes = self.updates.get(pool)
        if not changes:
            return types
        cached = self._applied_cache.get((pool, id(types)))
        if cached is not None and cached[0] is types:
            return cached[1]
        result = [_apply(t, changes[t.name]) if t.name in changes else t for t in types]
        self._applied_cache[(pool, id(types))] = (types, result)
        return result

    def price(self, pool: str, instance_type: str, offering: Offering) -> tuple[float, str]:
        """The price of one offering in a pool with the overlays in effect, and its source."""
        update = self.updates.get(pool, {}).get(instance_type)
        found = update.prices.get(offering_id(offering)) if update is not None else None
        if found is None:
            return offering.price, offering.price_source
        return adjusted_price(offering.price, found.change), overlay_source(found.overlay, found.change,
                                                                           offering.price_source)

    def condition(self, overlay: Overlay) -> tuple[bool, str, str]:
        """(status, reason, message) of the overlay's ``ValidationSucceeded`` condition."""
        if overlay.problem:
            return False, "RuntimeValidation", overlay.problem
        if overlay.name in self.conflicts:
            return False, "Conflict", self.conflicts[overlay.name]
        count = self.applied.get(overlay.name, 0)
        return True, CONDITION, f"applies to {count} instance type(s) across the NodePools"

    def conflict(self, overlay: Overlay, matches: Sequence[tuple[str, InstanceType, list[Offering]]]) -> str:
        """Why ``overlay`` (matching these pool, type and offerings) cannot apply: an overlay of the same weight
        already set the price of one of those offerings or one of its resources ("" when none did)."""
        for pool_name, instance_type, offerings in matches:
            update = self.updates.get(pool_name, {}).get(instance_type.name)
            if update is None:
                continue
            if overlay.price_change:
                for offering in offerings:
                    found = update.prices.get(offering_id(offering))
                    if found is not None and found.lowest_weight == overlay.weight:
                        return (f"conflicts with NodeOverlay {found.overlay} (same weight {overlay.weight}) on the "
                                f"price of {instance_type.name} {offering.capacity_type} in {offering.zone} "
                                f"(NodePool {pool_name})")
            capacity = update.capacity
            if overlay.capacity and capacity is not None and capacity.lowest_weight == overlay.weight:
                shared = sorted(set(overlay.capacity) & capacity.lowest_resources)
                if shared:
                    owner = capacity.resources[shared[0]][1] if shared[0] in capacity.resources else "another overlay"
                    return (f"conflicts with NodeOverlay {owner} (same weight {overlay.weight}) on {shared[0]} of "
                            f"{instance_type.name} (NodePool {pool_name})")
        return ""

    def record(self, pool: str, instance_type: str, overlay: Overlay, offerings: list[Offering]) -> None:
        """Apply ``overlay`` to the offerings it selects of one type in one pool; a heavier overlay processed
        earlier keeps what it set."""
        update = self.updates.setdefault(pool, {}).setdefault(instance_type, _TypeUpdate())
        if overlay.price_change:
            for offering in offerings:
                key = offering_id(offering)
                found = update.prices.get(key)
                if found is not None:
                    found.lowest_weight = overlay.weight  # a heavier overlay set it; later ones at this weight conflict
                else:
                    update.prices[key] = _PriceUpdate(overlay.price_change, overlay.name, overlay.weight)
        if overlay.capacity:
            if update.capacity is None:
                update.capacity = _CapacityUpdate()
            for resource, amount in overlay.capacity.items():
                update.capacity.resources.setdefault(resource, (amount, overlay.name))
            update.capacity.lowest_weight = overlay.weight
            update.capacity.lowest_resources = frozenset(overlay.capacity)


def overlay_source(name: str, change: str, base: str) -> str:
    """Where an overlaid price comes from (shown next to every cost)."""
    what = f"price {change}" if not change.startswith(("+", "-")) else f"priceAdjustment {change}"
    return f"NodeOverlay {name} ({what}) over {base or 'the catalogue price'}"


def _apply(instance_type: InstanceType, update: _TypeUpdate) -> InstanceType:
    offerings = instance_type.offerings
    if update.prices:
        changed = []
        for offering in offerings:
            found = update.prices.get(offering_id(offering))
            if found is None:
                changed.append(offering)
                continue
            changed.append(replace(offering, price=adjusted_price(offering.price, found.change),
                                   price_source=overlay_source(found.overlay, found.change, offering.price_source)))
        offerings = tuple(changed)
    capacity = instance_type.capacity
    if update.capacity is not None and update.capacity.resources:
        capacity = capacity + Resources({name: amount for name, (amount, _) in update.capacity.resources.items()})
    return replace(instance_type, offerings=offerings, capacity=capacity,
                   price_overlaid=instance_type.price_overlaid or bool(update.prices),
                   capacity_overlaid=instance_type.capacity_overlaid or capacity is not instance_type.capacity)


def publish(cloud: Any, book: OverlayBook) -> None:
    """Give the cloud provider the overlays in effect (``price_overlays``), so a claim planned with overlaid
    prices launches by them (Karpenter decorates its provider with the overlay store the same way); a metered
    or other wrapper passes it to the provider it wraps."""
    target = cloud
    while hasattr(target, "wrapped"):
        target = target.wrapped
    if hasattr(target, "price_overlays"):
        target.price_overlays = book


def priced(book: OverlayBook | None, nodepool: str | None, instance_type: str,
           offering: Offering) -> tuple[float, str]:
    """An offering's price and its source in ``nodepool`` with the overlays in effect (none without a pool)."""
    if nodepool and book is not None:
        return book.price(nodepool, instance_type, offering)
    return offering.price, offering.price_source


def launch_price(book: OverlayBook | None, request: Any, instance_type: str, offering: Offering) -> float:
    """What an offering costs for this launch: the overlaid price when the claim was planned with overlays."""
    if book is None or not request.price_overlaid or not request.nodepool:
        return offering.price
    return book.price(request.nodepool, instance_type, offering)[0]
