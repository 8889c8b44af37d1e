"""``plan`` and ``explain`` show fields Adze does not implement as risks (reconciler.api.support)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from insight_support import example_cluster, example_pools, find, run_cli, status_nodes, write_snapshot

from reconciler.insight.plan.compute import compute_plan
from reconciler.insight.plan.render import render_text
from reconciler.insight.plan.risks import risk_lines, verdict
from reconciler.insight.sources import ProposedConfig, load_snapshot


def test_plan_lists_an_unsupported_field_of_the_proposal_and_asks_for_a_review(tmp_path: Path) -> None:
    snapshot = write_snapshot(tmp_path, example_cluster())
    pools = example_pools()
    pools[0]["spec"]["replicas"] = 3  # without the StaticCapacity gate (off by default) Adze ignores it
    plan = asyncio.run(compute_plan(load_snapshot(snapshot), ProposedConfig(pools, [], "static"), frames=False))
    name = pools[0]["metadata"]["name"]
    found = [(f.kind, f.name, f.path) for f in plan.unsupported]
    assert found == [("NodePool", name, "spec.replicas")]
    state, risk = verdict(plan)
    assert state == "review" and risk.startswith(f"NodePool {name} sets spec.replicas, which Adze")
    assert risk_lines(plan)[0].startswith(f"not implemented by Adze: NodePool {name}: spec.replicas: needs the "
                                          "StaticCapacity feature gate")
    assert f"risk: not implemented by Adze: NodePool {name}: spec.replicas" in render_text(plan)
    assert plan.as_dict()["unsupportedFields"][0]["path"] == "spec.replicas"

    unchanged = asyncio.run(compute_plan(load_snapshot(snapshot), ProposedConfig(example_pools(), [], "same"),
                                         frames=False))
    assert unchanged.unsupported == [] and not any("not implemented" in line for line in risk_lines(unchanged))


def explain(capsys: Any, snapshot: Path, *args: str) -> dict[str, Any]:
    code, out, err = run_cli(capsys, "explain", *args, "--snapshot", str(snapshot), "--json")
    assert code == 0, err
    return json.loads(out)


def test_explain_names_the_unsupported_fields_of_a_nodes_pool_and_class(capsys: Any, tmp_path: Path) -> None:
    document = example_cluster()
    spec = find(document, "EC2NodeClass", "default")["spec"]
    spec["amiSelectorTerms"], spec["kubelet"] = [{"alias": "bottlerocket@latest"}], {"podsPerCore": 4}
    snapshot = write_snapshot(tmp_path, document)
    node = next(n["name"] for n in status_nodes(capsys, snapshot) if n["nodepool"] == "general")
    result = explain(capsys, snapshot, "node", node)
    assert result["risks"] == ["not implemented by Adze: EC2NodeClass default: spec.kubelet: spec.kubelet has "
                               "fields not applied by the Bottlerocket AMI family that would be silently dropped: "
                               "podsPerCore"]
    code, text, _ = run_cli(capsys, "explain", "node", node, "--snapshot", str(snapshot))
    assert code == 0 and "risks:\n  - not implemented by Adze: EC2NodeClass default: spec.kubelet" in text
    (tmp_path / "clean").mkdir()
    clean = write_snapshot(tmp_path / "clean", example_cluster())
    node = next(n["name"] for n in status_nodes(capsys, clean) if n["nodepool"] == "general")
    assert explain(capsys, clean, "node", node)["risks"] == []
