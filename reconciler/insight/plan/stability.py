"""Running a simulated cluster until the reconciler has nothing left to do, jumping the virtual clock.

After each provisioning + ``disrupt until stable`` round, the disruption engine's explanations for
the nodes it left alone say what is waiting on time (a budget window, consolidateAfter, a
nomination); the clock jumps to the earliest moment one of those can change, and the loop goes on
until nothing waits or the horizon is reached. The blockers met on the way (budgets, PDBs,
do-not-disrupt pods, ...) are tracked with when they started and cleared.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from reconciler.disruption.budgets import BudgetError, next_opening, parse_budgets
from reconciler.disruption.decide import decide
from reconciler.disruption.policy import consolidation_wait, settings_of
from reconciler.disruption.types import DisruptionDecision, Explanation
from reconciler.insight.frames import RecordingSimulation
from reconciler.lifecycle.nodepool_types import instance_types_by_nodepool
from reconciler.model.meta import format_time
from reconciler.state.cluster import ClusterState

# Explanation codes that time alone can lift (the clock is moved to when that happens).
TIME_BOUND = frozenset({"Budget", "ConsolidateAfter", "Nominated"})
# Explanation codes worth reporting as blockers.
BLOCKER_CODES = frozenset({"Budget", "PDB", "DoNotDisrupt", "Unschedulable", "Balanced", "NoNodePool"})
MAX_STEPS = 400
# A budget still closed at every boundary this far ahead never opens (cron schedules repeat within a week).
NEVER_OPENS = timedelta(days=8)


@dataclass(slots=True)
class Blocker:
    node: str
    nodepool: str
    code: str
    message: str
    first_seen: datetime
    last_seen: datetime
    cleared_at: datetime | None = None  # first moment the engine no longer gave this reason
    method: str = ""  # the disruption method whose check held the node ("" for shared eligibility checks)

    @property
    def resolved(self) -> bool:
        return self.cleared_at is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "nodepool": self.nodepool,
            "code": self.code,
            "method": self.method,
            "message": self.message,
            "firstSeen": format_time(self.first_seen),
            "lastSeen": format_time(self.last_seen),
            "clearedAt": format_time(self.cleared_at) if self.cleared_at else None,
        }


async def run_to_stability(
    sim: RecordingSimulation, deadline: datetime, blockers: dict[tuple[str, str], Blocker]
) -> bool:
    """Provision + disrupt until nothing changes; jump the clock while something waits on time.

    Returns True when the horizon cut the run short.
    """
    acting_since: datetime | None = None  # start of the disrupt steps since blockers were last tracked
    while len(sim.records) < MAX_STEPS:
        await sim.run_step("provision", {})
        if acting_since is None:
            acting_since = sim.now  # a blocker gone after these steps was lifted when they began
        record = await sim.run_step("disrupt", {"until": "stable"})
        if sim.now > deadline:
            return True  # budgets paced the commands past the horizon
        if record["disrupted"]:
            continue  # a stable pass may still be capped; go again at the same time
        state = sim.cluster.state()
        decision = explanations_of(record, state) or await _decision(sim)
        _track_blockers(decision, sim.now, blockers, cleared_at=acting_since)
        acting_since = None
        wake = next_wake(state, decision, sim.now)
        if wake is None:
            return False
        if wake > deadline:
            return True
        await sim.run_step("advance", (wake - sim.now).total_seconds())
    return True


_BLOCKED_MESSAGE = re.compile(r"^([A-Z][A-Za-z]+): (.*)$", re.DOTALL)


def explanations_of(record: Mapping[str, Any], state: ClusterState) -> DisruptionDecision | None:
    """The explanations a disrupt step's single, command-less pass recorded as DisruptionBlocked events.

    That pass saw the state the step left, so re-deciding would repeat it. None (decide again)
    when the step did anything else or an event is not in the ``Code: message`` form.
    """
    if record["disrupted"] or any(e.get("reason") == "DisruptionAborted" for e in record["events"]):
        return None
    explanations = []
    for event in record["events"]:
        if event.get("reason") != "DisruptionBlocked":
            continue
        match = _BLOCKED_MESSAGE.match(str(event.get("message", "")))
        kind, _, name = str(event.get("object", "")).partition("/")
        node = state.state_node(name)
        if match is None or kind != "Node" or node is None:
            return None
        explanations.append(
            Explanation(name, node.nodeclaim_name, node.nodepool, match[1], match[2], str(event.get("method", "")))
        )
    return DisruptionDecision(None, explanations)


async def _decision(sim: RecordingSimulation) -> DisruptionDecision:
    state = sim.cluster.state()
    types = await instance_types_by_nodepool(sim.cloud, state, sim.settings)
    return decide(state, types, sim.settings, sim.now)


def _track_blockers(
    decision: DisruptionDecision, now: datetime, blockers: dict[tuple[str, str], Blocker], *, cleared_at: datetime
) -> None:
    seen = set()
    for explanation in decision.explanations:
        if explanation.code not in BLOCKER_CODES:
            continue
        key = (explanation.node, explanation.code)
        seen.add(key)
        found = blockers.get(key)
        if found is None:
            blockers[key] = Blocker(
                explanation.node, explanation.nodepool, explanation.code, explanation.message, now, now,
                method=explanation.method,
            )
        else:
            found.last_seen, found.message, found.cleared_at = now, explanation.message, None
            found.method = explanation.method
    for key, blocker in blockers.items():
        if key not in seen and blocker.cleared_at is None:
            blocker.cleared_at = cleared_at


def next_wake(state: ClusterState, decision: DisruptionDecision, now: datetime) -> datetime | None:
    """The earliest future moment when a time-bound explanation could stop holding (None: nothing waits)."""
    moments: list[datetime] = []
    budget_pools: set[str] = set()
    for explanation in decision.explanations:
        if explanation.code not in TIME_BOUND:
            continue
        node = state.state_node(explanation.node)
        pool = state.nodepools.get(explanation.nodepool)
        if explanation.code == "Budget" and pool is not None:
            budget_pools.add(pool.name)
        elif explanation.code == "ConsolidateAfter" and node is not None and pool is not None:
            wait = consolidation_wait(node, settings_of(pool), now)
            if wait is not None and wait != timedelta.max:
                moments.append(now + wait)
        elif explanation.code == "Nominated" and node is not None and node.nominated_until is not None:
            moments.append(node.nominated_until)
    for name in sorted(budget_pools):
        nodes = sum(1 for node in state.state_nodes() if node.nodepool == name)
        try:
            budgets = parse_budgets(state.nodepools[name].disruption.get("budgets"))
        except BudgetError:
            continue  # fails closed until the NodePool is fixed: waiting never helps
        opening = next_opening(budgets, nodes, now, now + NEVER_OPENS)
        if opening is not None:
            moments.append(opening)
    future = [m for m in moments if m > now]
    return min(future) if future else None
