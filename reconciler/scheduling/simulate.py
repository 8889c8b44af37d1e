"""One-call scheduling simulations for callers other than the provisioner (disruption, ``explain``)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime

from reconciler.cloud.types import InstanceType
from reconciler.model.pod import Pod
from reconciler.scheduling.context import SchedulingContext
from reconciler.scheduling.results import SchedulingResult
from reconciler.scheduling.scheduler import Scheduler
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState


def pods_to_move(state: ClusterState, nodes: Collection[str]) -> list[Pod]:
    """Pods that would need a new home if ``nodes`` went away (plus those of nodes already being deleted)."""
    moving: list[Pod] = []
    for node in state.state_nodes():
        if node.name in nodes or node.nodeclaim_name in nodes or node.marked_for_deletion:
            moving.extend(node.reschedulable_pods())
    return moving


def simulate(
    state: ClusterState,
    instance_types_by_nodepool: Mapping[str, Sequence[InstanceType]],
    settings: Settings,
    now: datetime,
    *,
    remove: Collection[str] = (),
    pods: Sequence[Pod] | None = None,
    include_pending: bool = True,
    pending_only_nodes: Collection[str] = (),
    context: SchedulingContext | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> SchedulingResult:
    """Schedule as if the nodes named in ``remove`` (node or NodeClaim names) were gone.

    ``pods`` defaults to the reschedulable pods of the removed nodes and of nodes
    already marked for deletion, plus (``include_pending``) the pending pods.
    The result says which pods land on remaining nodes (``existing``), which new
    NodeClaims they would need (``new_claims``, each with cheapest-first
    instance types) and which fail (``errors``). Pass a prebuilt ``context`` when
    simulating many candidate sets against the same snapshot.
    """
    context = context or SchedulingContext.build(state, instance_types_by_nodepool, settings)
    removed = set(remove)
    excluded = {n.name for n in state.state_nodes() if n.name in removed or n.nodeclaim_name in removed}
    if pods is None:
        pods = [*(state.pending_pods() if include_pending else []), *pods_to_move(state, excluded)]
    moving = {pod.key for pod in pods if pod.node_name}
    scheduler = Scheduler(
        context, now, exclude_nodes=excluded, pending_only_nodes=pending_only_nodes, scheduling_pods=moving,
        should_stop=should_stop,
    )
    return scheduler.solve(pods)
