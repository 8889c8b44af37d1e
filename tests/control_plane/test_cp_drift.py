"""Issue 24, 4(b): drift on the real control plane, after a NodePool template change and after an EC2NodeClass
change.

Three pods that each need a node of their own (a required anti-affinity on the host name, a PDB with
``maxUnavailable: 1``) run on three nodes of a NodePool whose disruption budget is ``nodes: "1"`` and whose
consolidation is off. A template label is then added to the NodePool: every node drifts and is replaced, one
at a time, each replacement launched and initialized before the node it replaces is deleted (so the evicted
pod has somewhere to go at once), and kube-scheduler binds the evicted pods to the new nodes, which carry the
new label. Then a tag is added to the EC2NodeClass: the same again, the new instances carrying the tag in
moto. Watches on the NodeClaims, Nodes and pods check at every change that (1) no node is deleted before a
replacement is initialized for it, (2) at most one node of the pool is disrupting at a time (the budget),
(3) the PDB is never exceeded; the audit log shows the pods left through the Eviction API and were bound by
``system:kube-scheduler``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from support.adze_cluster import AdzeCluster
from support.cluster_watch import Objects, Recorder, wait_for
from support.cp_manifests import deployment, nodepool, pod_disruption_budget
from support.cp_state import (
    NODECLAIMS,
    NODES,
    accepted_evictions,
    binders,
    deleting,
    describe_claims,
    describe_pods,
    healthy,
    initialized,
    live_instances,
    name_of,
    plain_pod_deletes,
    pool_of,
    running,
    tainted_disrupted,
)

POOL = "rollout"
APP = "web"
REPLICAS = 3


def test_drift_replaces_nodes_new_before_old_within_the_budget(adze: AdzeCluster) -> None:
    plane = adze.plane
    pods_path = f"/api/v1/namespaces/{adze.namespace}/pods"
    adze.apply(adze.nodeclass())
    adze.apply(nodepool(POOL, sizes=("large",), budgets=({"nodes": "1"},), consolidation_policy="WhenEmpty",
                        consolidate_after="Never"))
    adze.apply(pod_disruption_budget(APP, APP, max_unavailable=1))
    adze.apply(deployment(APP, REPLICAS, one_per_node=True))
    reconciler = adze.start_reconciler()
    wait_for(plane, pods_path, lambda pods: running(pods, APP, REPLICAS), timeout=180,
             what=f"{REPLICAS} pods Running on their own nodes", describe=describe_pods)

    # A NodePool template change: a label the nodes must carry.
    pool_path = f"/apis/karpenter.sh/v1/nodepools/{POOL}"
    new_claims = _drift_round(adze, lambda: plane.request(
        "PATCH", pool_path, {"spec": {"template": {"metadata": {"labels": {"rollout": "2"}}}}},
        content_type="application/merge-patch+json"))
    nodes = {name_of(n): n for n in plane.request("GET", NODES)["items"]}
    for claim in new_claims.values():
        assert nodes[claim["status"]["nodeName"]]["metadata"]["labels"].get("rollout") == "2"

    # An EC2NodeClass change: a tag the instances must carry.
    new_claims = _drift_round(adze, lambda: plane.request(
        "PATCH", "/apis/karpenter.k8s.aws/v1/ec2nodeclasses/default", {"spec": {"tags": {"rollout": "2"}}},
        content_type="application/merge-patch+json"))
    instances = live_instances(adze.aws)
    for claim in new_claims.values():
        instance = instances[claim["status"]["providerID"].rsplit("/", 1)[1]]
        assert {"Key": "rollout", "Value": "2"} in instance["Tags"], instance["Tags"]

    # Every node left through drift, one command per node, each a replacement; pods through the Eviction API.
    drifts = [line for line in reconciler.lines()
              if line.get("message", "").startswith("disrupting nodeclaim(s)") and line.get("reason") == "Drifted"]
    assert len(drifts) == 2 * REPLICAS, [d["message"] for d in drifts]
    assert all(d["disrupted-node-count"] == 1 and d["replacement-node-count"] == 1 for d in drifts), drifts
    user = adze.identity.user
    assert not plain_pod_deletes(plane, user)
    assert len(accepted_evictions(plane, user)) >= 2 * REPLICAS
    final = {name_of(p) for p in plane.request("GET", pods_path)["items"]}
    assert binders(plane, adze.namespace, final) == {"system:kube-scheduler"}
    assert reconciler.alive()


def _drift_round(adze: AdzeCluster, change: Callable[[], Any]) -> dict[str, dict[str, Any]]:
    """Make ``change``; every node of the pool is replaced by drift under the invariants. The new NodeClaims."""
    plane = adze.plane
    pods_path = f"/api/v1/namespaces/{adze.namespace}/pods"
    before = set(wait_for(plane, NODECLAIMS, lambda current: _replaced(current, set()), timeout=120,
                          what=f"{REPLICAS} initialized NodeClaims", describe=describe_claims))

    def replaced_first(current: Objects) -> str | None:
        by_name = {name_of(c): c for c in current.values()}
        leaving = sorted(n for n in before if n not in by_name or deleting(by_name[n]))
        ready = sorted(n for n, c in by_name.items() if n not in before and initialized(c))
        if len(leaving) > len(ready):
            return f"nodes deleted before their replacements were initialized: leaving {leaving}, ready {ready}"
        return None

    def within_budget(nodes: Objects) -> str | None:
        disrupting = sorted(name_of(n) for n in nodes.values()
                            if pool_of(n) == POOL and (tainted_disrupted(n) or deleting(n)))
        return f"more than one node disrupting at once: {disrupting}" if len(disrupting) > 1 else None

    def pdb_kept(pods: Objects) -> str | None:
        count = healthy(pods, APP)
        return f"only {count} healthy pods (maxUnavailable 1)" if count < REPLICAS - 1 else None

    recorders = [Recorder(plane, NODECLAIMS, replaced_first).start(), Recorder(plane, NODES, within_budget).start(),
                 Recorder(plane, pods_path, pdb_kept).start()]
    try:
        change()
        new = wait_for(
            plane, NODECLAIMS,
            lambda current: _replaced(current, before), timeout=420,
            what=f"the {REPLICAS} drifted nodes replaced", describe=describe_claims,
        )
        new_nodes = {c["status"]["nodeName"] for c in new.values()}
        wait_for(plane, pods_path, lambda pods: running(pods, APP, REPLICAS, on=new_nodes), timeout=120,
                 what="the pods Running on the new nodes", describe=describe_pods)
    finally:
        for recorder in recorders:
            recorder.stop()
    for recorder in recorders:
        assert not recorder.errors, recorder.errors
        assert recorder.changes > 0
        assert not recorder.violations, recorder.violations[:5]
    return new


def _replaced(current: Objects, before: set[str]) -> dict[str, dict[str, Any]] | None:
    mine = {name_of(c): c for c in current.values() if pool_of(c) == POOL}
    if set(mine) & before or len(mine) != REPLICAS or not all(initialized(c) for c in mine.values()):
        return None
    return mine
