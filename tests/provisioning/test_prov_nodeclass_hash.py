"""NodeClaims carry their EC2NodeClass's hash, so editing the class drifts exactly its nodes (live and simulated)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from reconciler.kube.api import NODECLAIM
from reconciler.model import labels as wk
from reconciler.provisioning.drift_hashes import (
    NODECLASS_HASH_ANNOTATION,
    NODECLASS_HASH_VERSION,
    NODECLASS_HASH_VERSION_ANNOTATION,
    nodeclass_hash,
)
from reconciler.sim.runner import Simulation
from reconciler.sim.scenario import Scenario, parse_scenario

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduling"))
from sched_factories import nodepool, pod, solve


def nodeclass(name: str = "default", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {
            "role": "KarpenterNodeRole-demo",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            **spec,
        },
    }


def test_planned_nodeclaims_carry_the_nodeclass_hash_of_their_pool() -> None:
    tagged = nodeclass(tags={"team": "web"})
    result = solve([tagged, nodepool(), pod("web", cpu="1")])
    [planned] = result.nodeclaims
    annotations = planned.manifest()["metadata"]["annotations"]
    assert annotations[NODECLASS_HASH_ANNOTATION] == nodeclass_hash(tagged)
    assert annotations[NODECLASS_HASH_VERSION_ANNOTATION] == NODECLASS_HASH_VERSION
    assert wk.NODEPOOL_HASH in annotations  # the NodePool hash is still written


def test_each_pool_stamps_its_own_class_and_an_unknown_class_stamps_nothing() -> None:
    other = nodepool("batch", taints=[{"key": "batch", "effect": "NoSchedule"}])
    other["spec"]["template"]["spec"]["nodeClassRef"]["name"] = "batch"
    missing = nodepool("orphan", taints=[{"key": "orphan", "effect": "NoSchedule"}])
    missing["spec"]["template"]["spec"]["nodeClassRef"]["name"] = "absent"
    default, batch = nodeclass(), nodeclass("batch", userData="echo batch")
    result = solve(
        [
            default,
            batch,
            nodepool(),
            other,
            missing,
            pod("web", cpu="1"),
            pod("job", cpu="1", tolerations=[{"key": "batch", "operator": "Exists"}],
                nodeSelector={wk.NODEPOOL: "batch"}),
            pod("lost", cpu="1", tolerations=[{"key": "orphan", "operator": "Exists"}],
                nodeSelector={wk.NODEPOOL: "orphan"}),
        ]
    )
    stamped = {c.nodepool: c.manifest()["metadata"]["annotations"].get(NODECLASS_HASH_ANNOTATION)
               for c in result.nodeclaims}
    assert stamped == {"default": nodeclass_hash(default), "batch": nodeclass_hash(batch), "orphan": None}
    assert stamped["default"] != stamped["batch"]


# -- the simulator: provisioning stamps the hash, an edited class drifts only its nodes ------------------

CATALOG = {
    "zones": ["z1"],
    "instanceTypes": [
        {
            "name": "medium",
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "32"},
            "offerings": [{"capacityType": "on-demand", "zone": "z1", "price": 0.2}],
        }
    ],
}


def sim_pool(name: str, nodeclass_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": nodeclass_name},
                    "requirements": [],
                }
            },
            "disruption": {"consolidationPolicy": "WhenEmpty", "budgets": [{"nodes": "100%"}]},
        },
    }


def sim_pods(name: str, pool: str, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "replicas": count,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeSelector": {wk.NODEPOOL: pool},
            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "3"}}}],
        },
    }


def scenario(steps: list[dict[str, Any]]) -> Scenario:
    return parse_scenario(
        {
            "name": "nodeclass-drift",
            "catalog": CATALOG,
            "objects": [
                nodeclass("web"),
                nodeclass("batch"),
                sim_pool("web", "web"),
                sim_pool("batch", "batch"),
                sim_pods("web", "web", 2),
                sim_pods("batch", "batch", 2),
            ],
            "steps": steps,
        }
    )


async def test_simulated_provisioning_stamps_the_nodeclass_hash() -> None:
    sim = Simulation(scenario([{"provision": {}}]))
    await sim.run()
    claims, _ = await sim.kube.list(NODECLAIM)
    assert len(claims) == 4
    for claim in claims:
        annotations = claim["metadata"]["annotations"]
        assert annotations[NODECLASS_HASH_ANNOTATION] == nodeclass_hash(nodeclass())
        assert annotations[NODECLASS_HASH_VERSION_ANNOTATION] == NODECLASS_HASH_VERSION


async def provision_edit_and_disrupt(edited: dict[str, Any]) -> dict[str, Any]:
    """Provision both pools, apply the edited class, run disruption until nothing more happens."""
    steps = [{"provision": {}}, {"apply": [edited]}, {"disrupt": {"until": "stable"}}]
    return await Simulation(scenario(steps)).run()


async def test_simulated_nodeclass_edit_drifts_and_replaces_only_the_nodes_of_that_class() -> None:
    edited = nodeclass("web", userData="#!/bin/bash\necho tuned")
    result = await provision_edit_and_disrupt(edited)

    launched = {item["nodeclaim"]: item["nodepool"] for item in result["steps"][0]["launched"]}
    assert sorted(launched.values()) == ["batch", "batch", "web", "web"]
    disrupted = result["steps"][2]["disrupted"]
    assert sorted(d["nodeclaim"] for d in disrupted) == sorted(n for n, p in launched.items() if p == "web")
    assert {d["reason"] for d in disrupted} == {"Drifted"}
    final = {node["name"]: node["nodepool"] for node in result["final"]["nodes"]}
    assert {n for n, p in final.items() if p == "batch"} == {n for n, p in launched.items() if p == "batch"}
    web_now = {n for n, p in final.items() if p == "web"}
    assert len(web_now) == 2 and not web_now & set(launched)  # replaced by new nodes
    assert result["final"]["pending"] == []


async def test_simulated_edit_of_a_field_karpenter_does_not_hash_drifts_nothing() -> None:
    edited = nodeclass("web", subnetSelectorTerms=[{"id": "subnet-0123"}])
    result = await provision_edit_and_disrupt(edited)
    assert result["steps"][2]["disrupted"] == []
