"""The stability loop's pieces: reading a pass's explanations back, and when the clock should jump next."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from insight_support import EXAMPLES, example_cluster, write_snapshot

from reconciler.disruption.budgets import boundaries, parse_budgets
from reconciler.insight.frames import RecordingSimulation
from reconciler.insight.plan.proposal import apply_proposal
from reconciler.insight.plan.stability import _decision, explanations_of, next_wake
from reconciler.insight.sources import load_nodepools_file, load_snapshot

MONDAY_10 = datetime(2026, 1, 5, 10, tzinfo=UTC)


def budget_boundaries(raw: list[dict[str, str]], now: datetime) -> list[datetime]:
    return boundaries(parse_budgets(raw), now)


def test_scheduled_budget_boundaries() -> None:
    budgets = [{"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"}, {"nodes": "10%"}]
    inside = budget_boundaries(budgets, MONDAY_10)
    assert sorted(inside) == [datetime(2026, 1, 5, 17, tzinfo=UTC), datetime(2026, 1, 6, 9, tzinfo=UTC)]
    friday_evening = datetime(2026, 1, 9, 18, tzinfo=UTC)
    assert budget_boundaries(budgets, friday_evening) == [datetime(2026, 1, 12, 9, tzinfo=UTC)]
    assert budget_boundaries([{"nodes": "0"}], MONDAY_10) == []  # never lifts by itself
    assert budget_boundaries([{"nodes": "0", "schedule": "bad", "duration": "1h"}], MONDAY_10) == []


def test_recorded_explanations_equal_a_fresh_decision(tmp_path: Path) -> None:
    snapshot = load_snapshot(write_snapshot(tmp_path, example_cluster()))
    proposal = load_nodepools_file(EXAMPLES / "relabel-business-hours.yaml")
    applied = apply_proposal(snapshot.objects, proposal)

    async def run() -> None:
        sim = RecordingSimulation(snapshot.scenario(objects=applied.objects))
        await sim.load()
        await sim.run_step("provision", {})
        record = await sim.run_step("disrupt", {"until": "stable"})
        state = sim.cluster.state()
        recorded = explanations_of(record, state)
        fresh = await _decision(sim)
        assert recorded is not None and recorded.command is None and fresh.command is None
        key = lambda e: (e.node, e.nodepool, e.code, e.message)  # noqa: E731
        assert sorted(map(key, recorded.explanations)) == sorted(map(key, fresh.explanations))
        codes = {e.code for e in recorded.explanations}
        assert {"Budget", "ConsolidateAfter"} <= codes
        # consolidateAfter (5m since the last pod event) lifts first; the budget at 17:00 after that.
        assert next_wake(state, recorded, sim.now) == datetime(2026, 1, 5, 10, 5, tzinfo=UTC)

        # A step that acted is never read back: the last pass is not the whole story.
        acted = dict(record, disrupted=[{"node": "x"}])
        assert explanations_of(acted, state) is None
        garbled = dict(record, events=[{"object": "Node/x", "reason": "DisruptionBlocked", "message": "?"}])
        assert explanations_of(garbled, state) is None

    asyncio.run(run())
