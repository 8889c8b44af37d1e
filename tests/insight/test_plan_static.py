"""``plan`` with a static NodePool (spec.replicas, gate StaticCapacity): the preview runs its replicas."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import yaml
from insight_support import example_cluster, example_pools, write_snapshot

from reconciler.insight.plan.compute import compute_plan
from reconciler.insight.sources import ProposedConfig, load_snapshot


def static_pool(replicas: int) -> dict[str, Any]:
    pool = copy.deepcopy(example_pools()[0])
    pool["metadata"]["name"] = "fixed"
    pool["spec"]["replicas"] = replicas
    pool["spec"].pop("disruption", None)
    return pool


def plan_with(tmp_path: Path, gates: dict[str, bool]) -> Any:
    cluster = example_cluster()
    cluster["settings"]["featureGates"] = gates
    snapshot = write_snapshot(tmp_path, cluster)
    document = yaml.safe_load(snapshot.read_text())
    assert document["settings"].get("featureGates") in (None, gates)
    document["settings"]["featureGates"] = gates  # the gates the cluster's reconciler runs with
    snapshot.write_text(yaml.safe_dump(document, sort_keys=False))
    proposed = ProposedConfig([*example_pools(), static_pool(3)], [], "static")
    return asyncio.run(compute_plan(load_snapshot(snapshot), proposed, frames=False))


def test_a_replicas_3_static_pool_runs_3_nodes_in_the_plan(tmp_path: Path) -> None:
    plan = plan_with(tmp_path, {"StaticCapacity": True})
    assert plan.proposed.by_pool["fixed"]["nodes"] == 3
    assert not plan.newly_pending
    launched = [item for record in plan.records for item in record["launched"] if item["nodepool"] == "fixed"]
    assert len(launched) == 3 and {item["instanceType"] for item in launched} == {"c5.large"}  # cheapest


def test_without_the_gate_the_plan_shows_the_static_pool_empty_and_says_why(tmp_path: Path) -> None:
    plan = plan_with(tmp_path, {"StaticCapacity": False})
    assert plan.proposed.by_pool.get("fixed", {}).get("nodes", 0) == 0
    (finding,) = plan.unsupported
    assert (finding.kind, finding.name, finding.path) == ("NodePool", "fixed", "spec.replicas")
    assert "StaticCapacity feature gate, which is off" in finding.message
