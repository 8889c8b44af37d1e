"""Turning a simulation into a consolidation command (shared by multi- and single-node consolidation).

0 new NodeClaims: delete the candidates. More than 1: rejected. Exactly 1:
replace only with instance types whose *worst-case* launch price (the most
expensive available offering of the capacity type that would launch: reserved,
else spot, else on-demand) is strictly below what the candidates cost, still
meeting minValues. When spot and on-demand are both possible the replacement is
restricted to spot. Spot candidates replaced by spot need the
``SpotToSpotConsolidation`` gate, and a single spot node at least 15 cheaper
types (only the 15 cheapest are launched) so replacements do not chase the
cheapest, most interrupted pools.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from reconciler.disruption.simulation import Simulation
from reconciler.disruption.types import Candidate, Command, Replacement
from reconciler.model import labels as wk
from reconciler.model.requirements import Requirement, Requirements
from reconciler.provisioning.nodeclaim import PlannedNodeClaim
from reconciler.scheduling import ScheduledClaim, SchedulingContext
from reconciler.scheduling.instancetypes import OfferingKey, TypeInfo, min_values_shortfall, offering_key
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState

SPOT_TO_SPOT_MIN_TYPES = 15
_LAUNCH_ORDER = (wk.CAPACITY_TYPE_RESERVED, wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND)


@dataclass(slots=True, frozen=True)
class ConsolidationRefusal:
    """Why a consolidation of these candidates was not taken (an explanation's code and message)."""

    code: str
    message: str


def worst_launch_price(info: TypeInfo, requirements: Requirements, key: OfferingKey | None = None) -> float:
    """Most expensive available offering of the capacity type that would be launched (inf when none)."""
    highest = info.highest_prices(requirements, key)
    for capacity_type in _LAUNCH_ORDER:
        price = highest.get(capacity_type)
        if price is not None:
            return price
    return math.inf


def first_failure(simulation: Simulation) -> ConsolidationRefusal:
    key, reason = sorted(simulation.failures.items())[0]
    more = len(simulation.failures) - 1
    suffix = f" (and {more} more pod(s))" if more else ""
    return ConsolidationRefusal("Unschedulable", f"would leave pod {key} pending: {reason}{suffix}")


class ReplacementBuilder:
    """Filters the simulated NodeClaim by price and writes it out as a named replacement."""

    def __init__(
        self, state: ClusterState, context: SchedulingContext, settings: Settings, name_for: Callable[[str], str]
    ) -> None:
        self.state = state
        self.context = context
        self.settings = settings
        self.name_for = name_for

    def infos(self, claim: ScheduledClaim) -> list[TypeInfo]:
        return [self.context.index.info(it) for it in claim.instance_types]

    def narrowed(self, claim: ScheduledClaim, keep: Sequence[TypeInfo], requirements: Requirements) -> ScheduledClaim:
        """The claim restricted to ``keep`` (cheapest first) and ``requirements``."""
        names = frozenset(info.name for info in keep)
        previous = requirements.get(wk.INSTANCE_TYPE)
        min_values = previous.min_values if previous is not None else None
        pinned = requirements.add(Requirement(wk.INSTANCE_TYPE, False, names, min_values=min_values))
        kept = [info for info in self.infos(claim) if info.name in names]
        return replace(
            claim,
            requirements=pinned,
            instance_types=[info.instance_type for info in kept],
            prices=[info.cheapest_price(pinned) for info in kept],
        )

    def replacement(self, claim: ScheduledClaim, name: str | None = None) -> Replacement:
        """The replacement for ``claim``; without ``name`` a placeholder is used (see ``named``)."""
        pool = claim.nodepool.name
        planned = PlannedNodeClaim(name or f"{pool}-replacement", claim, self.state.nodeclass(claim.nodepool))
        return Replacement(
            name=planned.name,
            nodepool=pool,
            instance_type_options=tuple(claim.instance_type_names),
            capacity_types=tuple(claim.capacity_types),
            pods=tuple(claim.pod_keys),
            manifest=planned.manifest(),
            price=claim.cheapest_price(),
            claim=claim,
        )

    def named(self, command: Command) -> Command:
        """The chosen command with real NodeClaim names (drawn only once a command is final)."""
        if not command.replacements:
            return command
        named = []
        for replacement in command.replacements:
            assert replacement.claim is not None
            named.append(self.replacement(replacement.claim, self.name_for(replacement.nodepool)))
        return replace(command, replacements=named)


def filter_by_price(
    infos: Sequence[TypeInfo], requirements: Requirements, max_price: float
) -> tuple[list[TypeInfo], str | None]:
    """Options strictly cheaper than ``max_price`` in the worst case, and a minValues problem if any."""
    key = offering_key(requirements)
    kept = [info for info in infos if worst_launch_price(info, requirements, key) < max_price]
    shortfall = min_values_shortfall(kept, requirements) if kept else {}
    if shortfall:
        parts = ", ".join(f"{k} needs {want} values, {have} remain" for k, (want, have) in shortfall.items())
        return kept, f"cheaper options no longer meet minValues ({parts})"
    return kept, None


def _not_cheaper(
    candidates: Sequence[Candidate], infos: Sequence[TypeInfo], requirements: Requirements
) -> ConsolidationRefusal:
    price = sum(c.price for c in candidates)
    key = offering_key(requirements)
    cheapest = min((worst_launch_price(i, requirements, key) for i in infos), default=math.inf)
    detail = f"cheapest replacement costs ${cheapest:.4f}/h in the worst case" if cheapest < math.inf else ""
    detail = detail or "no replacement instance type has an available offering"
    return ConsolidationRefusal("NotCheaper", f"no replacement is cheaper than the current ${price:.4f}/h ({detail})")


def compute_consolidation(
    candidates: Sequence[Candidate],
    simulation: Simulation,
    builder: ReplacementBuilder,
    *,
    method: str,
    reason: str,
) -> Command | ConsolidationRefusal:
    if simulation.stopped:
        return ConsolidationRefusal("Timeout", "the simulation was cut short by the deadline")
    if simulation.failures:
        return first_failure(simulation)
    claims = simulation.result.new_claims
    placements = {k: v for k, v in simulation.result.existing.items() if k in set(simulation.moving)}
    if not claims:
        return Command(reason, method, list(candidates), placements=placements)
    if len(claims) > 1:
        return ConsolidationRefusal(
            "MultipleReplacements", f"its pods would need {len(claims)} new nodes (at most 1 allowed)"
        )
    claim = claims[0]
    candidate_price = sum(c.price for c in candidates)
    infos = builder.infos(claim)
    requirements = claim.requirements
    all_spot = all(c.capacity_type == wk.CAPACITY_TYPE_SPOT for c in candidates)
    if all_spot and wk.CAPACITY_TYPE_SPOT in claim.capacity_types:
        return _spot_to_spot(candidates, claim, infos, builder, method=method, reason=reason, placements=placements)
    kept, problem = filter_by_price(infos, requirements, candidate_price)
    if problem:
        return ConsolidationRefusal("MinValues", problem)
    if not kept:
        return _not_cheaper(candidates, infos, requirements)
    capacity = requirements.get(wk.CAPACITY_TYPE)
    if capacity is not None and capacity.has(wk.CAPACITY_TYPE_SPOT) and capacity.has(wk.CAPACITY_TYPE_ON_DEMAND):
        # Both would do: launch spot (the on-demand -> spot rule); keep types that still offer it.
        requirements = requirements.add(Requirement.single(wk.CAPACITY_TYPE, wk.CAPACITY_TYPE_SPOT))
        kept = [info for info in kept if info.has_offering(requirements)]
    return _replace(candidates, claim, kept, requirements, builder, method=method, reason=reason, placements=placements)


def _replace(
    candidates: Sequence[Candidate],
    claim: ScheduledClaim,
    kept: Sequence[TypeInfo],
    requirements: Requirements,
    builder: ReplacementBuilder,
    *,
    method: str,
    reason: str,
    placements: dict[str, str],
) -> Command | ConsolidationRefusal:
    if len(candidates) > 1:
        kept = _without_own_types(candidates, kept, requirements)
        if not kept:
            return ConsolidationRefusal(
                "SameType",
                "the only cheaper replacement is a type being removed: deleting fewer nodes does the same",
            )
    narrowed = builder.narrowed(claim, kept, requirements)
    return Command(reason, method, list(candidates), [builder.replacement(narrowed)], placements)


def _without_own_types(
    candidates: Sequence[Candidate], kept: Sequence[TypeInfo], requirements: Requirements
) -> list[TypeInfo]:
    """Multi-node: replacing N nodes by one of a type being removed only pays if it is cheaper than that node.

    [2xlarge, 2xlarge, small] -> one of {small, xlarge, 2xlarge} is really "delete
    the two 2xlarge": keep only options cheaper than the cheapest candidate whose
    type appears among the options (possibly none).
    """
    own_prices: dict[str, float] = {}
    for candidate in candidates:
        name = candidate.instance_type_name
        if name:
            own_prices[name] = min(own_prices.get(name, math.inf), candidate.price)
    limits = [own_prices[info.name] for info in kept if info.name in own_prices]
    if not limits:
        return list(kept)
    ceiling = min(limits)
    key = offering_key(requirements)
    return [info for info in kept if worst_launch_price(info, requirements, key) < ceiling]


def _spot_to_spot(
    candidates: Sequence[Candidate],
    claim: ScheduledClaim,
    infos: Sequence[TypeInfo],
    builder: ReplacementBuilder,
    *,
    method: str,
    reason: str,
    placements: dict[str, str],
) -> Command | ConsolidationRefusal:
    if not builder.settings.gate("SpotToSpotConsolidation"):
        return ConsolidationRefusal(
            "SpotToSpotDisabled",
            "replacing spot with spot needs the SpotToSpotConsolidation feature gate (off)",
        )
    requirements = claim.requirements.add(Requirement.single(wk.CAPACITY_TYPE, wk.CAPACITY_TYPE_SPOT))
    spot_infos = [info for info in infos if info.has_offering(requirements)]
    kept, problem = filter_by_price(spot_infos, requirements, sum(c.price for c in candidates))
    if problem:
        return ConsolidationRefusal("MinValues", problem)
    if not kept:
        return _not_cheaper(candidates, spot_infos, requirements)
    if len(candidates) == 1:
        if len(kept) < SPOT_TO_SPOT_MIN_TYPES:
            return ConsolidationRefusal(
                "SpotToSpotOptions",
                f"spot-to-spot needs {SPOT_TO_SPOT_MIN_TYPES} cheaper spot instance types, found {len(kept)}",
            )
        limit = max(SPOT_TO_SPOT_MIN_TYPES, _min_types_for_min_values(kept, requirements))
        kept = kept[:limit]
    return _replace(candidates, claim, kept, requirements, builder, method=method, reason=reason, placements=placements)


def _min_types_for_min_values(ordered: Sequence[TypeInfo], requirements: Requirements) -> int:
    """How many of the cheapest types are needed to meet every minValues (0 when there are none)."""
    if not requirements.has_min_values():
        return 0
    for count in range(1, len(ordered) + 1):
        if not min_values_shortfall(ordered[:count], requirements):
            return count
    return len(ordered)
