"""Issue 24, 4(j): ``snapshot``, ``status --watch``, ``explain`` and ``plan`` against the real control plane.

The commands run as processes (``python -m reconciler ...``) with the plane's admin kubeconfig
(``kubernetes-admin`` in ``system:masters``: the snapshot reads every kind it keeps, cluster-wide). The cluster
runs a Deployment behind a PodDisruptionBudget on nodes Adze launched; the budget's status is written by the
real kube-controller-manager's disruption controller, and the snapshot must carry it, the Deployment and the
ReplicaSet the real deployment controller made. ``plan`` of a NodePool change (c5 -> m5) is then compared with
what the live reconciler does once the same change is applied to the cluster: the nodes it replaces, the
instance types and the cost it settles on. The NodePool allows one size, so two pods fit a node whichever
way either side packs them: the comparison is exact (nodes, types, evictions, $/h, delta). Timing is not
compared: the plan models 90 s for a replacement to initialize, a kwok node is Ready in about a second.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml
from support.adze_cluster import AdzeCluster
from support.cluster_watch import Objects, wait_for
from support.control_plane import scaled
from support.cp_manifests import deployment, is_ready, nodepool, pod_disruption_budget

from reconciler.model import labels as wk

POOL = "pool"
SIZES = ("xlarge",)  # one size: two 1.5-CPU pods per node, so the node count is the workload's, not luck's
REPLICAS = 6
CPU = "1500m"
CLAIMS = "/apis/karpenter.sh/v1/nodeclaims"


def _cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "reconciler", *args], capture_output=True, text=True, timeout=scaled(timeout),
        env={**os.environ, "NO_COLOR": "1"}, check=False,
    )
    assert result.returncode == 0, f"{' '.join(args[:2])} exited {result.returncode}: {result.stderr[-2000:]}"
    return result


def _pods_running(adze: AdzeCluster) -> Any:
    def check(pods: Objects) -> Objects | None:
        mine = [p for p in pods.values() if p["metadata"].get("labels", {}).get("app") == "web"
                and not p["metadata"].get("deletionTimestamp")]
        return pods if len(mine) == REPLICAS and all(p["spec"].get("nodeName") and is_ready(p) for p in mine) else None
    return check


def _settled_on(family: str) -> Any:
    """Every NodeClaim of the family, initialized and not deleting, and no other (the change is done)."""
    def check(claims: Objects) -> Objects | None:
        if not claims or any(c["metadata"].get("deletionTimestamp") for c in claims.values()):
            return None
        types = [c["metadata"].get("labels", {}).get(wk.INSTANCE_TYPE, "") for c in claims.values()]
        initialized = all(any(k.get("type") == "Initialized" and k.get("status") == "True"
                              for k in (c.get("status") or {}).get("conditions") or []) for c in claims.values())
        return claims if initialized and all(t.startswith(f"{family}.") for t in types) else None
    return check


def _claims_summary(claims: Objects) -> str:
    return ", ".join(
        f"{c['metadata']['name']}={c['metadata'].get('labels', {}).get(wk.INSTANCE_TYPE)}"
        f"{' (deleting)' if c['metadata'].get('deletionTimestamp') else ''}" for c in claims.values())


def _budget_observed(adze: AdzeCluster) -> dict[str, Any]:
    """The server's PDB once its disruption controller has counted the running Deployment."""
    def check(budgets: Objects) -> dict[str, Any] | None:
        pdb = next(iter(budgets.values()), None)
        status = (pdb or {}).get("status") or {}
        done = (pdb and status.get("observedGeneration") == pdb["metadata"]["generation"]
                and status.get("expectedPods") == REPLICAS and status.get("currentHealthy") == REPLICAS)
        return pdb if done else None
    budget: dict[str, Any] = wait_for(
        adze.plane, f"/apis/policy/v1/namespaces/{adze.namespace}/poddisruptionbudgets", check, timeout=120,
        what="the disruption controller's status on the PDB", describe=lambda b: json.dumps(
            [x.get("status") for x in b.values()]))
    return budget


