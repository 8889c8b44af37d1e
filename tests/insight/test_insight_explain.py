"""``explain pod`` / ``explain node``: concrete blockers (object names, numbers), never a generic reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from insight_support import example_cluster, find, run_cli, status_nodes, write_snapshot

SPREAD_CLUSTER: dict[str, Any] = {
    "name": "spread",
    "settings": {"clock": "2026-01-05T10:00:00Z"},
    "catalog": {
        "region": "us-east-1",
        "instanceTypes": [
            {
                "name": "c5.large",
                "capacity": {"cpu": "2", "memory": "4Gi", "pods": "29"},
                "offerings": [
                    {"capacityType": "on-demand", "zone": zone, "price": 0.085}
                    for zone in ("us-east-1a", "us-east-1b", "us-east-1c")
                ],
            }
        ],
    },
    "objects": [
        {  # a snapshot's NodePool launches only with its EC2NodeClass present
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {"role": "KarpenterNodeRole-demo", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                     "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                     "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}]},
        },
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "zonal"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {
                            "group": "karpenter.k8s.aws",
                            "kind": "EC2NodeClass",
                            "name": "default",
                        },
                        "requirements": [
                            {
                                "key": "topology.kubernetes.io/zone",
                                "operator": "In",
                                "values": ["us-east-1a", "us-east-1b"],
                            }
                        ],
                    }
                }
            },
        },
        # A tainted system node in us-east-1c makes that zone a spread domain nobody can fill.
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "system-c",
                "labels": {"topology.kubernetes.io/zone": "us-east-1c", "kubernetes.io/hostname": "system-c"},
            },
            "spec": {"taints": [{"key": "CriticalAddonsOnly", "value": "true", "effect": "NoSchedule"}]},
            "status": {
                "capacity": {"cpu": "2", "memory": "4Gi", "pods": "29"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "spread", "namespace": "default", "labels": {"app": "spread"}},
            "replicas": 4,
            "spec": {
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"app": "spread"}},
                    }
                ],
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}],
            },
        },
    ],
    "steps": [{"provision": {}}],
}


@pytest.fixture(scope="module")
def cluster_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    document = example_cluster()
    # A GPU job that forgot its toleration, and a PDB that pins the api pods.
    document["objects"].append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "untolerated-gpu", "namespace": "ml"},
            "spec": {
                "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
            },
        }
    )
    document["objects"].append(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "api-pdb", "namespace": "default"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "api"}}},
        }
    )
    return write_snapshot(tmp_path_factory.mktemp("explain"), document)


def explain(capsys: Any, snapshot: Path, *args: str) -> dict[str, Any]:
    code, out, err = run_cli(capsys, "explain", *args, "--snapshot", str(snapshot), "--json")
    assert code == 0, err
    return json.loads(out)


def test_pod_pending_because_of_a_spread_constraint(capsys: Any, tmp_path: Path) -> None:
    snapshot = write_snapshot(tmp_path, SPREAD_CLUSTER)
    result = explain(capsys, snapshot, "pod", "default/spread-0")
    assert result["verdict"] == "cannot be scheduled on existing or new capacity"
    pool = next(r for r in result["reasons"] if r.startswith("NodePool zonal:"))
    assert "topology spread on topology.kubernetes.io/zone (maxSkew 1)" in pool
    assert "counts {us-east-1a: 1, us-east-1b: 1, us-east-1c: 0}" in pool
    assert "topology.kubernetes.io/zone In [us-east-1a, us-east-1b]" in pool
    assert any("node system-c has taint CriticalAddonsOnly=true:NoSchedule" in r for r in result["reasons"])
    assert "topology spread on topology.kubernetes.io/zone maxSkew 1 (DoNotSchedule)" in result["facts"]

    code, text, _ = run_cli(capsys, "explain", "pod", "default/spread-0", "--snapshot", str(snapshot))
    assert code == 0
    assert text.startswith("Pod default/spread-0: cannot be scheduled") and "\nbecause:\n" in text


def test_pod_rejected_by_taint_and_resources_per_nodepool(capsys: Any, cluster_snapshot: Path) -> None:
    result = explain(capsys, cluster_snapshot, "pod", "ml/untolerated-gpu")
    reasons = {r.split(":")[0]: r for r in result["reasons"] if r.startswith("NodePool ")}
    assert "did not tolerate taint nvidia.com/gpu=true:NoSchedule" in reasons["NodePool gpu"]
    general = reasons["NodePool general"]
    assert "nvidia.com/gpu 1" in general and "instance types" in general  # the need, and what lacks it
    assert "requests nvidia.com/gpu 1" in result["facts"][0]


def test_node_held_by_a_pdb_names_the_pdb_and_the_pod(capsys: Any, cluster_snapshot: Path) -> None:
    nodes = status_nodes(capsys, cluster_snapshot)
    general = [n["name"] for n in nodes if n["nodepool"] == "general"]
    for name in general:
        result = explain(capsys, cluster_snapshot, "node", name, "--clock", "2026-01-05T11:00:00Z")
        assert result["verdict"] == "not disrupted now"
        pdb = [r for r in result["reasons"] if r.startswith("PDB:")]
        assert pdb and "PDB default/api-pdb allows 0 disruptions (pod default/api-" in pdb[0]


def test_node_whose_replacement_is_not_cheaper(capsys: Any, tmp_path: Path) -> None:
    snapshot = write_snapshot(tmp_path, example_cluster())
    smallest = min(
        (n for n in status_nodes(capsys, snapshot) if n["nodepool"] == "general"), key=lambda n: n["price"]
    )
    inside_window = explain(capsys, snapshot, "node", smallest["name"])
    assert any(r.startswith("ConsolidateAfter") and "5m left" in r for r in inside_window["reasons"])

    later = explain(capsys, snapshot, "node", smallest["name"], "--clock", "2026-01-05T10:30:00Z")
    assert later["verdict"] == "not disrupted now"
    assert any(r.startswith("NotCheaper") for r in later["reasons"])
    what_if = next(r for r in later["reasons"] if r.startswith("replacement not cheaper"))
    assert f"vs ${smallest['price']:.4f}/h now" in what_if
    assert "consolidateAfter 5m has elapsed (WhenEmptyOrUnderutilized)" in later["facts"]


def test_empty_node_would_be_disrupted_now(capsys: Any, tmp_path: Path) -> None:
    document = example_cluster()
    trainer = find(document, "Deployment", "trainer")
    scaled = json.loads(json.dumps(trainer))
    scaled["spec"]["replicas"] = 0
    document["steps"] = [{"provision": {}}, {"apply": [scaled]}]
    snapshot = write_snapshot(tmp_path, document)
    gpu_node = next(n["name"] for n in status_nodes(capsys, snapshot) if n["nodepool"] == "gpu")
    result = explain(capsys, snapshot, "node", gpu_node, "--clock", "2026-01-05T11:01:00Z")
    assert result["verdict"] == "would be disrupted now: Empty by emptiness, delete"
    assert result["reasons"][0].startswith("saves $1.0060/h")


def test_unmanaged_and_running_and_unknown(capsys: Any, tmp_path: Path) -> None:
    snapshot = write_snapshot(tmp_path, SPREAD_CLUSTER)
    result = explain(capsys, snapshot, "node", "system-c")
    assert result["verdict"].startswith("not managed by Adze")
    running = explain(capsys, snapshot, "pod", "default/spread-2")
    assert running["verdict"].startswith("running on node ")
    code, out, err = run_cli(capsys, "explain", "pod", "default/nope", "--snapshot", str(snapshot))
    assert code == 2 and out == "" and err == "error: pod: default/nope is not in the snapshot\n"
    code, _, err = run_cli(capsys, "explain", "node", "ghost", "--snapshot", str(snapshot))
    assert code == 2 and "node: ghost is neither a Node nor a NodeClaim" in err
