"""Static NodePools (``spec.replicas``, feature gate ``StaticCapacity``): keep exactly N nodes, decided purely.

As Karpenter's ``static.provisioning`` and ``static.deprovisioning`` controllers:

- a pool counts its NodeClaims as *running* (not marked for deletion), *pending disruption* (chosen by a
  disruption command, replacement on the way) and *deleting* (deletion requested, until the instance is
  gone);
- fewer running + pending-disruption claims than ``replicas``: create the missing ones, as many as
  ``limits.nodes`` still allows once running, pending-disruption and deleting claims are counted
  ("nodepool node limit reached" otherwise);
- more running claims than ``replicas``: delete the surplus, choosing claims that never launched first,
  then empty nodes (only DaemonSet pods, no active do-not-disrupt pod), then the lowest disruption cost
  (nodes with an active do-not-disrupt pod last; cost = rescheduling cost x lifetime remaining).

A static claim is not sized for pods: it asks for the pool's cheapest compatible instance type (its
requirements list every compatible type, cheapest first, up to ``max_instance_types``; Karpenter leaves
the type list to the cloud provider, which picks the same cheapest one). Static pools never provision for
pending pods and are never consolidated; only drift replaces their nodes (``disruption.static_drift``).
Pools are skipped unless the gate is on, and while not Ready or being deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from reconciler.cloud.types import InstanceType
from reconciler.model import labels as wk
from reconciler.model.nodepool import NODES, NodePool
from reconciler.model.podutil import do_not_disrupt, reschedule_cost
from reconciler.model.requirements import Requirement
from reconciler.model.resources import EMPTY
from reconciler.provisioning.lifetime import lifetime_remaining
from reconciler.provisioning.nodeclaim import PlannedNodeClaim
from reconciler.scheduling.context import nodeclass_problem
from reconciler.scheduling.instancetypes import TypeIndex, min_values_shortfall, order_by_price
from reconciler.scheduling.results import ScheduledClaim
from reconciler.scheduling.templates import build_template
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState
from reconciler.state.node import StateNode

GATE = "StaticCapacity"
_SIMULATION_KEYS = (wk.REGISTERED, wk.INITIALIZED)


@dataclass(slots=True)
class PoolCounts:
    running: list[StateNode] = field(default_factory=list)
    pending_disruption: list[StateNode] = field(default_factory=list)
    deleting: list[StateNode] = field(default_factory=list)


@dataclass(slots=True)
class StaticPlan:
    create: list[PlannedNodeClaim] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)  # NodeClaim names, the surplus of static pools
    # (NodePool, message): what each static pool needs and why it got less (limits, no instance type).
    notes: list[tuple[str, str]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.create and not self.delete


def static_pools(state: ClusterState) -> list[NodePool]:
    return sorted((p for p in state.nodepools.values() if p.is_static), key=lambda p: p.name)


def counts(state: ClusterState, pool: str) -> PoolCounts:
    found = PoolCounts()
    for node in state.state_nodes():
        if node.nodepool != pool or node.nodeclaim is None:
            continue
        if node.deleting:
            found.deleting.append(node)
        elif node.marked_for_deletion:
            found.pending_disruption.append(node)
        else:
            found.running.append(node)
    return found


def plan_static(
    state: ClusterState,
    instance_types_by_nodepool: Mapping[str, Sequence[InstanceType]],
    settings: Settings,
    now: datetime,
    name_for: Callable[[str], str],
) -> StaticPlan:
    plan = StaticPlan()
    if not settings.gate(GATE):
        return plan
    for pool in static_pools(state):
        if pool.deletion_timestamp is not None:
            continue
        problem = nodeclass_problem(pool, state, require_nodeclass=settings.require_nodeclass)
        if problem is not None or not pool.ready:
            plan.notes.append((pool.name, problem or f"NodePool {pool.name} is not Ready"))
            continue
        found = counts(state, pool.name)
        desired = int(pool.replicas or 0)
        active = len(found.running) + len(found.pending_disruption)
        if active < desired:
            _scale_up(plan, state, pool, found, desired, instance_types_by_nodepool.get(pool.name, ()), settings,
                      name_for)
        elif len(found.running) > desired:
            plan.delete.extend(surplus(found.running, len(found.running) - desired, pool, now))
    return plan


def node_limit(pool: NodePool) -> int | None:
    raw = (pool.limits or {}).get(NODES)
    return None if raw is None else int(raw) // 1000


def allowed_new(pool: NodePool, found: PoolCounts, wanted: int) -> int:
    """How many claims ``limits.nodes`` lets the pool add (Karpenter's ReserveNodeCount): running,
    pending-disruption and deleting claims all count against it."""
    limit = node_limit(pool)
    if limit is None:
        return wanted
    used = len(found.running) + len(found.pending_disruption) + len(found.deleting)
    return max(0, min(wanted, limit - used))


def _scale_up(plan: StaticPlan, state: ClusterState, pool: NodePool, found: PoolCounts, desired: int,
              types: Sequence[InstanceType], settings: Settings, name_for: Callable[[str], str]) -> None:
    wanted = desired - len(found.running)
    granted = allowed_new(pool, found, wanted)
    if granted <= 0:
        plan.notes.append((pool.name, f"NodePool {pool.name}: node limit reached (limits.nodes "
                                      f"{node_limit(pool)}; {desired} replicas wanted, {len(found.running)} running)"))
        return
    claim = static_claim(pool, types, settings)
    if isinstance(claim, str):
        plan.notes.append((pool.name, claim))
        return
    if granted < wanted:
        plan.notes.append((pool.name, f"NodePool {pool.name}: limits.nodes {node_limit(pool)} allows {granted} "
                                      f"of the {wanted} missing replica(s)"))
    nodeclass = state.nodeclass(pool)
    plan.create.extend(PlannedNodeClaim(name_for(pool.name), claim, nodeclass) for _ in range(granted))


def static_claim(pool: NodePool, types: Sequence[InstanceType], settings: Settings) -> ScheduledClaim | str:
    """The claim a static pool launches (no pods, no requests), or why it cannot launch any."""
    template = build_template(pool, TypeIndex().infos(types), (),
                              relax_min_values=settings.min_values_policy == "BestEffort")
    if isinstance(template, str):
        return template
    requirements = template.requirements
    ordered = order_by_price(template.types, requirements)[: settings.max_instance_types]
    relaxed = False
    shortfall = min_values_shortfall(ordered, requirements)
    if shortfall:
        if settings.min_values_policy != "BestEffort":
            parts = ", ".join(f"{k} needs {want} values, {have} remain" for k, (want, have) in shortfall.items())
            return f"NodePool {pool.name} could not meet minValues ({parts})"
        requirements = requirements.replacing(
            *(requirements[key].with_min_values(have) for key, (_, have) in shortfall.items()))
        relaxed = True
    capacity_types = sorted({o.capacity_type for info in ordered for o in info.offerings_for(requirements)})
    type_key = requirements.get(wk.INSTANCE_TYPE)
    pinned = [Requirement(wk.INSTANCE_TYPE, False, frozenset(info.name for info in ordered),
                          min_values=type_key.min_values if type_key else None)]
    if capacity_types:
        pinned.append(Requirement(wk.CAPACITY_TYPE, False, frozenset(capacity_types)))
    return ScheduledClaim(
        nodepool=pool,
        pods=[],
        requirements=requirements.add(*pinned).without(*_SIMULATION_KEYS),
        instance_types=[info.instance_type for info in ordered],
        prices=[info.cheapest_price(requirements) for info in ordered],
        requests=EMPTY,
        labels=dict(template.labels),
        taints=template.taints,
        startup_taints=pool.startup_taints,
        min_values_relaxed=relaxed,
    )


def surplus(running: Sequence[StateNode], count: int, pool: NodePool, now: datetime) -> list[str]:
    """The ``count`` claims to delete when a static pool has too many (Karpenter's deprovisioning order)."""
    unlaunched = [n for n in running if not n.nodeclaim or not n.nodeclaim.provider_id]
    launched = [n for n in running if n not in unlaunched]
    empty = [n for n in launched if _empty(n, now)]
    busy = [n for n in launched if n not in empty]
    busy.sort(key=lambda n: (_has_do_not_disrupt(n, now),
                             reschedule_cost(n.reschedulable_pods()) * lifetime_remaining(n, pool, now), n.name))
    return [n.nodeclaim_name for n in [*unlaunched, *empty, *busy][:count]]


def _empty(node: StateNode, now: datetime) -> bool:
    pods = [p for p in node.pods.values() if not p.is_terminal]
    return all(p.is_daemonset_pod for p in pods) and not _has_do_not_disrupt(node, now)


def _has_do_not_disrupt(node: StateNode, now: datetime) -> bool:
    return any(do_not_disrupt(p, now) is not None for p in node.pods.values() if p.is_active)
