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

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from reconciler.api.durations import DurationError, parse_length
from reconciler.cloud.types import InstanceType
from reconciler.disruption import pods as podutil
from reconciler.disruption.budgets import BudgetAllowance, BudgetError, allowance, parse_budgets
from reconciler.disruption.pdb import PdbLimits, pods_blocker
from reconciler.disruption.pods import PodFacts, facts
from reconciler.disruption.types import Candidate, Explanation
from reconciler.model import labels as wk
from reconciler.model.nodepool import NodePool
from reconciler.model.pod import Pod
from reconciler.model.state_node import StateNode
from reconciler.state import ClusterState


@dataclass(slots=True)
class Catalog:
    """Instance types per NodePool, indexed once per pass."""

    by_pool: Mapping[str, Mapping[str, InstanceType]]

    @classmethod
    def of(cls, instance_types_by_nodepool: Mapping[str, Sequence[InstanceType]]) -> Catalog:
        return cls({pool: {it.name: it for it in types} for pool, types in instance_types_by_nodepool.items()})

    def types(self, pool: str) -> Mapping[str, InstanceType] | None:
        found = self.by_pool.get(pool)
        return found if found else None

    def price(self, pool: str, node: StateNode) -> float:
        instance_type = (self.by_pool.get(pool) or {}).get(node.instance_type)
        offering = instance_type.offering(node.zone, node.capacity_type) if instance_type is not None else None
        return offering.price if offering is not None else 0.0


def explain(node: StateNode, code: str, message: str, method: str = "") -> Explanation:
    return Explanation(node.name, node.nodeclaim_name, node.nodepool, code, message, method)


def pod_facts(state: ClusterState, pod: Pod) -> PodFacts:
    """Prefer the manifest: it carries the start time and readiness the Pod model omits."""
    manifest = state.pod_manifests.get(pod.key)
    if manifest is None:
        return facts(pod)
    return state.derived(pod.key, manifest, facts)


def deleting_nodes_pods(state: ClusterState, pdbs: PdbLimits, now: datetime) -> tuple[set[str], list[Pod]]:
    """Nodes marked for deletion, and their pods that need a new home (upstream's
    ``CurrentlyReschedulablePods``): active pods and terminating StatefulSet pods (their successor needs
    the room); not DaemonSet or static pods, nor pods an active do-not-disrupt or a PDB that never allows
    an eviction keeps where they are. Shared by the provisioner and the disruption simulation."""
    names: set[str] = set()
    pods: list[Pod] = []
    for node in state.state_nodes():
        if node.marked_for_deletion:
            names.add(node.name)
            pods.extend(p for p in node.pods.values() if pdbs.is_currently_reschedulable(pod_facts(state, p), now))
    return names, pods


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


@functools.lru_cache(maxsize=256)
def _duration_seconds(raw: str) -> float | None:
    try:
        return parse_length(raw)
    except DurationError:
        return None


def lifetime_remaining(node: StateNode, nodepool: NodePool, now: datetime) -> float:
    """Fraction of the node's expireAfter still ahead (1 when it never expires)."""
    claim = node.nodeclaim
    raw = (claim.expire_after if claim else None) or nodepool.expire_after
    created = claim.creation_timestamp if claim else None
    if not raw or raw == "Never" or created is None:
        return 1.0
    total = _duration_seconds(str(raw))
    if total is None:
        return 1.0
    if total <= 0:
        return 1.0
    return min(1.0, max(0.0, (total - (now - created).total_seconds()) / total))


