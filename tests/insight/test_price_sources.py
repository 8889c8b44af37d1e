"""Every cost names its source, no priced node shows $0, and a dump from another region uses that region.

Real inputs: the bundled eu-west-1 and us-east-1 catalogues, run through the CLI as a user would
(``simulate``, ``snapshot``, ``status``, ``plan`` in text, Markdown, JSON and HTML).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import yaml
from insight_support import run_cli

from reconciler.cloud import pricesource
from reconciler.insight.snapshot import simulated_snapshot
from reconciler.sim.scenario import parse_scenario

EU_ESTIMATE = "estimate: us-east-1 list prices as of 2026-07-20 (eu-west-1 prices are not bundled)"
US_LIST = "bundled AWS on-demand list prices (us-east-1, as of 2026-07-20)"


def _scenario(preset: str, capacity_types: list[str]) -> dict[str, Any]:
    return {
        "name": "web",
        "settings": {"clock": "2026-01-01T09:00:00Z"},
        "catalog": {"preset": preset},
        "objects": [
            {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
             "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                      "subnetSelectorTerms": [{"tags": {"k": "v"}}],
                      "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]}},
            {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"}, "spec": {
                "template": {"spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": capacity_types},
                        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5", "c5"]},
                    ]}}}},
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
             "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": {
                 "metadata": {"labels": {"app": "web"}},
                 "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}},
        ],
        "steps": [{"provision": {}}],
    }


def _dump(tmp_path: Path, preset: str, capacity_types: list[str]) -> Path:
    """A `kubectl get -A -o yaml` style dump (no catalogue) of a cluster the simulator built."""
    document = asyncio.run(simulated_snapshot(parse_scenario(_scenario(preset, capacity_types))))
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": document["objects"]}))
    return path


def test_eu_dump_is_priced_from_its_own_region_and_says_the_prices_are_estimates(tmp_path: Path, capsys: Any) -> None:
    dump = _dump(tmp_path, "aws-eu-west-1", ["on-demand"])

    code, out, err = run_cli(capsys, "status", "--snapshot", str(dump))
    assert code == 0, err
    assert "$0.0000" not in out
    assert f"prices: {EU_ESTIMATE}" in out
    code, out, err = run_cli(capsys, "status", "--snapshot", str(dump), "--json")
    status = json.loads(out)
    assert status["priceSources"] == [EU_ESTIMATE] and status["unpricedNodes"] == []
    assert all(n["zone"].startswith("eu-west-1") and n["price"] > 0 for n in status["nodes"])

    # A change that launches new capacity puts it in eu-west-1 zones, priced, with the source named.
    pools = tmp_path / "pools.yaml"
    pool = _scenario("aws-eu-west-1", ["on-demand"])["objects"][1]
    running = {n["instanceType"].partition(".")[0] for n in status["nodes"]}
    pool["spec"]["template"]["spec"]["requirements"][1]["values"] = sorted({"m5", "c5"} - running)
    pools.write_text(yaml.safe_dump(pool))
    code, out, err = run_cli(capsys, "plan", "--snapshot", str(dump), "--nodepools", str(pools), "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["priceSources"] == [EU_ESTIMATE]
    assert plan["proposed"]["costPerHour"] > 0 and plan["proposed"]["unpricedNodes"] == []
    assert plan["churn"]["nodesLaunched"] > 0  # the change replaces the nodes: new eu-west-1 capacity
    for output in ("--markdown", None):
        args = ["plan", "--snapshot", str(dump), "--nodepools", str(pools), *([output] if output else [])]
        code, out, err = run_cli(capsys, *args)
        assert code == 0, err
        assert "$0.0000" not in out and EU_ESTIMATE in out
    report = tmp_path / "plan.html"
    code, _, err = run_cli(capsys, "plan", "--snapshot", str(dump), "--nodepools", str(pools), "--report", str(report))
    assert code == 0, err
    assert EU_ESTIMATE in report.read_text()


def test_spot_estimates_are_marked_in_every_output(tmp_path: Path, capsys: Any) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(_scenario("aws-us-east-1", ["spot"])))
    code, out, err = run_cli(capsys, "simulate", str(scenario), "--json")
    assert code == 0, err
    result = json.loads(out)
    [launched] = result["steps"][0]["launched"]
    assert launched["capacityType"] == "spot" and launched["priceSource"] == pricesource.SPOT_ESTIMATE
    assert result["final"]["priceSources"] == [pricesource.SPOT_ESTIMATE]
    assert all(n["priceSource"] == pricesource.SPOT_ESTIMATE for n in result["final"]["nodes"])
    report = tmp_path / "r.html"
    code, out, err = run_cli(capsys, "simulate", str(scenario), "--report", str(report))
    assert code == 0, err
    assert f"prices: {pricesource.SPOT_ESTIMATE}" in out
    assert pricesource.SPOT_ESTIMATE in report.read_text()

    dump = _dump(tmp_path, "aws-us-east-1", ["spot"])
    code, out, err = run_cli(capsys, "status", "--snapshot", str(dump))
    assert f"prices: {pricesource.SPOT_ESTIMATE}" in out and "$0.0000" not in out


def test_price_file_overrides_the_catalogue_and_names_itself(tmp_path: Path, capsys: Any) -> None:
    dump = _dump(tmp_path, "aws-us-east-1", ["on-demand"])
    code, out, _ = run_cli(capsys, "status", "--snapshot", str(dump), "--json")
    nodes = json.loads(out)["nodes"]
    node_type = nodes[0]["instanceType"]
    assert {n["priceSource"] for n in nodes} == {US_LIST}

    prices = tmp_path / "rates.csv"
    prices.write_text(f"instanceType,capacityType,zone,price\n{node_type},on-demand,,0.0123\n")
    code, out, err = run_cli(capsys, "status", "--snapshot", str(dump), "--prices", str(prices), "--json")
    assert code == 0, err
    status = json.loads(out)
    overridden = [n for n in status["nodes"] if n["instanceType"] == node_type]
    assert overridden and all(n["price"] == 0.0123 and n["priceSource"] == "user price file rates.csv"
                              for n in overridden)

    zoned = tmp_path / "rates.json"
    zone = overridden[0]["zone"]
    zoned.write_text(json.dumps({"prices": [
        {"instanceType": node_type, "capacityType": "on-demand", "price": 0.02},
        {"instanceType": node_type, "capacityType": "on-demand", "zone": zone, "price": 0.01},
    ]}))
    code, out, err = run_cli(capsys, "status", "--snapshot", str(dump), "--prices", str(zoned), "--json")
    assert code == 0, err
    zoned_nodes = [n for n in json.loads(out)["nodes"] if n["zone"] == zone and n["instanceType"] == node_type]
    assert {n["price"] for n in zoned_nodes} == {0.01}

    # simulate takes it too, and the snapshot it writes carries it (reproducible figures).
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(_scenario("aws-us-east-1", ["on-demand"])))
    code, out, err = run_cli(capsys, "simulate", str(scenario), "--prices", str(prices), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert {n["priceSource"] for n in result["final"]["nodes"] if n["instanceType"] == node_type} == {
        "user price file rates.csv"
    }
    written = tmp_path / "snap.yaml"
    code, _, err = run_cli(capsys, "snapshot", "--from", str(dump), "--prices", str(prices), "-o", str(written))
    assert code == 0, err
    assert yaml.safe_load(written.read_text())["catalog"]["prices"]["source"] == "rates.csv"


def test_bad_price_files_are_one_line_errors(tmp_path: Path, capsys: Any) -> None:
    dump = _dump(tmp_path, "aws-us-east-1", ["on-demand"])
    cases = {
        "a.csv": ("instanceType,price\nm5.large,0.1\n", "missing capacityType"),
        "b.json": ('[{"instanceType": "m5.large", "capacityType": "od", "price": 1}]', "[0].capacityType"),
        "c.json": ('[{"instanceType": "m5.large", "capacityType": "spot", "price": -1}]', "[0].price"),
        "d.json": ('[{"instanceType": "zz.huge", "capacityType": "spot", "price": 1}]', "no entry matches"),
        "e.json": ("{not json", "not valid JSON"),
    }
    for name, (text, expected) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        code, _, err = run_cli(capsys, "status", "--snapshot", str(dump), "--prices", str(path))
        assert code == 2, (name, err)
        assert expected in err and len(err.strip().splitlines()) == 1, (name, err)
