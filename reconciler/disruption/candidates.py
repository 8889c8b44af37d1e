"""Which nodes may be disrupted at all, and the facts every method needs about them.

Shared eligibility (Karpenter's order): managed with a Node, initialized, not
deleting or marked, not nominated, no ``karpenter.sh/do-not-disrupt`` on the
node, NodePool known with instance types, then the pods: no active
do-not-disrupt pod, no PDB allowing 0 disruptions, no pod under several PDBs —
the pod checks are waived for drift (an *eventual* disruption) when the
NodeClaim has a terminationGracePeriod, since the drain is then bounded.

Every node turned away gets an ``Explanation``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any, cast

from reconciler.cloud.types import InstanceType
from reconciler.disruption.budgets import BudgetAllowance, BudgetError, allowance, parse_budgets
from reconciler.disruption.drift_detection import INSTANCE_TYPE_DRIFT_MIN_AGE, drift_reason
from reconciler.disruption.types import Candidate, Explanation, PassClock
from reconciler.model import labels as wk
from reconciler.model import podutil
from reconciler.model.nodepool import NodePool
from reconciler.model.pdb import PdbLimits, pods_blocker
from reconciler.model.pod import Pod
from reconciler.provisioning.lifetime import node_lifetime
from reconciler.scheduling.context import nodeclass_problem
from reconciler.state.cluster import ClusterState
from reconciler.state.node import StateNode
from reconciler.state.views import node_counts


@dataclass(slots=True)
class Catalog:
    """Instance types per NodePool, indexed once per pass."""

    by_pool: Mapping[str, Mapping[str, InstanceType]]

    @classmethod
    def of(cls, instance_types_by_nodepool: Mapping[str, Sequence[InstanceType]]) -> Catalog:
        """The catalog of these instance types; the same object again for the same types (by identity), so
        views kept from pass to pass can tell an unchanged catalog by identity (``node_drift``)."""
        key = tuple((pool, tuple(map(id, types))) for pool, types in instance_types_by_nodepool.items())
        kept = _CATALOGS.get(key)
        if kept is not None:
            return kept[1]
        found = cls({pool: {it.name: it for it in types} for pool, types in instance_types_by_nodepool.items()})
        if len(_CATALOGS) >= 8:
            _CATALOGS.pop(next(iter(_CATALOGS)))
        # The types are kept with the entry, so no id in the key is reused while it is cached.
        _CATALOGS[key] = (tuple(tuple(types) for types in instance_types_by_nodepool.values()), found)
        return found

    def types(self, pool: str) -> Mapping[str, InstanceType] | None:
        found = self.by_pool.get(pool)
        return found if found else None

    def price(self, pool: str, node: StateNode) -> float:
        instance_type = (self.by_pool.get(pool) or {}).get(node.instance_type)
        offering = instance_type.offering(node.zone, node.capacity_type) if instance_type is not None else None
        return offering.price if offering is not None else 0.0


_CATALOGS: dict[tuple[tuple[str, tuple[int, ...]], ...], tuple[tuple[tuple[InstanceType, ...], ...], Catalog]] = {}


def explain(node: StateNode, code: str, message: str, method: str = "") -> Explanation:
    """The node's explanation; the last one per code and method is kept on the StateNode and returned again
    while the message is the same (every pass explains most nodes as the pass before did)."""
    memo = node.memo("disruption.explanations", dict)
    kept = memo.get((code, method))
    if kept is not None and kept.message == message:
        return kept
    found = memo[code, method] = Explanation(node.name, node.nodeclaim_name, node.nodepool, code, message, method)
    return found


def consolidation_order(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Best savings per unit of disruption first (price / reschedule cost); ties by name for determinism."""
    return sorted(candidates, key=_ORDER_KEY)


_ORDER_KEY = attrgetter("order_key")


def node_blocker(node: StateNode, now: datetime) -> tuple[str, str] | None:
    """The node-level reason this node cannot be a candidate, as ``(code, message)``."""
    if node.nodeclaim is None:
        return "NotManaged", "node is not managed by a NodeClaim"
    if node.node is None:
        return "NotRegistered", "NodeClaim has no Node yet"
    if not node.initialized:
        return "NotInitialized", "node is not initialized yet"
    if node.marked_for_deletion:
        return "Deleting", "node is being deleted or already chosen for disruption"
    if node.nominated(now):
        until = node.nominated_until.isoformat() if node.nominated_until else ""
        return "Nominated", f"node is nominated for pending pods until {until}"
    if node.node.annotations.get(wk.DO_NOT_DISRUPT) == "true":
        return "DoNotDisrupt", f'node has annotation {wk.DO_NOT_DISRUPT}="true"'
    if not node.nodepool:
        return "NoNodePool", f"node has no {wk.NODEPOOL} label"
    return None


