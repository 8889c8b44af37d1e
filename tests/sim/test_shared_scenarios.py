"""The example scenarios in ../shared/scenarios produce the outcomes their comments describe."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.cli import main
from reconciler.sim.runner import run_scenario_file


def run(shared_dir: Path, name: str) -> dict[str, Any]:
    return run_scenario_file(shared_dir / "scenarios" / f"{name}.yaml")


def test_inflate(shared_dir: Path) -> None:
    result = run(shared_dir, "inflate")
    provision, scale_down, advance, disrupt = result["steps"]
    assert [s["step"] for s in result["steps"]] == ["provision", "apply", "advance", "disrupt"]
    (claim,) = provision["launched"]
    assert claim["instanceTypeOptions"] == ["c6g.2xlarge", "c5.2xlarge", "m5.2xlarge"]
    assert (claim["instanceType"], claim["capacityType"], claim["zone"], claim["price"]) == (
        "c6g.2xlarge",
        "spot",
        "us-east-1c",
        0.0955,
    )
    assert len(claim["pods"]) == 5
    assert sorted(provision["bound"]) == sorted(claim["pods"])
    assert set(provision["bound"].values()) == {claim["node"]}
    assert provision["pending"] == {}
    assert scale_down["launched"] == [] and advance["disrupted"] == []
    (disrupted,) = disrupt["disrupted"]
    assert (disrupted["node"], disrupted["reason"], disrupted["action"], disrupted["replacements"]) == (
        claim["node"],
        "Empty",
        "delete",
        [],
    )
    assert result["final"] == {"nodes": [], "pending": [], "costPerHour": 0}


def test_consolidation_replace(shared_dir: Path) -> None:
    result = run(shared_dir, "consolidation-replace")
    (step,) = result["steps"]
    (disrupted,) = step["disrupted"]
    assert disrupted["node"] == "ip-10-0-17-23.ec2.internal"
    assert (disrupted["reason"], disrupted["method"], disrupted["action"]) == (
        "Underutilized",
        "single-node",
        "replace",
    )
    assert disrupted["savingsPerHour"] == pytest.approx(0.299)
    (replacement,) = step["launched"]
    assert replacement["instanceType"] == "c5.large" and replacement["price"] == 0.085
    assert set(replacement["instanceTypeOptions"]) == {
        "c5.large",
        "m5.large",
        "c5.xlarge",
        "m5.xlarge",
        "c5.2xlarge",
    }
    assert disrupted["replacements"] == [replacement["nodeclaim"]]
    (node,) = result["final"]["nodes"]
    assert node["instanceType"] == "c5.large"
    assert len(node["pods"]) == 2 and all(p.startswith("default/reports-") for p in node["pods"])
    assert result["final"]["pending"] == []
    assert result["final"]["costPerHour"] == pytest.approx(0.085)


def test_spot_and_on_demand(shared_dir: Path) -> None:
    result = run(shared_dir, "spot-and-on-demand")
    unavailable, first, scale, second = result["steps"]
    assert unavailable["launched"] == []
    by_capacity = {item["capacityType"]: item for item in first["launched"]}
    assert len(first["launched"]) == 2
    api, batch = by_capacity["on-demand"], by_capacity["spot"]
    assert (api["instanceType"], api["price"]) == ("c6g.xlarge", 0.136)
    assert len(api["pods"]) == 2 and len(batch["pods"]) == 4
    assert "c6g.xlarge" not in batch["instanceTypeOptions"]
    assert (batch["instanceType"], batch["zone"], batch["price"]) == ("c5.xlarge", "us-east-1a", 0.0642)
    assert len(scale["pending"]) == 6
    (extra,) = second["launched"]
    assert (extra["instanceType"], extra["zone"], extra["capacityType"], extra["price"]) == (
        "c6g.large",
        "us-east-1c",
        "spot",
        0.0259,
    )
    assert len(extra["pods"]) == 3
    onto_existing = [pod for pod, node in second["bound"].items() if node == batch["node"]]
    assert len(onto_existing) == 3
    assert len(result["final"]["nodes"]) == 3 and result["final"]["pending"] == []
    assert result["final"]["costPerHour"] == pytest.approx(0.2261)


def test_zone_spread(shared_dir: Path) -> None:
    result = run(shared_dir, "zone-spread")
    (step,) = result["steps"]
    assert len(step["launched"]) == 3
    assert sorted(item["zone"] for item in step["launched"]) == ["us-east-1a", "us-east-1b", "us-east-1c"]
    assert all(item["instanceType"] == "c5.large" and len(item["pods"]) == 2 for item in step["launched"])
    assert result["final"]["costPerHour"] == pytest.approx(0.255)


def test_nodepool_limits(shared_dir: Path) -> None:
    result = run(shared_dir, "nodepool-limits")
    (step,) = result["steps"]
    assert [item["instanceType"] for item in step["launched"]] == ["c5.2xlarge", "c5.2xlarge"]
    assert [len(item["pods"]) for item in step["launched"]] == [7, 7]
    assert len(step["pending"]) == 6
    assert all("limit" in reason and "cpu" in reason for reason in step["pending"].values())
    assert result["final"]["costPerHour"] == pytest.approx(0.68)


@pytest.mark.parametrize(
    "name", ["inflate", "consolidation-replace", "spot-and-on-demand", "zone-spread", "nodepool-limits"]
)
def test_json_output_is_deterministic_and_complete(
    shared_dir: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    path = str(shared_dir / "scenarios" / f"{name}.yaml")
    assert main(["simulate", path, "--json"]) == 0
    first = capsys.readouterr().out
    assert main(["simulate", path, "--json"]) == 0
    assert capsys.readouterr().out == first
    document = json.loads(first)
    assert set(document) == {"scenario", "steps", "final"}
    for step in document["steps"]:
        assert set(step) >= {"step", "clock", "launched", "bound", "pending", "disrupted", "events"}
    assert set(document["final"]) - {"priceSources"} == {"nodes", "pending", "costPerHour"}
    # Every priced node says where its price comes from (the optional keys this format allows).
    assert all(node["priceSource"] == "scenario catalogue" for node in document["final"]["nodes"])
