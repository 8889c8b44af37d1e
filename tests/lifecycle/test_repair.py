"""Node auto repair decisions (lifecycle.repair): the AWS policies, their tolerations, the 20 % guard."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from reconciler.lifecycle.repair import AWS_REPAIR_POLICIES, decide_repairs, unhealthy_condition, unhealthy_threshold
from reconciler.model import labels as wk

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def node(name: str, pool: str = "default", **conditions: tuple[str, timedelta]) -> dict[str, Any]:
    """``conditions``: type -> (status, how long ago it turned so)."""
    return {
        "metadata": {"name": name, "labels": {wk.NODEPOOL: pool} if pool else {}},
        "status": {"conditions": [
            {"type": kind, "status": status, "lastTransitionTime": (NOW - ago).strftime("%Y-%m-%dT%H:%M:%SZ")}
            for kind, (status, ago) in conditions.items()
        ]},
    }


def claim(name: str, pool: str = "default") -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {wk.NODEPOOL: pool} if pool else {}}, "status": {}}


def healthy(name: str, pool: str = "default") -> dict[str, Any]:
    return node(name, pool, Ready=("True", timedelta(hours=5)))


def test_the_aws_policies_are_upstreams_v1_14_list() -> None:
    assert [(p.condition, p.status, p.toleration) for p in AWS_REPAIR_POLICIES] == [
        ("Ready", "False", timedelta(minutes=30)),
        ("Ready", "Unknown", timedelta(minutes=30)),
        ("AcceleratedHardwareReady", "False", timedelta(minutes=10)),
        ("StorageReady", "False", timedelta(minutes=30)),
        ("NetworkingReady", "False", timedelta(minutes=30)),
        ("KernelReady", "False", timedelta(minutes=30)),
        ("ContainerRuntimeReady", "False", timedelta(minutes=30)),
    ]


@pytest.mark.parametrize(("condition", "status", "toleration"), [
    ("Ready", "False", 30), ("Ready", "Unknown", 30), ("AcceleratedHardwareReady", "False", 10),
    ("StorageReady", "False", 30), ("NetworkingReady", "False", 30), ("KernelReady", "False", 30),
    ("ContainerRuntimeReady", "False", 30),
])
def test_each_condition_is_repaired_exactly_when_its_toleration_runs_out(
        condition: str, status: str, toleration: int) -> None:
    others = [healthy(f"ok-{i}") for i in range(9)]
    for minutes, action in ((toleration - 1, "wait"), (toleration, "repair")):
        sick = node("sick", **{condition: (status, timedelta(minutes=minutes))})
        (decision,) = decide_repairs([(claim("c-sick"), sick)], [sick, *others], NOW)
        assert decision.action == action, (condition, minutes)
        assert decision.unhealthy.condition == condition
    assert decision.nodeclaim == "c-sick" and decision.message.startswith("deleting unhealthy node")


def test_healthy_conditions_and_statuses_outside_the_policies_are_left_alone() -> None:
    fine = node("n", Ready=("True", timedelta(hours=3)), StorageReady=("Unknown", timedelta(hours=3)),
                MemoryPressure=("True", timedelta(hours=3)))
    assert unhealthy_condition(fine) is None
    assert decide_repairs([(claim("c"), fine)], [fine], NOW) == []


def test_the_condition_due_first_decides_when_several_are_unhealthy() -> None:
    sick = node("n", Ready=("False", timedelta(minutes=5)), AcceleratedHardwareReady=("False", timedelta(minutes=9)))
    found = unhealthy_condition(sick)
    assert found is not None and found.condition == "AcceleratedHardwareReady"
    assert found.due == NOW + timedelta(minutes=1)


@pytest.mark.parametrize(("total", "allowed"), [(1, 1), (3, 1), (5, 1), (6, 2), (10, 2), (11, 3), (20, 4)])
def test_twenty_percent_rounds_up(total: int, allowed: int) -> None:
    assert unhealthy_threshold(total) == allowed


def test_repair_is_blocked_while_more_than_20_percent_of_the_pool_is_unhealthy() -> None:
    sick = [node(f"s{i}", Ready=("False", timedelta(hours=1))) for i in range(2)]
    pairs = [(claim(f"c{i}"), n) for i, n in enumerate(sick)]
    # 2 unhealthy of 10 = 20 %: allowed; 2 of 9: ceil(1.8) = 2, allowed; 2 of 5: ceil(1) = 1, blocked.
    for others, action in ((8, "repair"), (7, "repair"), (3, "blocked")):
        nodes = [*sick, *(healthy(f"ok{i}") for i in range(others))]
        decisions = decide_repairs(pairs, nodes, NOW)
        assert {d.action for d in decisions} == {action}, others
    assert "more than 20% nodes are unhealthy in the nodepool" in decisions[0].message
    # Another pool's nodes do not count: the guard is per NodePool.
    other_pool = [healthy(f"x{i}", pool="other") for i in range(20)]
    assert {d.action for d in decide_repairs(pairs, [*sick, *other_pool], NOW)} == {"blocked"}


def test_a_claim_without_a_nodepool_is_judged_against_the_whole_cluster() -> None:
    sick = node("lone", pool="", Ready=("Unknown", timedelta(hours=1)))
    pool_nodes = [healthy(f"p{i}", pool="other") for i in range(4)]
    (decision,) = decide_repairs([(claim("c", pool=""), sick)], [sick, *pool_nodes], NOW)
    assert decision.action == "repair"
    also_sick = node("also", pool="other", KernelReady=("False", timedelta(minutes=1)))  # within toleration
    (decision,) = decide_repairs([(claim("c", pool=""), sick)], [sick, also_sick, pool_nodes[0]], NOW)
    assert decision.action == "blocked" and "in the cluster" in decision.message  # 2 of 3 > ceil(0.6) = 1


def test_claims_already_deleting_are_not_repaired_again() -> None:
    sick = node("n", Ready=("False", timedelta(hours=1)))
    deleting = claim("c")
    deleting["metadata"]["deletionTimestamp"] = "2026-03-01T11:00:00Z"
    assert decide_repairs([(deleting, sick)], [sick] * 10, NOW) == []
