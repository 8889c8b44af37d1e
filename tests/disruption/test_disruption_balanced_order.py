"""Balanced consolidation policy, candidate ordering and round-robin across NodePools."""

from __future__ import annotations

from typing import Any

from disruption_factories import LARGE, MEDIUM, SMALL, cluster, instance_type, node_of, nodepool, pod, run_decide, why

from reconciler.disruption.underutilized import interleave_by_pool


def test_balanced_rejects_a_replacement_that_saves_pennies_for_much_disruption() -> None:
    pricey = instance_type("pricey", 4, 8, 0.100)
    almost = instance_type("almost", 4, 8, 0.099)
    pods = [pod(f"p{i}", node="n1", cpu="100m") for i in range(3)]
    balanced = cluster(nodepool(policy="Balanced"), node_of("n1", pricey), *pods)
    decision = run_decide(balanced, [pricey, almost])
    assert decision.command is None
    assert why(decision, "n1").startswith("Balanced: Balanced NodePool default: saving $0.0010/h saves 1.0%")
    default = cluster(nodepool(), node_of("n1", pricey), *pods)
    command = run_decide(default, [pricey, almost]).command
    assert command is not None and command.replacements[0].instance_type_options == ("almost",)


def test_balanced_approves_a_move_worth_its_disruption() -> None:
    state = cluster(
        nodepool(policy="Balanced"),
        node_of("big", LARGE),
        node_of("busy", MEDIUM),
        pod("a", node="big", cpu="1"),
        *[pod(f"b{i}", node="busy", cpu="700m") for i in range(5)],
    )
    command = run_decide(state).command
    # 0.15 of 0.30 $/h saved (50 %) for 2 of 8 disruption units (25 %): score 2 >= 0.5.
    assert command is not None and command.node_names == ["big"] and command.savings_per_hour == 0.15


def test_candidates_ordered_by_savings_per_disruption() -> None:
    state = cluster(
        nodepool(budgets=[{"nodes": "1"}]),
        node_of("crowded", LARGE),
        node_of("light", LARGE),
        *[pod(f"c{i}", node="crowded", cpu="100m") for i in range(6)],
        pod("l", node="light", cpu="100m"),
    )
    command = run_decide(state).command
    # Same price, fewer pods to move: "light" goes first.
    assert command is not None and command.node_names == ["light"]


class FakeCandidate:
    def __init__(self, name: str, pool: str) -> None:
        self.name, self.pool = name, pool


def test_single_node_interleaves_pools_and_puts_unseen_pools_first() -> None:
    ordered: list[Any] = [FakeCandidate(n, p) for n, p in [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b")]]
    assert [c.name for c in interleave_by_pool(ordered)] == ["a1", "b1", "a2", "a3"]
    assert [c.name for c in interleave_by_pool(ordered, first_pools=["b"])] == ["b1", "a1", "a2", "a3"]


def test_pools_are_consolidated_independently_with_their_own_policies() -> None:
    state = cluster(
        nodepool("batch", policy="WhenEmpty"),
        nodepool("web"),
        node_of("b1", LARGE, pool="batch"),
        node_of("w1", LARGE, pool="web"),
        pod("x", node="b1", cpu="1"),
        pod("y", node="w1", cpu="1"),
    )
    decision = run_decide(state, [SMALL, MEDIUM, LARGE])
    assert decision.command is not None and decision.command.node_names == ["w1"]
    assert why(decision, "b1").startswith("WhenEmpty")
