"""A ``disrupt`` step reports the explanations of its last pass only: a node a later pass disrupts is never
also reported as blocked in the same step (examples/inflate.yaml step 6 once listed default-d5rwb as both)."""

from __future__ import annotations

from pathlib import Path

from reconciler.sim.runner import run_scenario_file

REPO = Path(__file__).resolve().parents[2]


def test_no_node_is_both_disrupted_and_blocked_in_one_step() -> None:
    result = run_scenario_file(REPO / "examples" / "inflate.yaml")
    disrupting = [step for step in result["steps"] if step["step"] == "disrupt" and step["disrupted"]]
    assert disrupting, "the example empties and removes its nodes"
    for step in result["steps"]:
        disrupted = {item["node"] for item in step["disrupted"]}
        blocked = {e["object"].partition("/")[2] for e in step["events"] if e["reason"] == "DisruptionBlocked"}
        assert not disrupted & blocked, step
    # Both emptied nodes go in that step, one per pass under the 10 % budget, and each names its pool.
    last = disrupting[-1]
    assert len(last["disrupted"]) == 2 and {item["nodepool"] for item in last["disrupted"]} == {"default"}
