"""Issue 24, 4(e): deleting a NodePool cascades through ownerReferences and the real garbage collector; a deleted
EC2NodeClass waits on its finalizer while NodeClaims use it.

Two nodes of one NodePool run two pods. The NodeClaims are owned by the NodePool and each Node by its
NodeClaim (ownerReferences with ``blockOwnerDeletion``, as Karpenter sets them). The EC2NodeClass is deleted
first: it stays, with its ``karpenter.k8s.aws/termination`` finalizer, while the reconciler waits on the
NodeClaims that use it (nothing else moves). Then ``kubectl delete nodepool`` (a background cascade): the
kube-controller-manager's garbage collector (never the test, never the reconciler) deletes the NodeClaims;
their termination drains and deletes the Nodes and terminates the instances in moto; only when the last
NodeClaim is gone does the EC2NodeClass go, its launch templates deleted. The order is read from etcd's
revisions of the DELETED events (one etcd: one revision sequence for every kind).
"""

from __future__ import annotations

from support.adze_cluster import AdzeCluster
from support.cluster_watch import Objects, Recorder, wait_for
from support.cp_manifests import deployment, nodepool
from support.cp_state import (
    NODECLAIMS,
    NODES,
    deleting,
    describe_claims,
    initialized,
    instance_of,
    instance_state,
    live_instances,
    name_of,
    object_ref,
    pool_of,
    username,
)

from reconciler.cloud.aws.tags import EKS_CLUSTER_NAME_TAG, NODECLASS_TAG

POOL = "doomed"
APP = "svc"
REPLICAS = 2
NODECLASSES = "/apis/karpenter.k8s.aws/v1/ec2nodeclasses"
GARBAGE_COLLECTOR = "system:serviceaccount:kube-system:generic-garbage-collector"


def test_nodepool_deletion_cascades_and_the_nodeclass_waits_for_its_nodeclaims(adze: AdzeCluster) -> None:
    plane = adze.plane
    adze.apply(adze.nodeclass())
    adze.apply(nodepool(POOL, sizes=("large",), consolidation_policy="WhenEmpty", consolidate_after="Never"))
    adze.apply(deployment(APP, REPLICAS, one_per_node=True))
    reconciler = adze.start_reconciler()
    claims = wait_for(plane, NODECLAIMS, lambda current: _pool_claims(current), timeout=180,
                      what=f"{REPLICAS} initialized NodeClaims", describe=describe_claims)

    # Ownership as Karpenter sets it: NodePool -> NodeClaims -> Nodes.
    pool = plane.request("GET", f"/apis/karpenter.sh/v1/nodepools/{POOL}")
    nodes = {name_of(n): n for n in plane.request("GET", NODES)["items"]}
    for claim in claims.values():
        assert claim["metadata"]["ownerReferences"] == [{
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": POOL, "uid": pool["metadata"]["uid"],
            "blockOwnerDeletion": True}]
        node = nodes[claim["status"]["nodeName"]]
        assert {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": name_of(claim),
                "uid": claim["metadata"]["uid"], "blockOwnerDeletion": True} in node["metadata"]["ownerReferences"]
    instances = {instance_of(c) for c in claims.values()}
    assert instances <= set(live_instances(adze.aws))
    templates = _launch_templates(adze)
    assert templates, "no launch template was made for the EC2NodeClass"

    recorders = {path: Recorder(plane, path, lambda _objects: None).start()
                 for path in (NODECLAIMS, NODES, NODECLASSES)}
    try:
        # The EC2NodeClass is deleted while its NodeClaims run: it waits on its finalizer.
        plane.request("DELETE", f"{NODECLASSES}/default")
        held = wait_for(plane, NODECLASSES, lambda classes: classes.get("/default") if deleting(
            classes.get("/default") or {"metadata": {}}) else None, timeout=30, what="the EC2NodeClass deleting")
        assert "karpenter.k8s.aws/termination" in held["metadata"]["finalizers"]
        waiting = reconciler.wait_for_log("waiting on nodeclaim termination", timeout=60)
        assert waiting["nodeclaims"] == REPLICAS
        assert plane.request("GET", f"{NODECLASSES}/default")["metadata"]["finalizers"]
        assert set(_pool_claims({name_of(c): c for c in plane.request("GET", NODECLAIMS)["items"]}) or ()) == set(
            claims)

        # The NodePool is deleted: the garbage collector cascades to the NodeClaims.
        plane.kubectl("delete", "nodepool", POOL, "--wait=false")
        wait_for(plane, NODECLAIMS, lambda current: not any(pool_of(c) == POOL for c in current.values()),
                 timeout=240, what="the NodeClaims gone", describe=describe_claims)
        wait_for(plane, NODECLASSES, lambda classes: "/default" not in classes, timeout=120,
                 what="the EC2NodeClass gone", describe=lambda classes: f"{sorted(classes)}; the reconciler: "
                 + "; ".join(str(line) for line in reconciler.lines() if "EC2NodeClass" in line))
        wait_for(plane, NODES, lambda current: not set(current) & {f"/{n}" for n in nodes}, timeout=60,
                 what="the Nodes gone")
    finally:
        for recorder in recorders.values():
            recorder.stop()
    assert all(not r.errors for r in recorders.values()), [r.errors for r in recorders.values()]

    gone = {key.lstrip("/"): version for r in recorders.values() for key, version in r.deleted.items()}
    for claim in claims.values():  # each Node went before its NodeClaim released it
        assert gone[claim["status"]["nodeName"]] < gone[name_of(claim)], gone
    assert gone["default"] > max(gone[c] for c in claims), gone  # the class outlived every claim
    # The garbage collector deleted each NodeClaim first (the reconciler's own DELETEs of a claim it is
    # terminating may follow).
    deleters: dict[str, list[str]] = {}
    for event in sorted(plane.audit_events(
            lambda e: e["verb"] == "delete" and object_ref(e).get("resource") == "nodeclaims"
            and object_ref(e).get("name") in claims), key=lambda e: e["requestReceivedTimestamp"]):
        deleters.setdefault(object_ref(event)["name"], []).append(username(event))
    assert {name: users[0] for name, users in deleters.items()} == {name: GARBAGE_COLLECTOR for name in claims}, \
        deleters
    assert all(instance_state(adze.aws, i) in ("shutting-down", "terminated") for i in instances if i)
    assert not _launch_templates(adze) & templates, "launch templates left after the EC2NodeClass went"


def _pool_claims(current: Objects) -> dict[str, dict] | None:
    mine = {name_of(c): c for c in current.values() if pool_of(c) == POOL}
    return mine if len(mine) == REPLICAS and all(initialized(c) for c in mine.values()) else None


def _launch_templates(adze: AdzeCluster) -> set[str]:
    answer = adze.aws.client("ec2").describe_launch_templates(Filters=[
        {"Name": f"tag:{EKS_CLUSTER_NAME_TAG}", "Values": [adze.aws.cluster]},
        {"Name": f"tag:{NODECLASS_TAG}", "Values": ["default"]},
    ])
    return {t["LaunchTemplateName"] for t in answer["LaunchTemplates"]}