@dataclass(slots=True)
class Assessment:
    """Every managed node judged once per pass: candidates (with any pod blocker) and the rest explained."""

    candidates: list[Candidate]
    pod_blockers: dict[str, tuple[str, str]]  # candidate name -> (code, message) of its blocking pod
    explanations: list[Explanation]

    def for_class(self, *, eventual: bool) -> tuple[list[Candidate], list[Explanation]]:
        """Candidates of a disruption class: pod blockers are waived for eventual (drift) disruption of
        NodeClaims with a terminationGracePeriod, since their drain is bounded."""
        explanations = list(self.explanations)
        if not self.pod_blockers:
            return list(self.candidates), explanations  # nothing to waive or turn away
        chosen: list[Candidate] = []
        for candidate in self.candidates:
            blocker = self.pod_blockers.get(candidate.name)
            claim = candidate.node.nodeclaim
            waived = eventual and claim is not None and bool(claim.termination_grace_period)
            if blocker is not None and not waived:
                explanations.append(explain(candidate.node, *blocker))
                continue
            chosen.append(candidate)
        return chosen, explanations


def _pod_views(node: StateNode) -> tuple[list[Pod], float, float]:
    """The node's pods, with the costs that depend on them alone."""
    views = list(node.pods.values())
    reschedule_cost = podutil.reschedule_cost(v for v in views if podutil.is_reschedulable(v))
    return views, reschedule_cost, sum(podutil.eviction_cost(v) for v in views)


@dataclass(slots=True, frozen=True)
class NodeAssessment:
    """What ``assess`` finds for one node, apart from the lifetime scaling of its disruption cost.

    It depends on the StateNode (a new one whenever its Node, NodeClaim, pods or flags change), the
    NodePool object, the InstanceType object the node runs on, the PDBs (by value) and the clock: kept on the
    StateNode, it is reused while those inputs are the same and the clock stays inside ``[since, until)``,
    the span in which no nomination and no do-not-disrupt duration on the node runs out.
    """

    nodepool: NodePool | None
    has_types: bool
    instance_type: InstanceType | None
    pdbs: tuple[object, ...]
    since: datetime
    until: datetime | None  # None: no later moment changes it
    explanation: tuple[str, str] | None  # (code, message) when the node is no candidate at all
    pod_blocker: tuple[str, str] | None = None
    views: list[Pod] | None = None
    moving: list[Pod] | None = None
    reschedule_cost: float = 0.0
    eviction_cost: float = 0.0
    price: float = 0.0
    lifetime: tuple[float, datetime] | None = None  # see ``provisioning.lifetime``

    def holds(
        self, nodepool: NodePool | None, types: Mapping[str, InstanceType] | None, node: StateNode,
        pdbs: PdbLimits, now: datetime,
    ) -> bool:
        return (
            self.since <= now
            and (self.until is None or now < self.until)
            and self.nodepool is nodepool
            and self.has_types == (types is not None)
            and (types is None or self.instance_type is types.get(node.instance_type))
            and self.pdbs == pdbs.fingerprint
        )


def _protection_ends(views: Sequence[Pod], now: datetime) -> datetime | None:
    """The first moment after ``now`` at which a do-not-disrupt duration on these pods runs out."""
    ends = []
    for view in views:
        protection = podutil.do_not_disrupt(view, now)
        if protection is not None and protection.until is not None:
            ends.append(protection.until)
    return min(ends) if ends else None


def _earliest(*moments: datetime | None) -> datetime | None:
    found = [m for m in moments if m is not None]
    return min(found) if found else None


def assess_node(
    state: ClusterState, node: StateNode, catalog: Catalog, pdbs: PdbLimits, now: datetime
) -> NodeAssessment:
    """One managed node's eligibility and candidate facts at ``now``, reused from an earlier pass when it
    still holds (see ``NodeAssessment``); ``assess_node_afresh`` computes it from scratch."""
    nodepool = state.nodepools.get(node.nodepool)
    types = catalog.types(node.nodepool)
    kept: NodeAssessment | None = node.memo_get("disruption.assessment")
    if kept is not None and kept.holds(nodepool, types, node, pdbs, now):
        return kept
    found = assess_node_afresh(state, node, catalog, pdbs, now)
    node.memo_set("disruption.assessment", found)
    return found


