"""Issue 24, 4(c): expiration on the real control plane.

A NodePool with ``expireAfter: 40s`` runs two pods that each need a node of their own. Each NodeClaim carries
the pool's ``expireAfter``; once it is that old, the reconciler deletes it (the audit log: its DELETE comes no
earlier than creation + 40 s), the termination finalizer drains the node through the Eviction API, and the
evicted pods land, bound by kube-scheduler, on new nodes launched for them: every expired node is replaced.
"""

from __future__ import annotations

from datetime import datetime

from support.adze_cluster import AdzeCluster
from support.cluster_watch import Objects, wait_for
from support.cp_manifests import deployment, nodepool
from support.cp_state import (
    NODECLAIMS,
    binders,
    describe_claims,
    describe_pods,
    initialized,
    name_of,
    object_ref,
    plain_pod_deletes,
    pool_of,
    running,
    username,
)

POOL = "ephemeral"
APP = "batch"
REPLICAS = 2
EXPIRE_AFTER = 40  # seconds


def test_expired_nodes_are_replaced(adze: AdzeCluster) -> None:
    plane = adze.plane
    pods_path = f"/api/v1/namespaces/{adze.namespace}/pods"
    adze.apply(adze.nodeclass())
    adze.apply(nodepool(POOL, sizes=("large",), expire_after=f"{EXPIRE_AFTER}s", consolidation_policy="WhenEmpty",
                        consolidate_after="Never"))
    adze.apply(deployment(APP, REPLICAS, one_per_node=True))
    reconciler = adze.start_reconciler()

    first = wait_for(plane, NODECLAIMS, lambda claims: _generation(claims, set()), timeout=180,
                     what=f"{REPLICAS} initialized NodeClaims", describe=describe_claims)
    assert {c["spec"]["expireAfter"] for c in first.values()} == {f"{EXPIRE_AFTER}s"}
    replacements = wait_for(plane, NODECLAIMS, lambda claims: _generation(claims, set(first)), timeout=300,
                            what="every expired NodeClaim replaced", describe=describe_claims)
    nodes = {c["status"]["nodeName"] for c in replacements.values()}
    pods = wait_for(plane, pods_path, lambda pods: pods if running(pods, APP, REPLICAS, on=nodes) else None,
                    timeout=120, what="the pods Running on the replacements", describe=describe_pods)

    # The reconciler deleted each first NodeClaim, and not before it had lived expireAfter.
    user = adze.identity.user
    deletes = {object_ref(e)["name"]: e for e in plane.audit_events(
        lambda e: e["verb"] == "delete" and object_ref(e).get("resource") == "nodeclaims"
        and object_ref(e).get("name") in first and e["responseStatus"]["code"] == 200)}
    assert set(deletes) == set(first), sorted(deletes)
    for name, event in deletes.items():
        assert username(event) == user
        lived = _time(event["requestReceivedTimestamp"]) - _time(first[name]["metadata"]["creationTimestamp"])
        assert lived.total_seconds() >= EXPIRE_AFTER - 1, f"{name} deleted after {lived}"  # timestamps: 1 s
    expired = {line["NodeClaim"]["name"] for line in reconciler.lines() if line.get("reason") == "Expired"
               and line.get("message", "").startswith("disrupting nodeclaim(s) via delete")}
    assert set(first) <= expired, expired
    assert not plain_pod_deletes(plane, user)
    assert binders(plane, adze.namespace, {name_of(p) for p in pods.values()}) == {"system:kube-scheduler"}


def _generation(claims: Objects, older: set[str]) -> dict[str, dict] | None:
    """The pool's NodeClaims when there are REPLICAS, all initialized and none of ``older``."""
    mine = {name_of(c): c for c in claims.values() if pool_of(c) == POOL}
    if len(mine) != REPLICAS or set(mine) & older or not all(initialized(c) for c in mine.values()):
        return None
    return mine


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
