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


def test_the_exchange_row_is_checked_places_every_pod_once_and_is_never_costlier_or_under_the_bound() -> None:
    row = run(40, max_passes=100, seed=7)
    exchanged = row["exchange"]
    assert exchanged["problems"] == []
    assert row["bound"] - 1e-6 <= exchanged["cost"] <= row["after_cost"] + 1e-9
    assert exchanged["nodes"] <= row["after_nodes"]


def test_the_exchange_checker_refuses_a_pod_placed_twice_or_a_costlier_end() -> None:
    from dataclasses import replace

    from bench.consolidation import exchange_problems
    from reconciler.disruption.exchange import exchange
    from reconciler.scheduling import SchedulingContext

    types, settings = synthetic_types(), Settings()
    state, prices = scale_up(6, types, settings)
    context = SchedulingContext.build(state, {"default": types}, settings)
    result = exchange(state.state_nodes(), {t.name: t for t in context.templates})
    assert exchange_problems(state, result, types, prices) == []
    first, second = result.nodes[0], result.nodes[1]
    doubled = replace(result, nodes=[first, replace(second, pods=(*second.pods, first.pods[0])), *result.nodes[2:]])
    assert any("once" in p or "fit" in p for p in exchange_problems(state, doubled, types, prices))
    costlier = replace(result, cost=result.original_cost + 1)
    assert any("costlier" in p for p in exchange_problems(state, costlier, types, prices))
