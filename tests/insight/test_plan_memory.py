"""``plan`` frees each simulation it is done with before the next one grows (peak memory at 5,000 nodes)."""

from __future__ import annotations

import asyncio
import gc
import weakref
from pathlib import Path
from typing import Any

import pytest
from insight_support import example_cluster, example_pools, write_snapshot

from reconciler.insight.frames import RecordingSimulation
from reconciler.insight.plan import compute
from reconciler.insight.sources import ProposedConfig, load_snapshot


def test_the_current_and_floor_simulations_are_gone_when_the_proposed_one_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A simulation is a graph of reference cycles: dropping it frees nothing until a full collection, which the
    # one-shot commands' collector thresholds make rare. With automatic collection off, only ``plan``'s own
    # collections can free them, so this fails when those are removed.
    made: list[weakref.ref[RecordingSimulation]] = []
    original_init = RecordingSimulation.__init__

    def init(self: RecordingSimulation, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        made.append(weakref.ref(self))

    alive_at_run: list[list[bool]] = []
    original_run = compute.run_to_stability

    async def run_to_stability(sim: RecordingSimulation, *args: Any, **kwargs: Any) -> bool:
        alive_at_run.append([ref() is not None for ref in made])
        return await original_run(sim, *args, **kwargs)

    alive_at_floor: list[list[bool]] = []
    original_floor = compute._floor

    async def floor(*args: Any, **kwargs: Any) -> compute.CostSummary:
        alive_at_floor.append([ref() is not None for ref in made])
        return await original_floor(*args, **kwargs)

    monkeypatch.setattr(RecordingSimulation, "__init__", init)
    monkeypatch.setattr(compute, "_floor", floor)
    monkeypatch.setattr(compute, "run_to_stability", run_to_stability)
    snapshot = load_snapshot(write_snapshot(tmp_path, example_cluster()))
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        plan = asyncio.run(compute.compute_plan(snapshot, ProposedConfig(example_pools(), [], "same")))
    finally:
        if was_enabled:
            gc.enable()
    # Made in order: current, proposed, floor; the current one is gone before the floor is made, and only the
    # proposed one is left when it runs to stability.
    assert alive_at_floor == [[False, True]]
    assert alive_at_run == [[False, True, False]]
    assert plan.floor.nodes > 0 and plan.current.nodes > 0
