"""``plan``: what a NodePool change would do to a cluster, from a snapshot, with the real engine.

Three simulations of the snapshot (the simulator's cloud prices every node, so every cost is a
sum of simulated offerings):

1. **current**: the snapshot as it is (cost, node mix, pods already pending);
2. **proposed**: the proposed NodePools applied, then the reconciler left alone until stable:
   NodeClaims of removed NodePools are deleted, then provisioning and disruption passes run, and
   the virtual clock jumps to the next moment something time-bound could change (a budget window
   opening or closing, a consolidateAfter or nomination running out) until nothing is left
   waiting or ``horizon`` is reached;
3. **floor**: the proposed NodePools with every pod of a managed node made pending and one
   provisioning pass: what a fresh cluster would cost under the new config.

Between clock jumps the engine's own ``decide`` is asked why the remaining nodes are left alone;
those explanations are the budget/PDB/do-not-disrupt blockers of the report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from reconciler.api.cron import next_activation
from reconciler.disruption.budgets import BudgetError, parse_budgets
from reconciler.disruption.controller import decide
from reconciler.disruption.drift import drift_reason
from reconciler.disruption.policy import consolidation_wait, settings_of
from reconciler.disruption.types import DisruptionDecision
from reconciler.insight.catalog import narrowed_catalog
from reconciler.insight.frames import Frame, RecordingSimulation, node_mix
from reconciler.insight.proposal import (
    PoolChange,
    apply_proposal,
    fresh_provision_objects,
    nodeclaims_of_pools,
)
from reconciler.insight.sources import ProposedConfig, Snapshot
from reconciler.sim import engine
from reconciler.state import ClusterState

# Explanation codes that time alone can lift (the clock is moved to when that happens).
TIME_BOUND = frozenset({"Budget", "ConsolidateAfter", "Nominated"})
# Explanation codes worth reporting as blockers.
BLOCKER_CODES = frozenset({"Budget", "PDB", "DoNotDisrupt", "Unschedulable", "Balanced"})
DEFAULT_HORIZON = timedelta(days=7)
MAX_STEPS = 400


@dataclass(slots=True)
class CostSummary:
    cost_per_hour: float
    nodes: int
    node_mix: list[dict[str, Any]]
    pending: dict[str, str]

    def as_dict(self, baseline: CostSummary | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {
            "costPerHour": self.cost_per_hour,
            "costPerMonth": round(self.cost_per_hour * 730, 2),
            "nodes": self.nodes,
            "nodeMix": self.node_mix,
            "pendingPods": len(self.pending),
        }
        if baseline is not None:
            data["deltaPerHour"] = round(self.cost_per_hour - baseline.cost_per_hour, 6)
            data["deltaPerMonth"] = round((self.cost_per_hour - baseline.cost_per_hour) * 730, 2)
        return data


@dataclass(slots=True)
class Blocker:
    node: str
    nodepool: str
    code: str
    message: str
    first_seen: datetime
    last_seen: datetime
    cleared_at: datetime | None = None  # first moment the engine no longer gave this reason

    @property
    def resolved(self) -> bool:
        return self.cleared_at is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "nodepool": self.nodepool,
            "code": self.code,
            "message": self.message,
            "firstSeen": _stamp(self.first_seen),
            "lastSeen": _stamp(self.last_seen),
            "clearedAt": _stamp(self.cleared_at) if self.cleared_at else None,
        }


@dataclass(slots=True)
class PlanResult:
    snapshot: str
    proposed_source: str
    start: datetime
    pool_changes: list[PoolChange]
    current: CostSummary
    proposed: CostSummary
    floor: CostSummary
    settled_at: datetime
    horizon_reached: bool
    drift: list[dict[str, Any]]
    consolidation: list[dict[str, Any]]
    churn: dict[str, int]
    blockers: list[Blocker]
    removed_nodes: list[str] = field(default_factory=list)  # deleted with their NodePool
    nodeclass_changes: list[PoolChange] = field(default_factory=list)
    # The current NodePools run to stability (``--baseline``): its summary and churn.
    baseline: tuple[CostSummary, dict[str, int]] | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)

    @property
    def newly_pending(self) -> dict[str, str]:
        return {k: v for k, v in self.proposed.pending.items() if k not in self.current.pending}

    @property
    def still_pending(self) -> dict[str, str]:
        return {k: v for k, v in self.proposed.pending.items() if k in self.current.pending}

    @property
    def duration(self) -> timedelta:
        return self.settled_at - self.start

    def as_dict(self) -> dict[str, Any]:
        seconds = int(self.duration.total_seconds())
        return {
            "snapshot": self.snapshot,
            "proposedFrom": self.proposed_source,
            "clock": _stamp(self.start),
            "nodepools": [c.as_dict() for c in self.pool_changes],
            "nodeclasses": [c.as_dict() for c in self.nodeclass_changes],
            "current": self.current.as_dict(),
            "proposed": {
                **self.proposed.as_dict(self.current),
                "settledAt": _stamp(self.settled_at),
                "durationSeconds": seconds,
                "horizonReached": self.horizon_reached,
            },
            "floor": self.floor.as_dict(self.current),
            "baseline": None
            if self.baseline is None
            else {**self.baseline[0].as_dict(self.current), "churn": self.baseline[1]},
            "drift": self.drift,
            "consolidation": self.consolidation,
            "churn": self.churn,
            "blockers": [b.as_dict() for b in self.blockers],
            "removedNodes": self.removed_nodes,
            "unschedulable": {"new": self.newly_pending, "stillPending": self.still_pending},
            "floorUnschedulable": self.floor.pending,
            "steps": len(self.records),
        }


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _summary(sim: RecordingSimulation) -> CostSummary:
    final = sim.cluster.final_summary()
    rows = [row for row in sim.frames[-1].nodes if row.ready] if sim.frames else []
    return CostSummary(
        final["costPerHour"], len(final["nodes"]), node_mix(rows), sim.cluster.pending_reasons()
    )


async def compute_plan(
    snapshot: Snapshot,
    proposed: ProposedConfig,
    *,
    horizon: timedelta = DEFAULT_HORIZON,
    baseline: bool = False,
) -> PlanResult:
    """``baseline``: also run the *current* NodePools to stability, to tell the change's own effect
    from consolidation the cluster would do anyway (a second full simulation)."""
    name = f"plan-{snapshot.name}"
    applied = apply_proposal(snapshot.objects, proposed)
    # One catalogue for all three simulations: what any current or proposed NodePool can launch.
    catalog = narrowed_catalog(snapshot.document["catalog"], [*snapshot.objects, *applied.objects])
    snapshot = Snapshot({**snapshot.document, "catalog": catalog}, snapshot.source, snapshot.dropped)
    current_sim = RecordingSimulation(snapshot.scenario(name=name), snapshot_objects=True)
    await current_sim.load()
    current = _summary(current_sim)
    settled_current = None
    if baseline:
        await _run_to_stability(current_sim, current_sim.now + horizon, {})
        settled_current = (_summary(current_sim), _churn(current_sim.records))

    sim = RecordingSimulation(snapshot.scenario(name=name, objects=applied.objects), snapshot_objects=True)
    await sim.load()
    start = sim.now
    drifted_at_start = _drifted_nodes(sim)
    doomed = nodeclaims_of_pools(applied.objects, applied.removed_pools)
    removed_nodes = _node_names(sim, doomed)
    if doomed:
        await sim.run_step("delete", [{"kind": "NodeClaim", "name": claim} for claim in doomed])
    blockers: dict[tuple[str, str], Blocker] = {}
    horizon_reached = await _run_to_stability(sim, start + horizon, blockers)

    floor_sim = RecordingSimulation(
        snapshot.scenario(name=name, objects=fresh_provision_objects(applied.objects, start)),
        snapshot_objects=True,
    )
    await floor_sim.load()
    await floor_sim.run_step("provision", {})

    drift, consolidation = _moves(sim.records, drifted_at_start)
    return PlanResult(
        snapshot=snapshot.source,
        proposed_source=proposed.source,
        start=start,
        pool_changes=applied.pool_changes,
        nodeclass_changes=applied.nodeclass_changes,
        current=current,
        proposed=_summary(sim),
        floor=_summary(floor_sim),
        settled_at=_settled_at(sim.records, start),
        horizon_reached=horizon_reached,
        drift=drift,
        consolidation=consolidation,
        churn=_churn(sim.records),
        blockers=sorted(blockers.values(), key=lambda b: (b.resolved, b.nodepool, b.node, b.code)),
        removed_nodes=removed_nodes,
        baseline=settled_current,
        records=sim.records,
        frames=sim.frames,
    )


async def _run_to_stability(
    sim: RecordingSimulation, deadline: datetime, blockers: dict[tuple[str, str], Blocker]
) -> bool:
    """Provision + disrupt until nothing changes; jump the clock while something waits on time.

    Returns True when the horizon cut the run short.
    """
    while len(sim.records) < MAX_STEPS:
        await sim.run_step("provision", {})
        record = await sim.run_step("disrupt", {"until": "stable"})
        if record["disrupted"]:
            continue  # a stable pass may still be capped; go again at the same time
        decision = await _decision(sim)
        _track_blockers(decision, sim.now, blockers)
        wake = next_wake(sim.cluster.state(), decision, sim.now)
        if wake is None:
            return False
        if wake > deadline:
            return True
        await sim.run_step("advance", (wake - sim.now).total_seconds())
    return True


async def _decision(sim: RecordingSimulation) -> DisruptionDecision:
    types = await sim.cloud.instance_types(None)
    state = sim.cluster.state()
    return decide(state, engine.types_by_nodepool(state, types), sim.settings, sim.now)


def _track_blockers(
    decision: DisruptionDecision, now: datetime, blockers: dict[tuple[str, str], Blocker]
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
                explanation.node, explanation.nodepool, explanation.code, explanation.message, now, now
            )
        else:
            found.last_seen, found.message, found.cleared_at = now, explanation.message, None
    for key, blocker in blockers.items():
        if key not in seen and blocker.cleared_at is None:
            blocker.cleared_at = now


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
        moments.extend(budget_boundaries(state.nodepools[name].disruption.get("budgets"), now))
    future = [m for m in moments if m > now]
    return min(future) if future else None


def budget_boundaries(raw_budgets: Sequence[Any] | None, now: datetime) -> list[datetime]:
    """When scheduled budgets next open or close after ``now``."""
    try:
        budgets = parse_budgets(raw_budgets)
    except BudgetError:
        return []
    moments = []
    for budget in budgets:
        if budget.schedule is None or budget.duration is None:
            continue
        length = timedelta(seconds=budget.duration)
        try:
            opens = next_activation(budget.schedule, now)
            current_end = next_activation(budget.schedule, now - length) + length
        except (ValueError, KeyError):
            continue
        moments.append(opens)
        if current_end > now:
            moments.append(current_end)
    return moments


def _node_names(sim: RecordingSimulation, claims: Sequence[str]) -> list[str]:
    state = sim.cluster.state()
    names = []
    for claim in claims:
        node = state.state_node(claim)
        names.append(node.name if node is not None else claim)
    return sorted(names)


def _drifted_nodes(sim: RecordingSimulation) -> dict[str, tuple[str, str]]:
    """Node -> (drift reason, detail) right after the proposal is applied."""
    state = sim.cluster.state()
    found = {}
    for node in state.state_nodes():
        pool = state.nodepools.get(node.nodepool)
        if pool is None or node.nodeclaim is None:
            continue
        reason = drift_reason(
            pool, node.nodeclaim, now=sim.now, nodeclass=state.nodeclass(pool), node_labels=node.labels
        )
        if reason is not None:
            found[node.name] = reason
    return found


def _launched_by_claim(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    return {item["nodeclaim"]: item for record in records for item in record["launched"]}


def _replacement(item: Mapping[str, Any] | None, name: str) -> dict[str, Any]:
    if item is None:
        return {"nodeclaim": name}
    return {
        "nodeclaim": name,
        "instanceType": item.get("instanceType"),
        "capacityType": item.get("capacityType"),
        "zone": item.get("zone"),
        "price": item.get("price"),
    }


def _moves(
    records: Sequence[Mapping[str, Any]], drifted: Mapping[str, tuple[str, str]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    launched = _launched_by_claim(records)
    drift, consolidation = [], []
    for record in records:
        group: dict[tuple[str, str, tuple[str, ...]], dict[str, Any]] = {}
        for item in record["disrupted"]:
            replacements = [_replacement(launched.get(name), name) for name in item.get("replacements") or []]
            if item["reason"] == "Drifted":
                reason, detail = drifted.get(item["node"], ("Drifted", ""))
                drift.append(
                    {
                        "node": item["node"],
                        "nodeclaim": item.get("nodeclaim"),
                        "driftReason": reason,
                        "detail": detail,
                        "at": record["clock"],
                        "replacements": replacements,
                    }
                )
                continue
            key = (item["reason"], item["method"], tuple(item.get("replacements") or []))
            move = group.get(key)
            if move is None:
                move = group[key] = {
                    "nodes": [],
                    "reason": item["reason"],
                    "method": item["method"],
                    "action": item["action"],
                    "replacements": replacements,
                    "savingsPerHour": 0.0,
                    "at": record["clock"],
                }
                consolidation.append(move)
            move["nodes"].append(item["node"])
            move["savingsPerHour"] = round(
                move["savingsPerHour"] + float(item.get("savingsPerHour") or 0.0), 6
            )
    return drift, consolidation


def _churn(records: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    return {
        "nodesDisrupted": sum(len(r["disrupted"]) for r in records),
        "nodesLaunched": sum(len(r["launched"]) for r in records),
        "podsEvicted": sum(1 for r in records for e in r["events"] if e.get("reason") == "Evicted"),
    }


def _settled_at(records: Sequence[Mapping[str, Any]], start: datetime) -> datetime:
    """The clock of the last step that launched or disrupted anything."""
    last = start
    for record in records:
        if record["launched"] or record["disrupted"]:
            last = max(last, datetime.fromisoformat(record["clock"].replace("Z", "+00:00")))
    return last