def assess_node_afresh(
    state: ClusterState, node: StateNode, catalog: Catalog, pdbs: PdbLimits, now: datetime
) -> NodeAssessment:
    nodepool = state.nodepools.get(node.nodepool)
    types = catalog.types(node.nodepool)
    instance_type = types.get(node.instance_type) if types is not None else None
    # A nomination still running ends at nominated_until; one already over never comes back.
    nominated_until = node.nominated_until if node.nominated(now) else None
    inputs = (nodepool, types is not None, instance_type, pdbs.fingerprint, now)
    blocked = node_blocker(node, now)
    if blocked is not None:
        return NodeAssessment(*inputs, until=nominated_until, explanation=blocked)
    if nodepool is None or types is None:
        # A pool without instance types is usually one whose EC2NodeClass is missing: say so (Karpenter: not Ready).
        problem = None if nodepool is None else nodeclass_problem(nodepool, state, require_nodeclass=True)
        what = "not found" if nodepool is None else "has no instance types"
        return NodeAssessment(*inputs, until=nominated_until,
                              explanation=("NoNodePool", problem or f"NodePool {node.nodepool} {what}"))
    views, reschedule_cost, eviction_cost = node.memo("disruption.pods", lambda: _pod_views(node))
    blocker = pods_blocker(views, pdbs, now)
    # Only pods that will actually leave need room: not do-not-disrupt, not fully PDB-blocked.
    moving = [
        pod for pod, view in zip(node.pods.values(), views, strict=True) if pdbs.is_currently_reschedulable(view, now)
    ]
    return NodeAssessment(
        *inputs,
        until=_earliest(nominated_until, _protection_ends(views, now)),
        explanation=None,
        pod_blocker=None if blocker is None else ("DoNotDisrupt" if wk.DO_NOT_DISRUPT in blocker else "PDB", blocker),
        views=views,
        moving=moving,
        reschedule_cost=reschedule_cost,
        eviction_cost=eviction_cost,
        price=catalog.price(node.nodepool, node),
        lifetime=node_lifetime(node, nodepool),
    )


def assess(
    state: ClusterState, catalog: Catalog, pdbs: PdbLimits, now: datetime, *, names: Iterable[str] | None = None
) -> Assessment:
    """Every managed node judged at ``now``; with ``names``, only the nodes of those names (in that order; a
    name that is no node is skipped): each node's verdict depends on that node alone."""
    if names is None:
        nodes = state.state_nodes()
    else:
        by_name = state.state_nodes_by_name()
        nodes = [node for name in dict.fromkeys(names) if (node := by_name.get(name)) is not None]
    clock = PassClock(now)
    return collect(judge(state, node, catalog, pdbs, clock) for node in nodes if node.managed)


# One managed node judged: its assessment, and its candidate or the explanation turning it away.
Verdict = tuple[NodeAssessment, Candidate | None, Explanation | None]


def collect(verdicts: Iterable[Verdict | None]) -> Assessment:
    """The assessment of these nodes' verdicts (``judge``; None: not managed, skipped), in their order."""
    candidates: list[Candidate] = []
    blockers: dict[str, tuple[str, str]] = {}
    explanations: list[Explanation] = []
    for verdict in verdicts:
        if verdict is None:
            continue
        found, candidate, explanation = verdict
        if candidate is None:
            assert explanation is not None
            explanations.append(explanation)
            continue
        if found.pod_blocker is not None:
            blockers[candidate.name] = found.pod_blocker
        candidates.append(candidate)
    return Assessment(candidates, blockers, explanations)


def judge(state: ClusterState, node: StateNode, catalog: Catalog, pdbs: PdbLimits, clock: PassClock) -> Verdict:
    """One managed node at ``clock.now``: its assessment, and its candidate or the explanation turning it away."""
    found = assess_node(state, node, catalog, pdbs, clock.now)
    if found.explanation is not None:
        return found, None, explain(node, *found.explanation)
    assert found.nodepool is not None and found.views is not None and found.moving is not None
    candidate = Candidate(
        node=node,
        nodepool=found.nodepool,
        instance_type=found.instance_type,
        price=found.price,
        pods=found.views,
        reschedulable=found.moving,
        reschedule_cost=found.reschedule_cost,
        eviction_cost=found.eviction_cost,
        lifetime=found.lifetime,
        clock=clock,
    )
    return found, candidate, None


@dataclass(slots=True, frozen=True)
class NodeDrift:
    """``drift_reason`` for one node, kept on its StateNode while the NodePool, EC2NodeClass and launched
    InstanceType are the same objects and the clock has not crossed the instance-type check's age bound."""

    nodepool: NodePool
    nodeclass: Mapping[str, Any] | None
    has_types: bool
    launched: InstanceType | None
    since: datetime
    until: datetime | None
    reason: tuple[str, str] | None
    types: Mapping[str, InstanceType] | None = None  # the catalog's types it was found with (same object: same)


