"""When each of a plan's disruption commands would really run, and how long the cluster takes to settle.

The simulator carries a command out at once: replacements boot and the candidates' pods move in the
same instant, so a ``disrupt: {until: stable}`` step would put every replacement at one timestamp. The
live controller is slower, and budgets pace it: a command launches its replacements, waits until they
are initialized, then drains and deletes its candidates; the candidates count against their NodePool's
disruption budget until they are gone, and the next command of that pool may start only while the
budget has room (Karpenter re-runs disruption right after a command, so commands within the budget
overlap).

``Timeline`` is the plan's hook after each pass that acted (``SimOptions.after_disruption_pass``): it
gives the command a start time (now, or when enough of the pool's in-flight commands have finished and
a budget window allows it), an initialized time and a finish time, writes them into the result record
(``startedAt``, ``readyAt``, ``finishedAt``), and moves the virtual clock to the start, so the next pass
(and every budget window or ``consolidateAfter`` after it) sees the time it would run at.

Durations are estimates, named here and printed with the plan: from launch to an initialized Node
(EC2 boot, kubelet registration, initialization) and each drain taking its pods' full termination grace
period (the upper bound: most pods exit sooner), at least the drain's 5 s minimum.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from reconciler.disruption.budgets import BudgetError, InFlight, earliest_room, parse_budgets
from reconciler.kube.api import POD
from reconciler.lifecycle.drain import MIN_DRAIN_TIME
from reconciler.model.meta import format_time, parse_time
from reconciler.sim.runner import Simulation

LAUNCH_TO_REGISTERED = timedelta(seconds=60)  # EC2 launch to the kubelet registering its Node
REGISTERED_TO_INITIALIZED = timedelta(seconds=30)  # Node Ready, startup taints gone, resources reported
LAUNCH_TO_INITIALIZED = LAUNCH_TO_REGISTERED + REGISTERED_TO_INITIALIZED
DEFAULT_GRACE = 30  # seconds: Kubernetes' default terminationGracePeriodSeconds
ASSUMPTIONS = (
    f"times assume {int(LAUNCH_TO_INITIALIZED.total_seconds())} s from launch to an initialized node and "
    "each drain taking its pods' termination grace period"
)
# The simulation's drains take no time of their own: the timeline times them (``SimOptions.min_drain``).
SIMULATED_DRAIN = timedelta(0)


@dataclass(slots=True, frozen=True)
class TimedCommand:
    nodepool: str
    reason: str
    nodes: tuple[str, ...]
    replacements: int
    started: datetime
    ready: datetime  # replacements initialized (the start, without replacements)
    finished: datetime  # candidates drained and deleted

    def in_flight(self, moment: datetime) -> bool:
        return self.started <= moment < self.finished


class Timeline:
    """Pass ``after_pass`` as the simulation's ``SimOptions.after_disruption_pass`` (with ``min_drain`` 0: drains
    are timed here, at least the 5 s minimum; the simulator carries commands out at once, so the next pass
    starts when the live controller would start the next command, not after this one's drain)."""

    def __init__(self, deadline: datetime) -> None:
        self.deadline = deadline
        self.commands: list[TimedCommand] = []

    def after_pass(self, sim: Simulation, record: dict[str, Any], first_item: int, first_event: int) -> None:
        items = record["disrupted"][first_item:]
        if not items:
            return
        pool, reason = str(items[0].get("nodepool") or ""), str(items[0]["reason"])
        # Each item of a command names all its replacements; those of this pool count towards its budget.
        pools = {item["nodeclaim"]: item.get("nodepool") for item in record["launched"]}
        replacements = sum(1 for name in items[0].get("replacements") or [] if pools.get(name, pool) == pool)
        start = self._earliest_start(sim, pool, reason, len(items), replacements)
        ready = start + (LAUNCH_TO_INITIALIZED if any(item.get("replacements") for item in items) else timedelta())
        events = record["events"][first_event:]
        drain = max(timedelta(seconds=self._drain_seconds(sim, events)), MIN_DRAIN_TIME)
        finished = ready + drain
        for item in items:
            item["startedAt"], item["readyAt"], item["finishedAt"] = (
                format_time(start), format_time(ready), format_time(finished)
            )
        for event in events:  # the drain starts once the replacements are ready: its evictions happen then
            if event.get("reason") in ("Evicted", "DeletedWithNode"):
                event["at"] = format_time(ready)
        self.commands.append(
            TimedCommand(pool, reason, tuple(i["node"] for i in items), replacements, start, ready, finished)
        )
        if start > sim.now:
            sim.advance((start - sim.now).total_seconds())

    def _earliest_start(self, sim: Simulation, pool: str, reason: str, count: int, replacements: int) -> datetime:
        """The first moment the pool's budget has room for ``count`` more disrupting nodes, counted as the live
        controller counts them: the nodes of commands still in flight then are still there, and disrupting."""
        now = sim.now
        state = sim.cluster.state()
        nodepool = state.nodepools.get(pool)
        ours = [InFlight(c.started, c.ready, c.finished, len(c.nodes), c.replacements) for c in self.commands
                if c.nodepool == pool and c.finished > now]
        if nodepool is None:
            return now
        try:
            budgets = parse_budgets(nodepool.disruption.get("budgets"))
        except BudgetError:
            return now
        # The simulator carried this command (and the earlier ones) out already.
        pool_nodes = state.nodepool_node_counts().get(pool, 0)
        found = earliest_room(pool, budgets, reason, nodes=count, replacements=replacements, pool_nodes=pool_nodes,
                              in_flight=ours, now=now, until=self.deadline)
        if found is not None:
            return found
        # No moment gives room for all of them (the engine counted the pool after the earlier commands were
        # carried out): the command runs alone, once everything before it is done.
        return max([now, *(c.finished for c in ours)])

    @staticmethod
    def _drain_seconds(sim: Simulation, events: Sequence[Mapping[str, Any]]) -> int:
        longest = 0
        for event in events:
            if event.get("reason") != "Evicted":
                continue
            _, _, key = str(event.get("object", "")).partition("/")
            namespace, _, name = key.partition("/")
            pod = sim.kube.peek(POD, name, namespace) or {}
            grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
            longest = max(longest, DEFAULT_GRACE if grace is None else int(grace))
        return longest


def settled_at(records: Sequence[Mapping[str, Any]], start: datetime) -> datetime:
    """When the last change is done: the last command's drain, or the last launched node initialized."""
    last = start
    for record in records:
        clock = parse_time(record["clock"]) or start
        if record["launched"] and record["step"] != "disrupt":  # a disrupt step's launches are replacements
            last = max(last, clock + LAUNCH_TO_INITIALIZED)
        for item in record["disrupted"]:
            last = max(last, parse_time(item.get("finishedAt")) or clock)
    return last
