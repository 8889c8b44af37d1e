"""Static NodePools (spec.replicas, gate StaticCapacity) in the simulator: exactly N nodes, scale down by
Karpenter's order, limits.nodes, never consolidated, drift replaced one node at a time."""

from __future__ import annotations

from typing import Any

from test_sim_steps import deployment, nodepool, run

GATE = {"featureGates": {"StaticCapacity": True}}


def static_pool(replicas: int, name: str = "fixed", **spec: Any) -> dict[str, Any]:
    pool = nodepool(name, **spec)
    pool["spec"]["replicas"] = replicas
    return pool


def managed(result: dict[str, Any], pool: str = "fixed") -> list[dict[str, Any]]:
    return [n for n in result["final"]["nodes"] if n["nodepool"] == pool]


def test_a_replicas_3_pool_runs_exactly_3_nodes_of_its_cheapest_type_and_is_never_consolidated() -> None:
    result = run([static_pool(3)], [{"provision": {}}, {"disrupt": {"until": "stable"}}, {"provision": {}}], **GATE)
    launched = result["steps"][0]["launched"]
    assert len(launched) == 3 and {item["instanceType"] for item in launched} == {"small"}
    assert all(item["pods"] == [] for item in launched)
    assert len(managed(result)) == 3  # empty, yet neither emptiness nor consolidation removed them
    blocked = [e for e in result["steps"][1]["events"] if e["reason"] == "DisruptionBlocked"]
    assert {e["code"] for e in blocked} == {"StaticNodePool"} and len(blocked) == 3
    assert result["steps"][2]["launched"] == []  # a second pass finds the count right


def test_without_the_gate_a_static_pool_launches_nothing() -> None:
    result = run([static_pool(3), deployment("app", 2)], [{"provision": {}}])
    assert managed(result) == []
    assert len(result["final"]["pending"]) == 2  # a static pool never provisions for pods either


def test_pods_use_static_nodes_but_a_static_pool_never_grows_for_them() -> None:
    result = run([static_pool(1), deployment("app", 3)], [{"provision": {}}], **GATE)
    (node,) = managed(result)
    assert len(node["pods"]) == 1  # 2 CPU small node: one 1-CPU pod fits beside the overhead
    assert len(result["final"]["pending"]) == 2


def test_scaling_down_deletes_empty_nodes_first_and_keeps_the_busy_one() -> None:
    objects = [static_pool(3), deployment("app", 1)]
    scaled = static_pool(1)
    result = run(objects, [{"provision": {}}, {"apply": [scaled]}, {"provision": {}}], **GATE)
    ((pod, busy),) = result["steps"][0]["bound"].items()  # the pod landed on one of the static nodes
    (kept,) = managed(result)
    assert kept["name"] == busy and kept["pods"] == [pod]
    deleted = [e["object"] for e in result["steps"][2]["events"] if e["reason"] == "StaticScaleDown"]
    assert len(deleted) == 2 and f"NodeClaim/{busy}" not in deleted
    assert result["final"]["pending"] == []


def test_limits_nodes_caps_the_replicas_and_says_so() -> None:
    result = run([static_pool(3, limits={"nodes": "2"})], [{"provision": {}}], **GATE)
    assert len(managed(result)) == 2
    (note,) = [e for e in result["steps"][0]["events"] if e["reason"] == "StaticCapacityBlocked"]
    assert "limits.nodes 2 allows 2 of the 3 missing replica(s)" in note["message"]


def test_drifted_static_nodes_are_replaced_one_at_a_time_from_the_template() -> None:
    labelled = static_pool(3)
    labelled["spec"]["template"].setdefault("metadata", {})["labels"] = {"team": "blue"}
    steps = [{"provision": {}}, {"apply": [labelled]}, {"disrupt": {}}, {"disrupt": {"until": "stable"}}]
    result = run([static_pool(3)], steps, **GATE)
    first = {item["node"] for item in result["steps"][0]["launched"]}
    once = result["steps"][2]
    assert [(d["reason"], d["method"], d["action"]) for d in once["disrupted"]] == [
        ("Drifted", "static-drift", "replace")]
    assert len(once["launched"]) == 1 and once["launched"][0]["pods"] == []
    rest = result["steps"][3]["disrupted"]
    assert len(rest) == 2 and all(len(d["replacements"]) == 1 for d in rest)
    final = managed(result)
    assert len(final) == 3 and not first & {n["name"] for n in final}
