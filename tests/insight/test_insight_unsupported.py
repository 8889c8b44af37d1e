"""``plan`` and ``explain`` show fields Adze does not implement as risks (reconciler.api.support)."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

from insight_support import example_cluster, example_pools, find, run_cli, status_nodes, write_snapshot

from reconciler.insight.plan import compute_plan
from reconciler.insight.plan_render import render_text
from reconciler.insight.plan_risks import risk_lines, verdict
from reconciler.insight.sources import ProposedConfig, load_snapshot

EFA = [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
       {"networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "efa-only"}]


def test_plan_lists_an_unsupported_field_of_the_proposal_and_asks_for_a_review(tmp_path: Path) -> None:
    snapshot = write_snapshot(tmp_path, example_cluster())
    nodeclass = copy.deepcopy(find(example_cluster(), "EC2NodeClass", "default"))
    nodeclass["spec"]["networkInterfaces"] = EFA
    plan = asyncio.run(compute_plan(load_snapshot(snapshot), ProposedConfig(example_pools(), [nodeclass], "efa"),
                                    frames=False))
    found = [(f.kind, f.name, f.path) for f in plan.unsupported]
    assert found == [("EC2NodeClass", "default", "spec.networkInterfaces")]
    state, risk = verdict(plan)
    assert state == "review" and risk.startswith("EC2NodeClass default sets spec.networkInterfaces, which Adze")
    assert risk_lines(plan)[0].startswith("not implemented by Adze: EC2NodeClass default: spec.networkInterfaces:")
    assert "risk: not implemented by Adze: EC2NodeClass default: spec.networkInterfaces" in render_text(plan)
    assert plan.as_dict()["unsupportedFields"][0]["path"] == "spec.networkInterfaces"

    unchanged = asyncio.run(compute_plan(load_snapshot(snapshot), ProposedConfig(example_pools(), [], "same"),
                                         frames=False))
    assert unchanged.unsupported == [] and not any("not implemented" in line for line in risk_lines(unchanged))


def explain(capsys: Any, snapshot: Path, *args: str) -> dict[str, Any]:
    code, out, err = run_cli(capsys, "explain", *args, "--snapshot", str(snapshot), "--json")
    assert code == 0, err
    return json.loads(out)


def test_explain_names_the_unsupported_fields_of_a_nodes_pool_and_class(capsys: Any, tmp_path: Path) -> None:
    document = example_cluster()
    find(document, "EC2NodeClass", "default")["spec"]["ipPrefixCount"] = 4
    snapshot = write_snapshot(tmp_path, document)
    node = next(n["name"] for n in status_nodes(capsys, snapshot) if n["nodepool"] == "general")
    result = explain(capsys, snapshot, "node", node)
    assert result["risks"] == ["not implemented by Adze: EC2NodeClass default: spec.ipPrefixCount: prefix "
                               "delegation counts are not passed to the network interface; max pods ignore them"]
    code, text, _ = run_cli(capsys, "explain", "node", node, "--snapshot", str(snapshot))
    assert code == 0 and "risks:\n  - not implemented by Adze: EC2NodeClass default: spec.ipPrefixCount" in text
    (tmp_path / "clean").mkdir()
    clean = write_snapshot(tmp_path / "clean", example_cluster())
    node = next(n["name"] for n in status_nodes(capsys, clean) if n["nodepool"] == "general")
    assert explain(capsys, clean, "node", node)["risks"] == []
