"""A tighter packing of one provisioning batch, for comparison only: never what `plan` or the controller launch.

Karpenter (and Adze's scheduler, which predicts it) packs a batch pod by pod in queue order and never revisits
a NodeClaim once it is open, so a batch can end with several part-filled claims. ``repack`` takes the batch's
finished claims and tries first-fit-decreasing: the plain pods of a NodePool's claims, largest first, into as
few claims as their requirements allow, each claim then priced at its cheapest instance type that still fits.
It returns that packing when it is strictly cheaper and provably valid, and the input claims unchanged
otherwise (per NodePool).

Only what can be checked without the scheduler's topology is moved. A claim is repacked only when every pod on
it is plain: no topology spread, pod (anti-)affinity, host ports, volumes, preferred node affinity, more than one
required node-affinity term, field selectors or hostname requirement, and no label any of the batch's topology
or affinity selectors could count. Claims holding capacity reservations, relaxed or explicit minValues are kept
as they are. Pods stay in their NodePool (its weight order is upstream's decision, not a packing choice); a new
claim's types must meet the pool's and every pod's requirements, have an available offering there, and hold
the pods plus that type's DaemonSet overhead; a pool with limits must not reserve more of any limited resource
than the claims replaced did.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from reconciler.model import labels as wk
from reconciler.model.nodepool import NODES
from reconciler.model.pod import Pod
from reconciler.model.requirements import ALLOW_UNDEFINED_WELL_KNOWN, Requirement, Requirements
from reconciler.model.resources import Resources
from reconciler.model.taints import tolerates
from reconciler.scheduling.instancetypes import TypeInfo
from reconciler.scheduling.results import ScheduledClaim, custom_labels
from reconciler.scheduling.templates import ClaimTemplate

PRICE_EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class RepackResult:
    claims: list[ScheduledClaim]  # the kept claims first (in their order), then the repacked ones
    cost: float  # $/h: every claim at its cheapest option
    original_cost: float
    repacked_pools: tuple[str, ...]  # NodePools whose plain claims were replaced

    @property
    def savings(self) -> float:
        return self.original_cost - self.cost


def batch_cost(claims: Iterable[ScheduledClaim]) -> float:
    return sum(claim.cheapest_price() for claim in claims)


def repack(claims: Sequence[ScheduledClaim], templates: Mapping[str, ClaimTemplate],
           max_instance_types: int = 600) -> RepackResult:
    """The cheaper packing of ``claims`` (see the module), or ``claims`` unchanged; ``templates`` by NodePool
    name are the scheduling context's (requirements, taints, instance types with offerings, DaemonSet groups)."""
    counted = counted_selectors([pod for claim in claims for pod in claim.pods])
    kept: list[ScheduledClaim] = []
    movable: dict[str, list[ScheduledClaim]] = {}
    for claim in claims:
        template = templates.get(claim.nodepool.name)
        if template is not None and _claim_movable(claim, template, counted):
            movable.setdefault(claim.nodepool.name, []).append(claim)
        else:
            kept.append(claim)
    repacked: list[ScheduledClaim] = []
    pools = []
    for pool, group in movable.items():
        packed = _pack_pool(group, templates[pool], max_instance_types)
        if packed is not None and batch_cost(packed) < batch_cost(group) - PRICE_EPSILON:
            repacked.extend(packed)
            pools.append(pool)
        else:
            kept.extend(group)
    result = [*kept, *repacked]
    return RepackResult(result, batch_cost(result), batch_cost(claims), tuple(pools))


# -- what may move -----------------------------------------------------------------------------------------------


def counted_selectors(pods: Iterable[Pod], *, spread: bool = True) -> list[tuple[str, object]]:
    """Every topology / affinity selector in the batch, with the namespaces it looks in (None: any).

    ``spread=False`` leaves out topology spread selectors: for pods already running (the exchange over a
    settled cluster) another pod's spread constraint is checked only when that pod schedules, so moving a pod
    it counts makes no placement invalid; pod (anti-)affinity is kept, as required anti-affinity is symmetric."""
    selectors: list[tuple[str, object]] = []
    for pod in pods:
        if spread:
            for constraint in pod.topology_spread:
                selectors.append((pod.namespace, constraint.selector))
        terms = [*pod.affinity_required, *pod.anti_affinity_required,
                 *(w.term for w in pod.affinity_preferred), *(w.term for w in pod.anti_affinity_preferred)]
        for term in terms:
            # A term reaching other namespaces is treated as reaching all of them (conservative).
            scope = pod.namespace if not term.namespaces and term.namespace_selector is None else "*"
            selectors.append((scope, term.selector))
    return selectors