def _launched_type(node: StateNode, types: Mapping[str, InstanceType] | None) -> InstanceType | None:
    claim = node.nodeclaim
    name = (claim.labels.get(wk.INSTANCE_TYPE) if claim is not None else None) or node.labels.get(wk.INSTANCE_TYPE)
    return types.get(name) if types and name is not None else None


def node_drift(
    state: ClusterState, node: StateNode, nodepool: NodePool, types: Mapping[str, InstanceType] | None,
    now: datetime,
) -> tuple[str, str] | None:
    """Why a managed node has drifted from ``nodepool`` (see ``drift.drift_reason``), or None."""
    claim = node.nodeclaim
    if claim is None:
        return None
    nodeclass = state.nodeclass(nodepool)
    kept: NodeDrift | None = node.memo_get("disruption.drift")
    if (
        kept is not None and kept.since <= now and (kept.until is None or now < kept.until)
        and kept.nodepool is nodepool and kept.nodeclass is nodeclass
    ):
        if types is not None and kept.types is types:
            return kept.reason  # the same catalog (``Catalog.of``): the same launched type
        if kept.has_types == bool(types) and kept.launched is _launched_type(node, types):
            return kept.reason
    launched = _launched_type(node, types)
    reason = drift_reason(nodepool, claim, now=now, instance_types=types, nodeclass=nodeclass, node_labels=node.labels)
    # The clock enters only through "older than INSTANCE_TYPE_DRIFT_MIN_AGE" (checked while that is not yet so).
    age_bound = None
    created = claim.creation_timestamp
    if types and created is not None and now - created <= INSTANCE_TYPE_DRIFT_MIN_AGE:
        age_bound = created + INSTANCE_TYPE_DRIFT_MIN_AGE + timedelta(microseconds=1)
    node.memo_set("disruption.drift",
                  NodeDrift(nodepool, nodeclass, bool(types), launched, now, age_bound, reason, types))
    return reason


def build_candidates(
    state: ClusterState,
    catalog: Catalog,
    pdbs: PdbLimits,
    now: datetime,
    *,
    eventual: bool = False,
    names: Iterable[str] | None = None,
) -> tuple[list[Candidate], list[Explanation]]:
    """Candidates for one disruption class (``eventual`` = drift) and explanations for the rest (of the nodes
    named ``names`` when given, see ``assess``)."""
    return assess(state, catalog, pdbs, now, names=names).for_class(eventual=eventual)


def budget_allowances(state: ClusterState, reason: str, now: datetime) -> dict[str, BudgetAllowance]:
    """Per NodePool: how many more nodes may start disrupting for ``reason``.

    Counts managed, initialized nodes whose instance is not already terminating;
    those NotReady or deleting/marked use the budget up.
    """
    counts, disrupting = state.nodes_memo("disruption.budget_counts", lambda: _budget_counts(state))
    result = {}
    for name, nodepool in state.nodepools.items():
        try:
            budgets = parse_budgets(nodepool.disruption.get("budgets"))
        except BudgetError as err:
            result[name] = BudgetAllowance(
                name, reason, 0, 0, counts.get(name, 0), disrupting.get(name, 0), f"invalid budget: {err}"
            )
            continue
        result[name] = allowance(
            name, budgets, reason, node_count=counts.get(name, 0), disrupting=disrupting.get(name, 0), now=now
        )
    return result


def _budget_counts(state: ClusterState) -> tuple[dict[str, int], dict[str, int]]:
    """Per NodePool: its nodes that count toward budgets, and those of them already disrupting (the same for
    every reason and moment while the nodes are unchanged; kept up to date by the nodes that change)."""
    counts: dict[str, int] = {}
    disrupting: dict[str, int] = {}
    for key, count in node_counts(state, "disruption.budget_counts", _budget_keys).items():
        kind, pool = cast(tuple[str, str], key)
        (counts if kind == "count" else disrupting)[pool] = count
    return counts, disrupting


def _budget_keys(node: StateNode) -> tuple[tuple[str, str], ...]:
    if node.nodeclaim is None or not node.initialized or not node.nodepool:
        return ()
    if node.nodeclaim.condition_true("InstanceTerminating"):
        return ()
    if node.marked_for_deletion or (node.node is not None and not node.node.is_ready):
        return ("count", node.nodepool), ("disrupting", node.nodepool)
    return (("count", node.nodepool),)
