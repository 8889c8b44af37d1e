"""The disruption methods as one interface: what each one is, and that decide and validate follow the list."""

from __future__ import annotations

import pytest
from disruption_factories import LARGE, NOW, SMALL, TYPES, cluster, node_of, nodepool, pod, run_decide

from reconciler.disruption import decide as controller
from reconciler.disruption.budgets import REASON_DRIFTED, REASON_EMPTY, REASON_UNDERUTILIZED
from reconciler.disruption.methods import METHODS, method_named
from reconciler.disruption.types import DRIFT, EVENTUAL, GRACEFUL, Command
from reconciler.disruption.validation import validate
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState


def test_methods_in_karpenters_order_with_their_reason_class_and_validation() -> None:
    assert [(m.name, m.reason, m.disruption_class, m.validated) for m in METHODS] == [
        ("emptiness", REASON_EMPTY, GRACEFUL, True),
        ("static-drift", REASON_DRIFTED, EVENTUAL, False),  # static NodePools (StaticCapacity), before drift
        ("drift", REASON_DRIFTED, EVENTUAL, False),  # acts at once, no validation wait
        ("multi-node", REASON_UNDERUTILIZED, GRACEFUL, True),
        ("single-node", REASON_UNDERUTILIZED, GRACEFUL, True),
    ]
    assert method_named("drift") is METHODS[2]
    with pytest.raises(ValueError, match="unknown disruption method 'defrag'"):
        method_named("defrag")


def test_a_command_carries_the_reason_of_the_method_that_made_it() -> None:
    empty = run_decide(cluster(nodepool(), node_of("e1", SMALL))).command
    busy = run_decide(cluster(nodepool(), node_of("big", LARGE), pod("a", node="big", cpu="1"))).command
    assert empty is not None and busy is not None
    assert (empty.method, empty.reason) == ("emptiness", method_named("emptiness").reason)
    assert (busy.method, busy.reason) == ("single-node", method_named("single-node").reason)


def test_decide_tries_the_methods_of_the_list_in_its_order(monkeypatch: pytest.MonkeyPatch) -> None:
    state = cluster(
        nodepool(budgets=[{"nodes": "100%"}]), node_of("e1", SMALL), node_of("big", LARGE),
        pod("a", node="big", cpu="1"),
    )
    assert run_decide(state).command.method == "emptiness"
    # Without emptiness in the list, the pass goes on to consolidation.
    monkeypatch.setattr(controller, "METHODS", tuple(m for m in METHODS if m.name != "emptiness"))
    command = run_decide(state).command
    assert command is not None and command.method == "single-node" and command.node_names == ["big"]


def test_validation_follows_the_method() -> None:
    """Drift has no validator: its command comes back as is, whatever the fresh snapshot says."""
    state = cluster(nodepool(), node_of("big", LARGE), pod("a", node="big", cpu="1"))
    consolidation = run_decide(state).command
    assert consolidation is not None
    drift = Command(REASON_DRIFTED, DRIFT, list(consolidation.candidates))
    gone = ClusterState()  # every candidate vanished
    assert validate(drift, gone, {}, Settings(), NOW).command is drift
    result = validate(consolidation, gone, {"default": TYPES}, Settings(), NOW)
    assert not result.valid and "candidate big changed" in result.reason
