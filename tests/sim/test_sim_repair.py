"""The simulator's nodeCondition and repair steps (node auto repair, gate NodeRepair)."""

from __future__ import annotations

import pytest
from test_sim_steps import deployment, nodepool, run

from reconciler.sim.scenario import ScenarioError

GATE = {"featureGates": {"NodeRepair": True}}


def first_node() -> str:
    return str(run([nodepool(), deployment("app", 2)], [{"provision": {}}], **GATE)["steps"][0]["launched"][0]["node"])


def test_a_node_not_ready_for_30_minutes_is_replaced_and_its_pods_move() -> None:
    node = first_node()
    steps = [
        {"provision": {}},
        {"nodeCondition": {"node": node, "type": "Ready", "status": False, "reason": "KubeletNotReady"}},
        {"advance": "29m"},
        {"repair": {}},
        {"advance": "1m"},
        {"repair": {}},
    ]
    result = run([nodepool(), deployment("app", 2)], steps, **GATE)
    marked, early, due = result["steps"][1], result["steps"][3], result["steps"][5]
    assert marked["events"] == [{"object": f"Node/{node}", "reason": "NodeCondition",
                                 "message": "Ready=False (KubeletNotReady)"}]
    assert early["repaired"] == [] and early["events"][0]["reason"] == "NodeRepairWaiting"
    assert [(r["node"], r["condition"], r["status"], r["since"]) for r in due["repaired"]] == [
        (node, "Ready", "False", "2026-01-01T00:00:00Z")]
    assert due["disrupted"] == []  # the result format's disruption reasons stay as they are
    evicted = [e for e in due["events"] if e["reason"] == "Evicted"]
    assert evicted == []  # no drain: the pods were deleted, not evicted
    (replacement,) = due["launched"]
    (final,) = result["final"]["nodes"]
    assert final["name"] == replacement["node"] != node and len(final["pods"]) == 2
    assert result["final"]["pending"] == []


def test_a_repair_step_needs_the_gate_and_a_known_node() -> None:
    with pytest.raises(ScenarioError, match=r"steps\[0\]\.repair: node repair needs settings.featureGates.NodeRepair"):
        run([nodepool()], [{"repair": {}}])
    with pytest.raises(ScenarioError, match=r"steps\[0\]\.nodeCondition\.status: 'Maybe' must be one of"):
        run([nodepool()], [{"nodeCondition": {"node": "n", "type": "Ready", "status": "Maybe"}}])
    with pytest.raises(ScenarioError, match=r"steps\[0\]\.nodeCondition\.node: no node named 'ghost'"):
        run([nodepool()], [{"nodeCondition": {"node": "ghost", "type": "Ready", "status": "False"}}])