def plain_pod(pod: Pod, counted: Sequence[tuple[str, object]] = ()) -> bool:
    """A pod the repack may move: nothing about it depends on which other pods share or neighbour its node."""
    if (pod.topology_spread or pod.affinity_required or pod.anti_affinity_required or pod.affinity_preferred
            or pod.anti_affinity_preferred or pod.host_ports or pod.volumes or pod.preferred_terms
            or len(pod.required_terms) > 1):
        return False
    if any(term.has_match_fields for term in pod.required_terms):
        return False
    if wk.HOSTNAME in pod_requirements(pod):
        return False
    return not any(scope in ("*", pod.namespace) and selector.matches(pod.labels)  # type: ignore[attr-defined]
                   for scope, selector in counted)


def pod_requirements(pod: Pod) -> Requirements:
    """What a plain pod needs of its node: its node selector and its one required node-affinity term."""
    requirements = Requirements.from_labels(pod.node_selector)
    if pod.required_terms:
        requirements = requirements.merge(pod.required_terms[0].requirements)
    return requirements


def _claim_movable(claim: ScheduledClaim, template: ClaimTemplate, counted: Sequence[tuple[str, object]]) -> bool:
    if claim.min_values_relaxed or claim.error is not None or claim.requirements.has_min_values():
        return False
    if wk.CAPACITY_RESERVATION_ID in claim.requirements or wk.CAPACITY_TYPE_RESERVED in claim.capacity_types:
        return False
    return all(plain_pod(pod, counted) and all(tolerates(t, pod.tolerations) for t in template.taints)
               for pod in claim.pods)


# -- the packings tried ------------------------------------------------------------------------------------------


Priced = tuple[float, str, TypeInfo]  # a type's cheapest offering under a claim's requirements, its name, it


@dataclass(slots=True)
class _Bin:
    """A claim being packed. ``priced[start:]`` holds every usable type that may still hold the pods, cheapest
    first; the first of them holds them (leading types that no longer do are skipped for good: pods only add)."""

    requirements: Requirements
    requests: dict[str, int]
    pods: list[Pod]
    priced: list[Priced]
    upper: dict[str, int]  # per resource, the most any of ``priced`` holds: a quick refusal for a full claim
    start: int = 0

    @property
    def price(self) -> float:
        return self.priced[self.start][0]

    def cheapest_holding(self, total: Mapping[str, int], rooms: Mapping[str, Mapping[str, int]]) -> int | None:
        """Index of the cheapest type that holds ``total``, or None."""
        if any(value > self.upper.get(name, 0) for name, value in total.items()):
            return None
        for index in range(self.start, len(self.priced)):
            if _holds(rooms[self.priced[index][1]], total):
                return index
        return None


def _rooms(template: ClaimTemplate) -> dict[str, dict[str, int]]:
    """Per type, what its allocatable leaves for pods after its DaemonSet group's overhead."""
    rooms = {}
    for info in template.types:
        overhead = template.daemon_groups[template.group_index[info.name]].overhead
        names = set(info.allocatable) | set(overhead)
        rooms[info.name] = {n: info.allocatable.get(n, 0) - overhead.get(n, 0) for n in names}
    return rooms


def _holds(room: Mapping[str, int], total: Mapping[str, int]) -> bool:
    """``Resources.fits_in`` on the plain dicts this hot loop keeps (no Resources built per try)."""
    return all(value <= room.get(name, 0) for name, value in total.items())


