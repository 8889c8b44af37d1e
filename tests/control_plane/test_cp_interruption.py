"""Issue 24, 4(d): a spot interruption from the SQS queue on moto, on the real control plane.

A spot NodePool runs two pods on one node; the reconciler consumes the cluster's interruption queue
(``INTERRUPTION_QUEUE``). An EventBridge-shaped "EC2 Spot Instance Interruption Warning" for the node's
instance arrives on the queue: the node is cordoned (the ``karpenter.sh/disrupted:NoSchedule`` taint) before
its first pod is evicted, a replacement NodeClaim is created before the first eviction (the drain waits for the
provisioner's pass over the deleting claim, so one replacement is planned for all its pods), the pods
are evicted through the Eviction API and bound by kube-scheduler to the replacement, the instance ends
terminated in moto, the message is deleted from the queue and a ``SpotInterrupted`` Event is recorded.

The order is read from etcd's revisions: every object's resourceVersion on this one-etcd control plane is the
cluster-wide revision of its write, so the versions at which the watches first saw each step order them.
"""

from __future__ import annotations

from typing import Any

from support.adze_cluster import AdzeCluster
from support.cluster_watch import Objects, Recorder, wait_for
from support.cp_manifests import deployment, nodepool
from support.cp_state import (
    NODECLAIMS,
    NODES,
    app_pods,
    binders,
    condition_true,
    deleting,
    describe_claims,
    describe_pods,
    initialized,
    instance_of,
    instance_state,
    name_of,
    plain_pod_deletes,
    running,
    tainted_disrupted,
)
from support.interruption_events import spot_warning

POOL = "spot"
APP = "worker"
REPLICAS = 2


def test_spot_interruption_cordons_drains_and_replaces_before_the_instance_goes(adze: AdzeCluster) -> None:
    plane = adze.plane
    pods_path = f"/api/v1/namespaces/{adze.namespace}/pods"
    sqs = adze.aws.client("sqs")
    queue = f"{adze.aws.cluster}-interruption"
    url = sqs.create_queue(QueueName=queue)["QueueUrl"]
    adze.apply(adze.nodeclass())
    adze.apply(nodepool(POOL, capacity_types=("spot",), sizes=("xlarge",), consolidation_policy="WhenEmpty",
                        consolidate_after="Never"))
    adze.apply(deployment(APP, REPLICAS))
    reconciler = adze.start_reconciler(env={"INTERRUPTION_QUEUE": queue})

    claims = wait_for(plane, NODECLAIMS, lambda claims: claims if len(claims) == 1 and all(
        initialized(c) for c in claims.values()) else None, timeout=180, what="one initialized NodeClaim",
        describe=describe_claims)
    claim = next(iter(claims.values()))
    old_claim, old_node, instance_id = name_of(claim), claim["status"]["nodeName"], instance_of(claim)
    assert instance_id and claim["metadata"]["labels"]["karpenter.sh/capacity-type"] == "spot"
    wait_for(plane, pods_path, lambda pods: running(pods, APP, REPLICAS, on={old_node}), timeout=120,
             what="the pods Running on the spot node", describe=describe_pods)

    seen: dict[str, int] = {}  # step -> the first revision it was seen at

    def first(step: str, obj: dict[str, Any]) -> None:
        revision = int(obj["metadata"]["resourceVersion"])
        seen[step] = min(seen.get(step, revision), revision)

    def on_claims(current: Objects) -> None:
        for c in current.values():
            if name_of(c) == old_claim and condition_true(c, "InstanceTerminating"):
                first("instance terminating", c)
            elif name_of(c) != old_claim:
                first("replacement created", c)
                if (c.get("status") or {}).get("providerID"):
                    first("replacement launched", c)

    def on_nodes(current: Objects) -> None:
        node = next((n for n in current.values() if name_of(n) == old_node), None)
        if node is not None and tainted_disrupted(node):
            first("cordoned", node)

    def on_pods(current: Objects) -> None:
        for pod in app_pods(current, APP):
            if pod["spec"].get("nodeName") == old_node and deleting(pod):
                first("first eviction", pod)

    recorders = [Recorder(plane, path, lambda objects, see=see: see(objects)) for path, see in (
        (NODECLAIMS, on_claims), (NODES, on_nodes), (pods_path, on_pods))]
    for recorder in recorders:
        recorder.start()
    try:
        sqs.send_message(QueueUrl=url, MessageBody=spot_warning(instance_id, adze.aws.region, adze.aws.account_id))
        replaced = wait_for(plane, NODECLAIMS, lambda claims: claims if len(claims) == 1 and old_claim not in {
            name_of(c) for c in claims.values()} and all(initialized(c) for c in claims.values()) else None,
            timeout=240, what="the interrupted NodeClaim replaced", describe=describe_claims)
        new_node = next(iter(replaced.values()))["status"]["nodeName"]
        pods = wait_for(plane, pods_path, lambda pods: pods if running(pods, APP, REPLICAS, on={new_node}) else None,
                        timeout=120, what="the pods Running on the replacement", describe=describe_pods)
    finally:
        for recorder in recorders:
            recorder.stop()
    assert all(not r.errors for r in recorders), [r.errors for r in recorders]
    assert set(seen) == {"cordoned", "first eviction", "replacement created", "replacement launched",
                         "instance terminating"}, seen
    assert seen["cordoned"] < seen["first eviction"], seen
    # Created, not launched: as in Karpenter, the drain and the instance's termination do not wait for the
    # replacement's CreateFleet, and under load moto's launch once came one revision after the termination.
    assert seen["replacement created"] < seen["first eviction"], seen

    assert instance_state(adze.aws, instance_id) in ("shutting-down", "terminated")
    assert not plain_pod_deletes(plane, adze.identity.user)
    assert binders(plane, adze.namespace, {name_of(p) for p in pods.values()}) == {"system:kube-scheduler"}
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    assert attributes["Attributes"]["ApproximateNumberOfMessages"] == "0"
    events = plane.request("GET", "/api/v1/namespaces/default/events")["items"]
    assert any(e["reason"] == "SpotInterrupted" and e["involvedObject"]["name"] in (old_claim, old_node)
               for e in events), sorted({e["reason"] for e in events})
    assert reconciler.alive()
