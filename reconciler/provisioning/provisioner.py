"""The provisioner's decision, pure: which pods fit existing capacity and which NodeClaims to create.

``plan`` reads the snapshot (pending pods plus the reschedulable pods of nodes
being deleted), runs the scheduler against existing and in-flight nodes and the
NodePools' instance types, and returns named NodeClaims ready to be created,
the pods that fit existing capacity (to nominate those nodes), and a reason for
every pod left pending.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from reconciler.cloud.types import InstanceType
from reconciler.model.pdb import PdbError, PdbLimits
from reconciler.model.pod import Pod
from reconciler.provisioning.nodeclaim import PlannedNodeClaim
from reconciler.provisioning.validation import split_pods
from reconciler.scheduling.context import SchedulingContext
from reconciler.scheduling.results import SchedulingResult
from reconciler.scheduling.scheduler import Scheduler
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState
from reconciler.state.pods import deleting_nodes_pods


@dataclass(slots=True)
class ProvisioningPlan:
    nodeclaims: list[PlannedNodeClaim] = field(default_factory=list)
    existing: dict[str, str] = field(default_factory=dict)  # pod key -> node (or in-flight NodeClaim) name
    pending: dict[str, str] = field(default_factory=dict)  # pod key -> why it stays pending
    ignored: tuple[str, ...] = ()  # pods the provisioner does not take on (validation, DRA, not for Karpenter)
    unschedulable: tuple[str, ...] = ()  # pods it took on and could not place
    events: list[dict[str, str]] = field(default_factory=list)
    result: SchedulingResult | None = None


def nomination_window(settings: Settings) -> timedelta:
    """How long nodes chosen for pods are protected from disruption: max(2 x batch max, 10 s)."""
    return timedelta(seconds=max(2 * settings.batch_max_duration, 10.0))


def pods_to_schedule(state: ClusterState, now: datetime) -> tuple[list[Pod], list[Pod]]:
    """(pending pods, pods of nodes marked for deletion that need a new home: ``deleting_nodes_pods``)."""
    pending = state.pending_pods()
    if not any(node.marked_for_deletion for node in state.state_nodes()):
        return pending, []
    try:
        pdbs = PdbLimits.from_manifests(
            state.pdbs.values(), state.pod_manifests.values(), lookup=state.stored_controller
        )
    except PdbError:
        pdbs = PdbLimits(())  # an unreadable PDB must not stop provisioning: plan for every pod
    return pending, deleting_nodes_pods(state, pdbs, now)[1]


def plan(
    state: ClusterState,
    instance_types_by_nodepool: Mapping[str, Sequence[InstanceType]],
    settings: Settings,
    now: datetime,
    name_for: Callable[[str], str],
    *,
    should_stop: Callable[[], bool] | None = None,
) -> ProvisioningPlan:
    """``should_stop`` lets a caller with a clock cut the solve short (Karpenter stops after 1 minute and keeps
    the partial result); pods not reached stay pending with a reason saying so."""
    pending, moving = pods_to_schedule(state, now)
    if not pending and not moving:
        return ProvisioningPlan()
    accepted, ignored, silent = split_pods([*pending, *moving], state)
    events = [
        {"object": f"Pod/{key}", "reason": "FailedScheduling", "message": reason}
        for key, reason in sorted(ignored.items())
    ]
    context = SchedulingContext.build(state, instance_types_by_nodepool, settings)
    scheduler = Scheduler(context, now, scheduling_pods={pod.key for pod in moving}, should_stop=should_stop,
                          reserved_fallback=False)
    result = scheduler.solve(accepted)
    nodeclaims = [
        PlannedNodeClaim(name_for(claim.nodepool.name), claim, state.nodeclass(claim.nodepool))
        for claim in result.new_claims
    ]
    pending_keys = {pod.key for pod in pending}
    reasons = {**silent, **ignored, **result.errors}
    for claim in nodeclaims:
        events.append({
            "object": f"NodeClaim/{claim.name}",
            "reason": "Nominated",
            "message": f"planned for {len(claim.pods)} pod(s), instance types "
                       f"{', '.join(claim.instance_type_options[:5])}"
                       + (f" and {len(claim.instance_type_options) - 5} other(s)"
                          if len(claim.instance_type_options) > 5 else ""),
        })
    events.extend(result.events)
    return ProvisioningPlan(
        nodeclaims=nodeclaims,
        existing=dict(result.existing),
        pending={key: reason for key, reason in sorted(reasons.items()) if key in pending_keys},
        ignored=tuple(sorted({*ignored, *silent})),
        unschedulable=tuple(sorted(result.errors)),
        events=events,
        result=result,
    )