def _upper(priced: Sequence[Priced], rooms: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    upper: dict[str, int] = {}
    for item in priced:
        for name, value in rooms[item[1]].items():
            upper[name] = max(upper.get(name, 0), value)
    return upper


def _priced(types: Iterable[TypeInfo], requirements: Requirements, total: Mapping[str, int],
            rooms: Mapping[str, Mapping[str, int]]) -> list[Priced]:
    """The types that meet ``requirements`` with an available offering and hold ``total``, cheapest first."""
    found = []
    for info in types:
        if not _holds(rooms[info.name], total) or not info.compatible(requirements):
            continue
        offerings = info.offerings_for(requirements)
        if offerings:
            found.append((min(o.price for o in offerings), info.name, info))
    found.sort(key=lambda item: (item[0], item[1]))
    return found


def _by_cpu(pod: Pod) -> tuple[int, int, str]:
    return -pod.scheduling_requests.amount("cpu"), -pod.scheduling_requests.amount("memory"), pod.key


def _by_memory(pod: Pod) -> tuple[int, int, str]:
    return -pod.scheduling_requests.amount("memory"), -pod.scheduling_requests.amount("cpu"), pod.key


# (pod order, placement rule): first fit puts a pod in the first claim that can take it; cheapest fit in the
# claim whose price grows least, or in a new claim when that costs less.
STRATEGIES = ((_by_cpu, "first"), (_by_memory, "first"), (_by_cpu, "cheapest"), (_by_memory, "cheapest"))


def _pack_pool(group: Sequence[ScheduledClaim], template: ClaimTemplate,
               max_instance_types: int) -> list[ScheduledClaim] | None:
    """The cheapest of the strategies' packings of ``group``'s pods, or None when none could be made."""
    rooms = _rooms(template)
    best: list[_Bin] | None = None
    for order, rule in STRATEGIES:
        bins = _pack(sorted((pod for claim in group for pod in claim.pods), key=order), template, rule, rooms)
        if bins is not None and (best is None or sum(b.price for b in bins) < sum(b.price for b in best)):
            best = bins
    if best is None:
        return None
    packed = [_finish(b, template, max_instance_types, rooms) for b in best]
    if template.nodepool.limits and not _within_replaced(packed, group, template.nodepool.limits):
        return None
    return packed


def _pack(pods: Sequence[Pod], template: ClaimTemplate, rule: str,
          rooms: Mapping[str, Mapping[str, int]]) -> list[_Bin] | None:
    bins: list[_Bin] = []
    for pod in pods:
        needs = pod_requirements(pod)
        if template.requirements.incompatibility(needs, ALLOW_UNDEFINED_WELL_KNOWN) is not None:
            return None
        requests = dict(pod.scheduling_requests)
        # (growth in $/h, the claim, its requirements and requests with the pod, its priced types or None: kept)
        chosen: tuple[float, _Bin, Requirements, dict[str, int], list[Priced] | None, int] | None = None
        for candidate in bins:
            if candidate.requirements.incompatibility(needs, ALLOW_UNDEFINED_WELL_KNOWN) is not None:
                continue
            merged = candidate.requirements.merge(needs)
            total = {n: candidate.requests.get(n, 0) + requests.get(n, 0) for n in {*candidate.requests, *requests}}
            if merged == candidate.requirements:  # the usual case: same prices, only the fit to check
                index = candidate.cheapest_holding(total, rooms)
                if index is None:
                    continue
                growth, priced = candidate.priced[index][0] - candidate.price, None
            else:
                repriced = _priced((item[2] for item in candidate.priced[candidate.start:]), merged, total, rooms)
                if not repriced:
                    continue
                growth, priced, index = repriced[0][0] - candidate.price, repriced, 0
            if chosen is None or growth < chosen[0]:
                chosen = (growth, candidate, merged, total, priced, index)
            if rule == "first" or growth <= 0:
                break
        if chosen is None or (rule == "cheapest" and chosen[0] > 0):
            alone_requirements = template.requirements.merge(needs)
            alone = _priced(template.types, alone_requirements, requests, rooms)
            if alone and (chosen is None or alone[0][0] < chosen[0]):
                bins.append(_Bin(alone_requirements, requests, [pod], alone, _upper(alone, rooms)))
                continue
            if chosen is None:
                return None  # the scheduler placed it, so this is a case the repack does not model: keep it
        _, into, merged, total, priced, index = chosen
        into.requirements, into.requests = merged, total
        if priced is not None:
            into.priced, into.upper = priced, _upper(priced, rooms)
        into.start = index
        into.pods.append(pod)
    return bins


def _finish(packed: _Bin, template: ClaimTemplate, max_instance_types: int,
            rooms: Mapping[str, Mapping[str, int]]) -> ScheduledClaim:
    """The claim as the scheduler's ``finalize_claim`` writes it: cheapest options first, types and capacity
    types pinned, the smallest DaemonSet overhead among the options in its requests."""
    holding = [item for item in packed.priced[packed.start:] if _holds(rooms[item[1]], packed.requests)]
    priced = [(price, name, info, {o.capacity_type for o in info.offerings_for(packed.requirements)})
              for price, name, info in holding[:max_instance_types]]
    capacity_types = sorted(set().union(*(item[3] for item in priced)))
    final = packed.requirements.add(Requirement(wk.INSTANCE_TYPE, False, frozenset(item[1] for item in priced)),
                                    Requirement(wk.CAPACITY_TYPE, False, frozenset(capacity_types)))
    overheads = [template.daemon_groups[template.group_index[item[1]]].overhead for item in priced]
    smallest = {n: min(o.get(n, 0) for o in overheads) for n in set().union(*overheads)}
    labels = dict(template.labels)
    labels.update(custom_labels(final, template.requirements))
    return ScheduledClaim(
        nodepool=template.nodepool,
        pods=list(packed.pods),
        requirements=final,
        instance_types=[item[2].instance_type for item in priced],
        prices=[item[0] for item in priced],
        requests=Resources(packed.requests) + Resources(smallest),
        labels=labels,
        taints=template.taints,
        startup_taints=template.nodepool.startup_taints,
    )


def _within_replaced(packed: Sequence[ScheduledClaim], replaced: Sequence[ScheduledClaim],
                     limits: Mapping[str, int]) -> bool:
    """Against a NodePool's limits the new claims reserve no more than the replaced ones did (each claim counts
    the largest capacity among its options, as Karpenter's subtractMax; limits.nodes counts claims)."""
    for name in limits:
        if name == NODES:
            if len(packed) > len(replaced):
                return False
            continue

        def reserved(claims: Sequence[ScheduledClaim], resource: str = name) -> int:
            return sum(max((t.capacity.amount(resource) for t in c.instance_types), default=0) for c in claims)

        if reserved(packed) > reserved(replaced):
            return False
    return True
