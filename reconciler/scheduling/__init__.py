"""The scheduling simulation (pure, synchronous): where would these pods go, and what would need launching?

Used by the provisioner (``reconciler.provisioning.provisioner.plan``) and by
disruption to answer "if these nodes went away, would their pods fit on the
remaining nodes, and how many new NodeClaims with which instance types would
they need?":

    from reconciler.scheduling import SchedulingContext, simulate

    context = SchedulingContext.build(state, instance_types_by_nodepool, settings)  # once per snapshot
    result = simulate(state, instance_types_by_nodepool, settings, now,
                      remove={"node-a", "node-b"},          # node or NodeClaim names treated as gone
                      pending_only_nodes=busy_node_names,   # nodes inside consolidateAfter (take pending pods only)
                      context=context)
    result.errors          # pod key -> reason, for pods that would not fit anywhere
    result.existing        # pod key -> remaining node it would land on
    result.new_claims      # list[ScheduledClaim]: .nodepool, .pods, .instance_types (cheapest first),
                           #   .prices, .requirements (instance-type/capacity-type pinned), .requests,
                           #   .capacity_types, .cheapest_price()
    result.all_scheduled(keys)

By default ``simulate`` schedules the pending pods plus the reschedulable pods
(not DaemonSet, static, terminal or terminating) of the removed nodes and of
nodes already marked for deletion; pass ``pods=`` to choose them yourself. The
removed nodes' pods do not count for topology spread / affinity while they
move. Nodes marked for deletion in the state are never placement targets.

Lower level: ``Scheduler(context, now, exclude_nodes=..., pending_only_nodes=...,
scheduling_pods=...).solve(pods)`` returns the same ``SchedulingResult``.
"""

from reconciler.scheduling.context import SchedulingContext
from reconciler.scheduling.results import ScheduledClaim, SchedulingResult
from reconciler.scheduling.scheduler import Scheduler
from reconciler.scheduling.simulate import pods_to_move, simulate

__all__ = ["ScheduledClaim", "Scheduler", "SchedulingContext", "SchedulingResult", "pods_to_move", "simulate"]
