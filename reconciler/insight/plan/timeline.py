"""When each of a plan's disruption commands would really run, and how long the cluster takes to settle.

The simulator carries a command out at once: replacements boot and the candidates' pods move in the
same instant, so a ``disrupt: {until: stable}`` step would put every replacement at one timestamp. The
live controller is slower, and budgets pace it: a command launches its replacements, waits until they
are initialized, then drains and deletes its candidates; the candidates count against their NodePool's
disruption budget until they are gone, and the next command of that pool may start only while the
budget has room (Karpenter re-runs disruption right after a command, so commands within the budget
overlap).

``Timeline`` is the plan's hook after each pass that acted (``Simulation.after_disruption_pass``): it
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

from reconciler.disruption.budgets import UNLIMITED, BudgetError, allowance, parse_budgets
from reconciler.kube.api import POD
from reconciler.lifecycle.drain import MIN_DRAIN_TIME
from reconciler.model.meta import format_time
from reconciler.sim.runner import Simulation

LAUNCH_TO_REGISTERED = timedelta(seconds=60)  # EC2 launch to the kubelet registering its Node
REGISTERED_TO_INITIALIZED = timedelta(seconds=30)  # Node Ready, startup taints gone, resources reported
LAUNCH_TO_INITIALIZED = LAUNCH_TO_REGISTERED + REGISTERED_TO_INITIALIZED
DEFAULT_GRACE = 30  # seconds: Kubernetes' default terminationGracePeriodSeconds
ASSUMPTIONS = (
    f"times assume {int(LAUNCH_TO_INITIALIZED.total_seconds())} s from launch to an initialized node and "
    "each drain taking its pods' termination grace period"
)


@dataclass(slots=True, frozen=True)
class TimedCommand:
    nodepool: str
    reason: str
    nodes: tuple[str, ...]
    started: datetime
    ready: datetime  # replacements initialized (the start, without replacements)
    finished: datetime  # candidates drained and deleted

    def in_flight(self, moment: datetime) -> bool:
        return self.started <= moment < self.finished


class Timeline:
    def __init__(self, sim: Simulation, deadline: datetime) -> None:
        self.sim = sim
        self.deadline = deadline
        self.commands: list[TimedCommand] = []
        # Drains are timed here (at least the 5 s minimum); the simulator carries commands out at once, so the
        # next pass starts when the live controller would start the next command, not after this one's drain.
        sim.cluster.terminator.min_drain = timedelta(0)

    def after_pass(self, record: dict[str, Any], first_item: int, first_event: int) -> None:
        items = record["disrupted"][first_item:]
        if not items:
            return
        pool, reason = str(items[0].get("nodepool") or ""), str(items[0]["reason"])
        start = self._earliest_start(pool, reason, len(items))
        ready = start + (LAUNCH_TO_INITIALIZED if any(item.get("replacements") for item in items) else timedelta())
        drain = max(timedelta(seconds=self._drain_seconds(record["events"][first_event:])), MIN_DRAIN_TIME)
        finished = ready + drain
        for item in items:
            item["startedAt"], item["readyAt"], item["finishedAt"] = (
                format_time(start), format_time(ready), format_time(finished)
            )
        self.commands.append(TimedCommand(pool, reason, tuple(i["node"] for i in items), start, ready, finished))
        if start > self.sim.now:
            self.sim.advance((start - self.sim.now).total_seconds())

    def _earliest_start(self, pool: str, reason: str, count: int) -> datetime:
        """The first moment the pool's budget has room for ``count`` more disrupting nodes."""
        from reconciler.insight.plan.stability import budget_boundaries

        now = self.sim.now
        state = self.sim.cluster.state()
        nodepool = state.nodepools.get(pool)
        if nodepool is None:
            return now
        raw = nodepool.disruption.get("budgets")
        try:
            budgets = parse_budgets(raw)
        except BudgetError:
            return now
        ours = [c for c in self.commands if c.nodepool == pool and c.finished > now]
        moments = {now, *(c.finished for c in ours), *budget_boundaries(raw, now)}
        node_count = state.nodepool_node_counts().get(pool, 0)
        for moment in sorted(m for m in moments if now <= m <= self.deadline):
            disrupting = sum(len(c.nodes) for c in ours if c.in_flight(moment))
            left = allowance(pool, budgets, reason, node_count=node_count, disrupting=disrupting, now=moment)
            if left.remaining == UNLIMITED or left.remaining >= count:
                return moment
        return now  # the engine let it run now; never later than what it decided

    def _drain_seconds(self, events: Sequence[Mapping[str, Any]]) -> int:
        longest = 0
        for event in events:
            if event.get("reason") != "Evicted":
                continue
            _, _, key = str(event.get("object", "")).partition("/")
            namespace, _, name = key.partition("/")
            pod = self.sim.kube.peek(POD, name, namespace) or {}
            grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
            longest = max(longest, DEFAULT_GRACE if grace is None else int(grace))
        return longest


def settled_at(records: Sequence[Mapping[str, Any]], start: datetime) -> datetime:
    """When the last change is done: the last command's drain, or the last launched node initialized."""
    last = start
    for record in records:
        clock = moment(record["clock"])
        if record["launched"] and record["step"] != "disrupt":  # a disrupt step's launches are replacements
            last = max(last, clock + LAUNCH_TO_INITIALIZED)
        for item in record["disrupted"]:
            last = max(last, moment(item["finishedAt"]) if item.get("finishedAt") else clock)
    return last


def moment(stamp: str) -> datetime:
    """A result document's ``YYYY-MM-DDTHH:MM:SSZ`` as an aware datetime."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
