"""Issue 24, 4(a): a Deployment scaled 0 -> 50 -> 5 across two NodePools on the real control plane.

kube-scheduler (never test code) binds every pod to a Node that an Adze-launched instance registered; both
NodePools take part (the pods spread over ``karpenter.sh/nodepool``). After the scale-down, consolidation
removes nodes by evicting their pods through the Eviction API, and the API server's own disruption
controller and eviction handler enforce two PodDisruptionBudgets: ``maxUnavailable: 1`` on the scaled
Deployment and ``minAvailable: 80%`` on a steady one spread the same way. Throughout consolidation a watch
on the pods checks, at every change, that neither budget is ever exceeded, and another on the budgets that
the server's status never shows fewer healthy pods than desired. The audit log shows how pods left: every
pod the reconciler removed went through ``pods/eviction`` (no plain DELETE), and every binding was made by
``system:kube-scheduler``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from support.adze_cluster import AdzeCluster
from support.cluster_watch import Objects, Recorder, wait_for
from support.cp_manifests import deployment, is_ready, nodepool, pod_disruption_budget

from reconciler.model import labels as wk

POOLS = {"pool-c": ("c5",), "pool-m": ("m5",)}
STEADY = 10  # the steady Deployment's replicas; its budget keeps 80 % (8) available
SCALED_BUDGET = 1  # the scaled Deployment's maxUnavailable


def _healthy(pods: Objects, app: str) -> int:
    return sum(
        1 for p in pods.values()
        if p["metadata"].get("labels", {}).get("app") == app and not p["metadata"].get("deletionTimestamp")
        and is_ready(p)
    )


def _running(pods: Objects, app: str, count: int) -> bool:
    mine = [p for p in pods.values() if p["metadata"].get("labels", {}).get("app") == app]
    return len(mine) == count and all(p["spec"].get("nodeName") and is_ready(p) for p in mine)


def _describe(pods: Objects) -> str:
    counts = Counter(
        (p["metadata"].get("labels", {}).get("app"), "bound" if p["spec"].get("nodeName") else "pending",
         "ready" if is_ready(p) else "not-ready")
        for p in pods.values()
    )
    return ", ".join(f"{app}/{bound}/{ready}: {n}" for (app, bound, ready), n in sorted(counts.items()))


def _scale(adze: AdzeCluster, name: str, replicas: int) -> None:
    adze.plane.request(
        "PATCH", f"/apis/apps/v1/namespaces/{adze.namespace}/deployments/{name}/scale",
        {"spec": {"replicas": replicas}}, content_type="application/merge-patch+json",
    )


def test_scale_out_and_in_across_two_nodepools_respects_pod_disruption_budgets(adze: AdzeCluster) -> None:
    plane, namespace = adze.plane, adze.namespace
    pods_path = f"/api/v1/namespaces/{namespace}/pods"
    adze.apply(adze.nodeclass())
    for name, families in POOLS.items():
        adze.apply(nodepool(name, families=families, sizes=("xlarge", "2xlarge")))
    adze.apply(pod_disruption_budget("inflate", "inflate", max_unavailable=SCALED_BUDGET))
    adze.apply(pod_disruption_budget("steady", "steady", min_available="80%"))
    adze.apply(deployment("steady", STEADY, spread_key=wk.NODEPOOL))
    adze.apply(deployment("inflate", 0, spread_key=wk.NODEPOOL))
    reconciler = adze.start_reconciler()

    wait_for(plane, pods_path, lambda pods: _running(pods, "steady", STEADY), timeout=180,
             what=f"{STEADY} steady pods Running", describe=_describe)
    _scale(adze, "inflate", 50)
    pods = wait_for(plane, pods_path, lambda pods: pods if _running(pods, "inflate", 50) else None, timeout=300,
                    what="50 inflate pods bound and Ready", describe=_describe)

    # kube-scheduler bound them, to Nodes of Adze's instances, in both NodePools.
    nodes = {n["metadata"]["name"]: n for n in plane.request("GET", "/api/v1/nodes")["items"]}
    joined = {j.name for j in adze.nodes.joined}
    pools_used = Counter(nodes[p["spec"]["nodeName"]]["metadata"]["labels"].get(wk.NODEPOOL) for p in pods.values())
    assert {p["spec"]["nodeName"] for p in pods.values()} <= joined
    assert set(pools_used) == set(POOLS), pools_used
    binders = _binders(adze, {p["metadata"]["name"] for p in pods.values()})
    assert binders == {"system:kube-scheduler"}, binders

    before = {c["metadata"]["name"] for c in _claims(adze)}

    # From the scale-down on, every pod removal beyond the ReplicaSet's own is the reconciler's: at every
    # change of the pods, the 5 kept inflate pods and the steady ones must stay within their budgets.
    def budgets_kept(pods: Objects) -> str | None:
        scaled, steady = _healthy(pods, "inflate"), _healthy(pods, "steady")
        if scaled < 5 - SCALED_BUDGET or steady < STEADY * 8 // 10:
            return f"healthy inflate={scaled} (min {5 - SCALED_BUDGET}), steady={steady} (min {STEADY * 8 // 10})"
        return None

    def server_status_kept(budgets: Objects) -> str | None:
        for key, pdb in budgets.items():
            status = pdb.get("status") or {}
            if status.get("observedGeneration") and status.get("currentHealthy", 0) < status.get("desiredHealthy", 0):
                return f"{key}: currentHealthy {status['currentHealthy']} < desiredHealthy {status['desiredHealthy']}"
        return None

    pod_watch = Recorder(plane, pods_path, budgets_kept).start()
    pdb_watch = Recorder(plane, f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets", server_status_kept)
    try:
        _scale(adze, "inflate", 5)
        wait_for(plane, pods_path, lambda pods: _running(pods, "inflate", 5) and _running(pods, "steady", STEADY),
                 timeout=120, what="scaled down to 5", describe=_describe)
        pdb_watch.start()  # the server's budget status once the scale-down has settled (not mid-way)
        per_pool = wait_for(
            plane, "/apis/karpenter.sh/v1/nodeclaims", lambda claims: _consolidated(claims), timeout=600,
            what="consolidation down to one node per NodePool",
            describe=lambda claims: ", ".join(
                f"{c['metadata']['name']}{' (deleting)' if c['metadata'].get('deletionTimestamp') else ''}"
                for c in claims.values()),
        )
        wait_for(plane, pods_path, lambda pods: _running(pods, "inflate", 5) and _running(pods, "steady", STEADY),
                 timeout=120, what="every pod back Running", describe=_describe)
    finally:
        pod_watch.stop()
        pdb_watch.stop()
    assert not pod_watch.errors and not pdb_watch.errors, (pod_watch.errors, pdb_watch.errors)
    assert pod_watch.changes > 0 and pdb_watch.changes > 0
    assert not pod_watch.violations, pod_watch.violations[:5]
    assert not pdb_watch.violations, pdb_watch.violations[:5]
    assert set(per_pool) == set(POOLS)
    # The budgets' status is the server's disruption controller's, settled on the final pods.
    budgets = {b["metadata"]["name"]: b["status"] for b in plane.request(
        "GET", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets")["items"]}
    assert (budgets["inflate"]["expectedPods"], budgets["inflate"]["desiredHealthy"]) == (5, 5 - SCALED_BUDGET)
    assert (budgets["steady"]["expectedPods"], budgets["steady"]["desiredHealthy"]) == (STEADY, STEADY * 8 // 10)

    # Consolidation removed nodes that held pods, through the Eviction API only.
    removed = before - {c["metadata"]["name"] for c in _claims(adze)}
    assert removed, "no NodeClaim was consolidated away"
    user = adze.identity.user
    evictions = list(plane.audit_events(lambda e: _user(e).get("username") == user
                                        and _ref(e).get("subresource") == "eviction"))
    accepted = [e for e in evictions if e["responseStatus"]["code"] == 201]
    assert accepted, "consolidation removed nodes without evicting a pod"
    deletes = [e["objectRef"]["name"] for e in plane.audit_events(
        lambda e: _user(e).get("username") == user and e["verb"] == "delete"
        and _ref(e).get("resource") == "pods" and not _ref(e).get("subresource"))]
    assert not deletes, f"pods deleted without the Eviction API: {deletes}"
    refused = Counter(e["responseStatus"]["code"] for e in evictions if e["responseStatus"]["code"] != 201)
    assert set(refused) <= {429}, f"evictions failed other than by a budget: {refused}"
    assert reconciler.alive()


def _claims(adze: AdzeCluster) -> list[dict[str, Any]]:
    return list(adze.plane.request("GET", "/apis/karpenter.sh/v1/nodeclaims")["items"])


def _consolidated(claims: Objects) -> dict[str, int] | None:
    if any(c["metadata"].get("deletionTimestamp") for c in claims.values()):
        return None
    per_pool = Counter(c["metadata"].get("labels", {}).get(wk.NODEPOOL) for c in claims.values())
    return dict(per_pool) if per_pool and all(n == 1 for n in per_pool.values()) and len(per_pool) == 2 else None


def _binders(adze: AdzeCluster, pod_names: set[str]) -> set[str]:
    """Who created each pod's binding (``pods/binding``), from the audit log."""
    events = adze.plane.audit_events(
        lambda e: _ref(e).get("subresource") == "binding" and _ref(e).get("namespace") == adze.namespace
        and _ref(e).get("name") in pod_names and e["responseStatus"]["code"] == 201
    )
    by_pod = {e["objectRef"]["name"]: e["user"]["username"] for e in events}
    assert set(by_pod) == pod_names, f"pods without a recorded binding: {sorted(pod_names - set(by_pod))[:5]}"
    return set(by_pod.values())


def _ref(event: dict[str, Any]) -> dict[str, Any]:
    return event.get("objectRef") or {}


def _user(event: dict[str, Any]) -> dict[str, Any]:
    return event.get("user") or {}