def _live_nodes(adze: AdzeCluster) -> list[dict[str, Any]]:
    joined = {j.name for j in adze.nodes.joined}
    return [n for n in adze.plane.request("GET", "/api/v1/nodes")["items"] if n["metadata"]["name"] in joined]


def test_snapshot_status_explain_and_plan_agree_with_the_live_cluster(adze: AdzeCluster, tmp_path: Path) -> None:
    plane, namespace = adze.plane, adze.namespace
    assert plane.admin is not None
    kubeconfig = str(plane.admin.kubeconfig)
    adze.apply(adze.nodeclass())
    adze.apply(nodepool(POOL, families=("c5",), sizes=SIZES))
    adze.apply(pod_disruption_budget("web", "web", max_unavailable=1))
    adze.apply(deployment("web", REPLICAS, cpu=CPU))
    reconciler = adze.start_reconciler()
    wait_for(plane, f"/api/v1/namespaces/{namespace}/pods", _pods_running(adze), timeout=300,
             what=f"{REPLICAS} web pods Running")
    wait_for(plane, CLAIMS, _settled_on("c5"), timeout=300, what="c5 NodeClaims initialized",
             describe=_claims_summary)
    budget = _budget_observed(adze)

    # -- snapshot: the cluster's workload controllers and the budget with the server's own status ----------
    snapshot_path = tmp_path / "snapshot.json"
    _cli("snapshot", "--kubeconfig", kubeconfig, "-o", str(snapshot_path))
    document = json.loads(snapshot_path.read_text())
    objects = [o for o in document["objects"] if o["metadata"].get("namespace") in (None, namespace)]
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for manifest in objects:
        by_kind.setdefault(manifest["kind"], []).append(manifest)
    [snap_deployment] = by_kind["Deployment"]
    [snap_replicaset] = by_kind["ReplicaSet"]
    [snap_budget] = by_kind["PodDisruptionBudget"]
    server_replicasets = plane.request("GET", f"/apis/apps/v1/namespaces/{namespace}/replicasets")["items"]
    assert [r["metadata"]["name"] for r in server_replicasets] == [snap_replicaset["metadata"]["name"]]
    assert snap_deployment["spec"]["replicas"] == REPLICAS
    owner = snap_replicaset["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner.get("controller")) == ("Deployment", "web", True)
    snap_pods = [p for p in by_kind["Pod"] if p["metadata"].get("labels", {}).get("app") == "web"]
    assert len(snap_pods) == REPLICAS
    assert {p["metadata"]["ownerReferences"][0]["name"] for p in snap_pods} == {snap_replicaset["metadata"]["name"]}
    for key in ("expectedPods", "desiredHealthy", "currentHealthy", "disruptionsAllowed", "observedGeneration"):
        assert snap_budget["status"][key] == budget["status"][key], (key, snap_budget["status"], budget["status"])
    assert (snap_budget["status"]["desiredHealthy"], snap_budget["status"]["disruptionsAllowed"]) == (REPLICAS - 1, 1)
    nodes = _live_nodes(adze)
    snap_nodes = {n["metadata"]["name"] for n in by_kind["Node"]}
    assert {n["metadata"]["name"] for n in nodes} <= snap_nodes
    assert len(by_kind["NodeClaim"]) == len(nodes)

    # -- status --watch, one refresh of the live cluster: every node, with its type -----------------------
    watched = _cli("status", "--watch", "--count", "1", "--interval", "1", "--color", "never",
                   "--kubeconfig", kubeconfig, timeout=120).stdout
    assert "reading the cluster failed" not in watched, watched
    for node in nodes:
        assert node["metadata"]["name"] in watched, watched
        assert node["metadata"]["labels"][wk.INSTANCE_TYPE] in watched, watched

    # -- explain: a pod of the Deployment, from the snapshot, is where kube-scheduler put it ---------------
    pod = snap_pods[0]
    explained = json.loads(_cli("explain", "pod", f"{namespace}/{pod['metadata']['name']}", "--snapshot",
                                str(snapshot_path), "--json").stdout)
    assert pod["spec"]["nodeName"] in json.dumps(explained), explained

    # -- plan: c5 -> m5, predicted from the snapshot ----------------------------------------------------
    proposal = tmp_path / "nodepools.yaml"
    proposal.write_text(yaml.safe_dump(nodepool(POOL, families=("m5",), sizes=SIZES)))
    plan = json.loads(_cli("plan", "--snapshot", str(snapshot_path), "--nodepools", str(proposal),
                           "--json").stdout)
    assert plan["current"]["nodes"] == len(nodes), plan["current"]
    assert not plan["proposed"]["horizonReached"] and not plan["unschedulable"]["new"], plan["unschedulable"]
    predicted_mix = Counter({row["instanceType"]: row["count"] for row in plan["proposed"]["nodeMix"]})
    assert predicted_mix and all(t.startswith("m5.") for t in predicted_mix), predicted_mix
    drifted = {d.get("node") or d.get("name") for d in plan["drift"]}
    assert drifted == {n["metadata"]["name"] for n in nodes}, plan["drift"]

    # -- the same change, live: the reconciler replaces the nodes; compare --------------------------------
    live_before = json.loads(_cli("status", "--json", "--kubeconfig", kubeconfig, "--nodepool", POOL).stdout)
    assert live_before["costPerHour"] == plan["current"]["costPerHour"], (live_before, plan["current"])
    before = {c["metadata"]["name"] for c in adze.plane.request("GET", CLAIMS)["items"]}
    started = time.monotonic()
    adze.apply(nodepool(POOL, families=("m5",), sizes=SIZES))
    claims = wait_for(plane, CLAIMS, _settled_on("m5"), timeout=600, what="every NodeClaim replaced by m5",
                      describe=_claims_summary)
    wait_for(plane, f"/api/v1/namespaces/{namespace}/pods", _pods_running(adze), timeout=300,
             what=f"{REPLICAS} web pods Running on the new nodes")
    live_seconds = time.monotonic() - started
    # The nodes it replaced are the ones the plan drifts, and it evicted as many pods (refusals aside).
    assert before.isdisjoint(claims), _claims_summary(claims)
    assert before == {d["nodeclaim"] for d in plan["drift"]}, plan["drift"]
    user = adze.identity.user
    evictions = Counter(e["responseStatus"]["code"] for e in plane.audit_events(
        lambda e: (e.get("user") or {}).get("username") == user
        and (e.get("objectRef") or {}).get("subresource") == "eviction"))
    assert evictions[201] == plan["churn"]["podsEvicted"] == REPLICAS, (evictions, plan["churn"])
    assert set(evictions) <= {201, 429}, evictions
    live_mix = Counter(c["metadata"]["labels"][wk.INSTANCE_TYPE] for c in claims.values())
    # One node size, two pods per node: the live reconciler must land on exactly the plan's mix.
    assert live_mix == predicted_mix, (live_mix, predicted_mix)
    live_status = json.loads(_cli("status", "--json", "--kubeconfig", kubeconfig, "--nodepool", POOL).stdout)
    assert live_status["costPerHour"] == plan["proposed"]["costPerHour"], (live_status, plan["proposed"])
    assert round(live_status["costPerHour"] - live_before["costPerHour"], 6) == plan["proposed"]["deltaPerHour"]
    # Timing is not compared: the plan's drain clock is modelled, the live one runs on a loaded machine.
    print(f"plan: {plan['churn']['nodesReplaced']} replaced, {dict(predicted_mix)}, "
          f"${plan['current']['costPerHour']}/h -> ${plan['proposed']['costPerHour']}/h in "
          f"{plan['proposed']['durationSeconds']}s; live: {len(before)} replaced, {dict(live_mix)}, "
          f"${live_status['costPerHour']}/h in {live_seconds:.0f}s wall, evictions {dict(evictions)}")
    assert reconciler.alive()
