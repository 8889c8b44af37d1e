"""Validation after the wait: a command is executed only if it is still safe and still the same."""

from __future__ import annotations

from datetime import timedelta

from disruption_factories import LARGE, MEDIUM, NOW, SMALL, TYPES, cluster, node_of, nodepool, pod, run_decide

from reconciler.disruption.validation import validate
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState

LATER = NOW + timedelta(seconds=15)


def check(command: object, state: ClusterState) -> object:
    return validate(command, state, {name: TYPES for name in state.nodepools}, Settings(), LATER)


def test_unchanged_consolidation_stays_valid() -> None:
    state = cluster(nodepool(), node_of("big", LARGE), pod("a", node="big", cpu="1"))
    command = run_decide(state).command
    result = check(command, state)
    assert result.valid and result.command.node_names == ["big"]


def test_emptiness_drops_nodes_that_gained_pods() -> None:
    state = cluster(nodepool(budgets=[{"nodes": "100%"}]), node_of("e1", SMALL), node_of("e2", SMALL))
    command = run_decide(state).command
    assert command is not None and command.node_names == ["e1", "e2"]
    state.upsert(pod("late", node="e1"))
    result = check(command, state)
    assert result.valid and result.command.node_names == ["e2"]
    state.upsert(pod("later", node="e2"))
    result = check(command, state)
    assert not result.valid and "none of the 2 empty node(s)" in result.reason


def test_nominated_candidate_aborts() -> None:
    state = cluster(nodepool(), node_of("big", LARGE), pod("a", node="big", cpu="1"))
    command = run_decide(state).command
    state.nominate("big", LATER + timedelta(seconds=20))
    result = check(command, state)
    assert not result.valid and "nominated" in result.reason


def test_candidate_that_became_blocked_aborts() -> None:
    state = cluster(nodepool(), node_of("big", LARGE), pod("a", node="big", cpu="1"))
    command = run_decide(state).command
    state.upsert(pod("pinned", node="big", annotations={"karpenter.sh/do-not-disrupt": "true"}))
    result = check(command, state)
    assert not result.valid and "do-not-disrupt" in result.reason


def test_budget_used_up_during_the_wait_aborts() -> None:
    state = cluster(
        nodepool(budgets=[{"nodes": "1"}]),
        node_of("big", LARGE),
        node_of("other", MEDIUM),
        pod("a", node="big", cpu="1"),
        pod("b", node="other", cpu="3"),
    )
    command = run_decide(state).command
    assert command is not None and command.node_names == ["big"]
    state.mark_for_deletion("other")  # e.g. a user deleted it meanwhile
    result = check(command, state)
    assert not result.valid and "budget" in result.reason


def test_replacement_that_became_pricier_aborts() -> None:
    state = cluster(nodepool(), node_of("big", LARGE), pod("a", node="big", cpu="1"))
    command = run_decide(state).command
    assert command is not None and command.replacements[0].instance_type_options == ("small", "medium")
    state.upsert(pod("b", node="big", cpu="2500m"))  # now 3.5 CPU must move: "small" no longer fits
    result = check(command, state)
    assert not result.valid and "no longer suitable (small)" in result.reason


def test_delete_that_now_needs_a_new_node_aborts() -> None:
    state = cluster(
        nodepool(),
        node_of("n1", MEDIUM),
        node_of("n2", MEDIUM),
        pod("a", node="n1", cpu="1"),
        pod("b", node="n2", cpu="1"),
    )
    command = run_decide(state).command
    assert command is not None and command.action == "delete"
    keep = "n2" if command.node_names == ["n1"] else "n1"
    state.upsert(pod("filler", node=keep, cpu="2500m"))
    result = check(command, state)
    assert not result.valid and "needs 1 new node(s) instead of 0" in result.reason
