"""``plan``'s evictions per workload (``insight/plan/impact.py``): attributed to the Deployment behind the pods'
ReplicaSet, counted as pods (of those running at the start) and as evictions, paced by the PDBs selecting them."""

from __future__ import annotations

from typing import Any

from reconciler.insight.plan.impact import describe_workload, evictions_by_workload, replicaset_owners, workload_of

REPLICASET = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
              "metadata": {"name": "web-7d4b9c", "namespace": "shop",
                           "ownerReferences": [{"kind": "Deployment", "name": "web", "controller": True}]}}
PDB = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web-pdb", "namespace": "shop"},
       "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}}


def pod(name: str, owner: str = "web-7d4b9c", kind: str = "ReplicaSet", app: str = "web") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "shop", "labels": {"app": app},
                         "ownerReferences": [{"kind": kind, "name": owner, "controller": True}]}}


def evicted(key: str, owner: str | None = "ReplicaSet/web-7d4b9c") -> dict[str, Any]:
    event = {"object": f"Pod/{key}", "reason": "Evicted", "message": "evicted"}
    if owner:
        event["owner"] = owner
    return event


def test_evictions_are_attributed_to_the_deployment_and_counted_as_pods_and_as_evictions() -> None:
    """Three pods running at the start; two are evicted, and one replacement made during the plan (web-7) is
    evicted again: 2 of 3 pods evicted, 3 evictions. The replacement is gone at the end, so only its event's
    owner says whose it was."""
    records = [
        {"events": [evicted("shop/web-0"), {"object": "NodeClaim/n1", "reason": "TerminationBlocked",
                                            "message": "shop/web-1: PDB shop/web-pdb allows 0 disruptions"}]},
        {"events": [evicted("shop/web-1"), evicted("shop/web-7")]},
    ]
    pods = {f"shop/web-{i}": pod(f"web-{i}") for i in range(3)}
    [entry] = evictions_by_workload(records, pods, [PDB], started=pods, owners=replicaset_owners([REPLICASET]),
                                    replicas={("shop", "Deployment/web"): 3}, allowed={"shop/web-pdb": 1})
    assert entry == {"namespace": "shop", "workload": "Deployment/web", "evicted": 2, "evictions": 3, "replicas": 3,
                     "pdbs": [{"name": "web-pdb", "rule": "maxUnavailable 1", "disruptionsAllowed": 1,
                               "heldUp": True}]}
    assert describe_workload(entry) == (
        "shop/Deployment/web: 2 of 3 pod(s) evicted (3 evictions: pods made during the change were moved again); "
        "paced by PDB web-pdb (maxUnavailable 1, allows 1 at a time), which held it up")


def test_a_pdb_that_never_refused_did_not_hold_anything_up_and_other_workloads_are_apart() -> None:
    records = [{"events": [evicted("shop/web-0"), evicted("shop/db-0", "StatefulSet/db"),
                           evicted("shop/debug", None)]}]
    pods = {"shop/web-0": pod("web-0"), "shop/db-0": pod("db-0", "db", "StatefulSet", "db"),
            "shop/debug": {"metadata": {"name": "debug", "namespace": "shop", "labels": {"app": "web"}}}}
    found = {e["workload"]: e for e in evictions_by_workload(records, pods, [PDB], started=pods,
                                                             owners=replicaset_owners([REPLICASET]))}
    assert set(found) == {"Deployment/web", "StatefulSet/db", "Pod/debug"}
    assert found["Deployment/web"]["pdbs"][0]["heldUp"] is False
    assert found["StatefulSet/db"]["pdbs"] == []
    assert [p["name"] for p in found["Pod/debug"]["pdbs"]] == ["web-pdb"]  # its labels are selected too


def test_a_dump_without_its_replicasets_still_names_the_deployment_by_the_template_hash() -> None:
    manifest = pod("web-7d4b9c-x2z9q")
    manifest["metadata"]["labels"]["pod-template-hash"] = "7d4b9c"
    assert workload_of(manifest, "shop/web-7d4b9c-x2z9q") == "Deployment/web"
    assert workload_of(None, "shop/web-3") == "Pod/web"  # gone and unknown: the name without its replica suffix
