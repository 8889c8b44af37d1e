"""Issue 24, 3: an instance Adze launches joins the real control plane as an EKS node does.

The Node is registered by the kubelet's own identity with the labels and taints the launch template's user
data gives it (NodePool labels, its taint, its startup taint and ``karpenter.sh/unregistered``); Adze then
registers it (the unregistered taint goes), the startup agent removes its taint, and the NodeClaim becomes
initialized. kwok keeps the node's Lease renewed and its Ready condition (the node lifecycle controller
never taints it unreachable), runs the pod kube-scheduler bound (Running, Ready, a pod IP) and completes a
graceful deletion. When the instance terminates, the Node goes. NodeRestriction refuses a kubelet a label
outside its allowed set, as on EKS.
"""

from __future__ import annotations

import pytest
from support.adze_cluster import AdzeCluster
from support.cluster_watch import Objects, wait_for
from support.control_plane import ApiError
from support.cp_manifests import deployment, is_ready, nodepool

from reconciler.model import labels as wk

STARTUP_TAINT = {"key": "example.com/agent-not-ready", "effect": "NoExecute"}
TAINT = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}


def test_a_launched_instance_joins_runs_pods_and_leaves(adze: AdzeCluster) -> None:
    plane = adze.plane
    adze.nodes.startup_taint_keys = frozenset({STARTUP_TAINT["key"]})
    pool = nodepool("batch", labels={"team": "batch"})
    pool["spec"]["template"]["spec"]["taints"] = [TAINT]
    pool["spec"]["template"]["spec"]["startupTaints"] = [STARTUP_TAINT]
    adze.apply(adze.nodeclass())
    adze.apply(pool)
    workload = deployment("job", 1)
    workload["spec"]["template"]["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    adze.apply(workload)
    adze.start_reconciler()

    # As registered by the kubelet, before Adze touched it (the audit log's create, by system:node:<name>).
    first = wait_for(plane, "/api/v1/nodes", lambda nodes: next(iter(nodes.values()), None), timeout=120,
                     what="a Node registered")
    name = first["metadata"]["name"]
    created = [e for e in plane.audit_events(lambda e: e["verb"] == "create" and (e.get("objectRef") or {}).get(
        "resource") == "nodes" and (e.get("objectRef") or {}).get("name") == name)]
    assert [e["user"]["username"] for e in created] == [f"system:node:{name}"]
    assert created[0]["responseStatus"]["code"] == 201
    joined = adze.nodes.joined[0]
    assert joined.name == name and first["spec"]["providerID"] == joined.provider_id

    node = wait_for(plane, "/api/v1/nodes", lambda nodes: _initialized(nodes.get(f"/{name}")), timeout=120,
                    what="the node registered by Adze and initialized", describe=_describe_nodes)
    labels = node["metadata"]["labels"]
    assert labels["team"] == "batch" and labels[wk.NODEPOOL] == "batch"
    instance = adze.aws.client("ec2").describe_instances(InstanceIds=[joined.instance_id])["Reservations"][0][
        "Instances"][0]
    assert labels[wk.INSTANCE_TYPE] == instance["InstanceType"]
    assert labels[wk.ZONE] == instance["Placement"]["AvailabilityZone"]
    assert labels[wk.HOSTNAME] == name
    taints = [{k: v for k, v in t.items() if k != "timeAdded"} for t in node["spec"].get("taints") or []]
    assert taints == [TAINT], taints  # startup and unregistered taints gone; no unreachable/not-ready taint
    assert is_ready(node)

    pods_path = f"/api/v1/namespaces/{adze.namespace}/pods"
    pods = wait_for(plane, pods_path, lambda pods: pods if pods and all(
        p["spec"].get("nodeName") == name and is_ready(p) for p in pods.values()) else None,
        timeout=60, what="the pod Running on the node")
    pod = next(iter(pods.values()))
    assert pod["status"]["phase"] == "Running" and pod["status"].get("podIP")

    # kwok renews the node's Lease (kube-node-lease), so the node lifecycle controller sees it alive.
    lease_path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
    renewed = wait_for(plane, lease_path, lambda leases: leases.get(f"kube-node-lease/{name}"), timeout=60,
                       what="the node's Lease")
    wait_for(plane, lease_path, lambda leases: (leases.get(f"kube-node-lease/{name}") or {}).get("spec", {}).get(
        "renewTime") not in (None, renewed["spec"].get("renewTime")), timeout=60, what="the Lease renewed")

    # Graceful deletion completes (the ReplicaSet then makes a replacement).
    pod_name = pod["metadata"]["name"]
    plane.request("DELETE", f"{pods_path}/{pod_name}", {"gracePeriodSeconds": 5})
    wait_for(plane, pods_path, lambda pods: f"{adze.namespace}/{pod_name}" not in pods, timeout=60,
             what="the deleted pod gone")

    # The instance terminates: its Node goes (the cloud node lifecycle).
    adze.aws.client("ec2").terminate_instances(InstanceIds=[joined.instance_id])
    wait_for(plane, "/api/v1/nodes", lambda nodes: f"/{name}" not in nodes, timeout=120,
             what="the Node of the terminated instance removed")
    assert not adze.nodes.errors, adze.nodes.errors


def test_node_restriction_refuses_a_kubelet_label_outside_its_set(adze: AdzeCluster) -> None:
    plane = adze.plane
    kubelet = plane.identity("node-probe", "system:node:probe.ec2.internal", ["system:nodes"])
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "probe.ec2.internal", "labels": {
        "node-restriction.kubernetes.io/pool": "x"}}}
    with pytest.raises(ApiError) as refused:
        plane.request("POST", "/api/v1/nodes", node, identity=kubelet)
    assert refused.value.status == 403 and "node-restriction.kubernetes.io" in str(refused.value)
    node["metadata"]["name"] = "other.ec2.internal"
    node["metadata"]["labels"] = {}
    with pytest.raises(ApiError) as other:  # a kubelet registers only itself
        plane.request("POST", "/api/v1/nodes", node, identity=kubelet)
    assert other.value.status == 403


def _initialized(node: dict | None) -> dict | None:
    if node is None:
        return None
    labels = node["metadata"].get("labels") or {}
    return node if labels.get(wk.REGISTERED) == "true" and labels.get(wk.INITIALIZED) == "true" else None


def _describe_nodes(nodes: Objects) -> str:
    return "; ".join(
        f"{n['metadata']['name']} taints={[t['key'] for t in n['spec'].get('taints') or []]} "
        f"registered={n['metadata'].get('labels', {}).get(wk.REGISTERED)}"
        for n in nodes.values()
    ) or "(no nodes)"