@dataclass(slots=True)
class Assessment:
    """Every managed node judged once per pass: candidates (with any pod blocker) and the rest explained."""

    candidates: list[Candidate]
    pod_blockers: dict[str, tuple[str, str]]  # candidate name -> (code, message) of its blocking pod
    explanations: list[Explanation]

    def for_class(self, *, eventual: bool) -> tuple[list[Candidate], list[Explanation]]:
        """Candidates of a disruption class: pod blockers are waived for eventual (drift) disruption of
        NodeClaims with a terminationGracePeriod, since their drain is bounded."""
        chosen: list[Candidate] = []
        explanations = list(self.explanations)
        for candidate in self.candidates:
            blocker = self.pod_blockers.get(candidate.name)
            claim = candidate.node.nodeclaim
            waived = eventual and claim is not None and bool(claim.termination_grace_period)
            if blocker is not None and not waived:
                explanations.append(explain(candidate.node, *blocker))
                continue
            chosen.append(candidate)
        return chosen, explanations


def _pod_views(state: ClusterState, node: StateNode) -> tuple[list[PodFacts], float, float]:
    """The node's pods as disruption sees them, with the costs that depend on them alone."""
    views = [pod_facts(state, pod) for pod in node.pods.values()]
    reschedule_cost = podutil.reschedule_cost(v for v in views if podutil.is_reschedulable(v))
    return views, reschedule_cost, sum(podutil.eviction_cost(v) for v in views)


def assess(state: ClusterState, catalog: Catalog, pdbs: PdbLimits, now: datetime) -> Assessment:
    candidates: list[Candidate] = []
    blockers: dict[str, tuple[str, str]] = {}
    explanations: list[Explanation] = []
    for node in state.state_nodes():
        if not node.managed:
            continue
        blocked = node_blocker(node, now)
        if blocked is not None:
            explanations.append(explain(node, *blocked))
            continue
        nodepool = state.nodepools.get(node.nodepool)
        types = catalog.types(node.nodepool)
        if nodepool is None or types is None:
            what = "not found" if nodepool is None else "has no instance types"
            explanations.append(explain(node, "NoNodePool", f"NodePool {node.nodepool} {what}"))
            continue
        views, reschedule_cost, eviction_cost = node.memo("disruption.pods", lambda n=node: _pod_views(state, n))
        blocker = pods_blocker(views, pdbs, now)
        if blocker is not None:
            blockers[node.name] = ("DoNotDisrupt" if wk.DO_NOT_DISRUPT in blocker else "PDB", blocker)
        # Only pods that will actually leave need room: not do-not-disrupt, not fully PDB-blocked.
        moving = [
            pod
            for pod, view in zip(node.pods.values(), views, strict=True)
            if pdbs.is_currently_reschedulable(view, now)
        ]
        candidates.append(
            Candidate(
                node=node,
                nodepool=nodepool,
                instance_type=types.get(node.instance_type),
                price=catalog.price(node.nodepool, node),
                pods=views,
                reschedulable=moving,
                reschedule_cost=reschedule_cost,
                disruption_cost=eviction_cost * lifetime_remaining(node, nodepool, now),
            )
        )
    return Assessment(candidates, blockers, explanations)


def build_candidates(
    state: ClusterState,
    catalog: Catalog,
    pdbs: PdbLimits,
    now: datetime,
    *,
    eventual: bool = False,
) -> tuple[list[Candidate], list[Explanation]]:
    """Candidates for one disruption class (``eventual`` = drift) and explanations for the rest."""
    return assess(state, catalog, pdbs, now).for_class(eventual=eventual)


def budget_allowances(state: ClusterState, reason: str, now: datetime) -> dict[str, BudgetAllowance]:
    """Per NodePool: how many more nodes may start disrupting for ``reason``.

    Counts managed, initialized nodes whose instance is not already terminating;
    those NotReady or deleting/marked use the budget up.
    """
    counts: dict[str, int] = {}
    disrupting: dict[str, int] = {}
    for node in state.state_nodes():
        if node.nodeclaim is None or not node.initialized or not node.nodepool:
            continue
        if node.nodeclaim.condition_true("InstanceTerminating"):
            continue
        counts[node.nodepool] = counts.get(node.nodepool, 0) + 1
        if node.marked_for_deletion or (node.node is not None and not node.node.is_ready):
            disrupting[node.nodepool] = disrupting.get(node.nodepool, 0) + 1
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
