"""bench/consolidation.py: the run reaches a stable cluster and its end-state reference is a valid schedule."""

from __future__ import annotations

from bench.consolidation import fresh_schedule, run, scale_up
from bench.scheduling import synthetic_types
from reconciler.settings import Settings


def test_a_small_run_is_stable_and_never_below_the_bound() -> None:
    row = run(20, max_passes=100, seed=7)
    assert row["stable"]
    assert row["after_cost"] < row["before_cost"]
    assert row["after_cost"] >= row["bound"] - 1e-6
    fresh = row["fresh"]
    assert row["bound"] - 1e-6 <= fresh["repacked_cost"] <= fresh["cost"]
    assert fresh["repacked_nodes"] >= 1


def test_the_fresh_schedule_places_every_pod_of_the_cluster_on_new_nodes() -> None:
    types, settings = synthetic_types(), Settings()
    state, prices = scale_up(10, types, settings)
    fresh = fresh_schedule(state, types, settings)
    # Every node of the scaled-up cluster was the scheduler's own packing of these pods, priced the same way.
    assert fresh["nodes"] == len(prices)
    assert abs(fresh["cost"] - sum(prices.values())) < 1e-6
