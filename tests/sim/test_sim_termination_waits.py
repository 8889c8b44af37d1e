"""Instance shutdown in the simulator (catalog.shutdownDuration): a terminating NodeClaim stays, and counts
against its NodePool's limits, until its instance is gone."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from test_sim_steps import CATALOG, deployment, nodepool

from reconciler.sim.runner import run_scenario
from reconciler.sim.scenario import ScenarioError, parse_scenario


def run(objects: list[dict[str, Any]], steps: list[dict[str, Any]], shutdown: str | None) -> dict[str, Any]:
    catalog = copy.deepcopy(CATALOG)
    if shutdown is not None:
        catalog["shutdownDuration"] = shutdown
    document = {"name": "shutdown", "settings": {"clock": "2026-01-01T00:00:00Z"}, "catalog": catalog,
                "objects": objects, "steps": steps}
    return run_scenario(parse_scenario(document))


def test_a_shutting_down_instance_holds_its_claim_and_the_pools_limit_until_it_is_gone() -> None:
    objects = [nodepool(limits={"nodes": "1"}), deployment("app", 1)]
    node = run(objects, [{"provision": {}}], None)["steps"][0]["launched"][0]["nodeclaim"]
    steps = [{"provision": {}}, {"delete": [{"kind": "NodeClaim", "name": node}]}, {"provision": {}},
             {"advance": "59s"}, {"provision": {}}, {"advance": "1s"}, {"provision": {}}]
    result = run(objects, steps, "1m")
    deleted, blocked, still, gone, relaunched = (result["steps"][i] for i in (1, 2, 4, 5, 6))
    assert [e["reason"] for e in deleted["events"] if e["object"].startswith("Pod/")] == ["Evicted"]
    assert blocked["launched"] == [] and still["launched"] == []
    (reason,) = blocked["pending"].values()
    assert "limits.nodes 1 reached" in reason
    assert gone["launched"] == []  # the claim is released here; the next provisioning pass launches
    (launched,) = relaunched["launched"]
    assert launched["pods"] == list(blocked["pending"])
    assert [n["name"] for n in result["final"]["nodes"]] == [launched["node"]]

    # Without a shutdown time the claim goes with its delete step and the pool has room at once.
    instant = run(objects, steps, None)
    assert instant["steps"][2]["launched"] and instant["steps"][2]["pending"] == {}


def test_shutdown_duration_must_be_a_duration() -> None:
    with pytest.raises(ScenarioError, match=r"^catalog\.shutdownDuration: "):
        run([nodepool()], [{"provision": {}}], "a while")
