"""Issue 24, 4(f): ``kill -9`` of the reconciler at seeded write points on the real control plane.

One cluster, one Deployment scaled up and down; each phase arms a crash point in the running reconciler
(``timed_reconciler.py``'s ``ADZE_TEST_CRASH_FILE``: SIGKILL right after its N-th write, N seeded) and changes
the workload. The process dies mid-provisioning or mid-consolidation, its Lease is never released, and the
next process (after the Lease expires) must pick up exactly where it stopped. After every restart the cluster
converges: every NodeClaim initialized, one Node per NodeClaim, the pods Running. At the end, in moto: every
instance ever launched for the cluster carries the name of one NodeClaim that existed (no leaked instance),
no NodeClaim has had two instances (no duplicate), and the running instances are exactly the NodeClaims'.
"""

from __future__ import annotations

import random
import subprocess
from collections import Counter
from typing import Any

from support.adze_cluster import AdzeCluster
from support.cluster_watch import Objects, wait_for
from support.control_plane import scaled
from support.cp_manifests import deployment, nodepool
from support.cp_state import (
    NODECLAIMS,
    NODES,
    deleting,
    describe_claims,
    initialized,
    instance_of,
    live_instances,
    name_of,
    object_ref,
    running,
)
from support.reconciler_process import ReconcilerProcess
from support.timed_reconciler import CRASH_POINT

from reconciler.cloud.aws.tags import NODECLAIM_TAG

SEED = 24
APP = "load"
UP, DOWN = 6, 1  # 500m pods: six need several nodes, one fits the smallest
POOL = "crashy"


def test_kill_9_at_seeded_writes_leaves_no_leaked_or_duplicate_instance(adze: AdzeCluster) -> None:
    rng = random.Random(SEED)
    # Crash points within the writes every phase makes for sure. The second scale-up goes to twice the first:
    # nodes the scale-down has not consolidated yet could hold the first size again without a single write.
    phases = [(UP, rng.randint(1, 8)), (DOWN, rng.randint(1, 6)), (2 * UP, rng.randint(1, 8)),
              (DOWN, rng.randint(1, 6))]
    plane = adze.plane
    adze.apply(adze.nodeclass())
    adze.apply(nodepool(POOL, sizes=("large", "xlarge"), consolidate_after="0s"))
    adze.apply(deployment(APP, 0))
    crash_file = adze.workdir / "crash-at"
    reconciler = _start(adze, 0)
    died = []
    for index, (replicas, writes) in enumerate(phases, start=1):
        crash_file.write_text(str(writes))
        _scale(adze, replicas)
        try:
            code = reconciler.process.wait(scaled(240))  # type: ignore[union-attr]
        except subprocess.TimeoutExpired:
            raise AssertionError(f"phase {index}: the crash point ({writes} writes) was never reached") from None
        crash_file.unlink()
        assert code == -9, f"phase {index}: exit code {code}\n{reconciler.tail()}"
        died.append(next(line["write"] for line in reconciler.lines() if line.get("message") == CRASH_POINT))
        reconciler = _start(adze, index)
        _converged(adze, replicas)
    assert len(died) == len(phases), died

    # Every instance ever launched belongs to one NodeClaim that existed; none had two; none is left over.
    claims_ever = {object_ref(e)["name"] for e in plane.audit_events(
        lambda e: e["verb"] == "create" and object_ref(e).get("resource") == "nodeclaims"
        and e["responseStatus"]["code"] == 201)}
    launched = _instances_ever(adze)
    owners = Counter(tags.get(NODECLAIM_TAG) for tags in launched.values())
    assert None not in owners, f"instances without a NodeClaim: {launched}"
    assert set(owners) <= claims_ever, set(owners) - claims_ever
    assert all(n == 1 for n in owners.values()), f"NodeClaims with two instances: {owners}"
    final = {name_of(c): c for c in plane.request("GET", NODECLAIMS)["items"]}
    assert set(live_instances(adze.aws)) == {instance_of(c) for c in final.values()}, died
    assert reconciler.alive()


def _start(adze: AdzeCluster, index: int) -> ReconcilerProcess:
    return adze.start_reconciler(name=f"reconciler-{index}",
                                 env={"ADZE_TEST_CRASH_FILE": str(adze.workdir / "crash-at")})


def _scale(adze: AdzeCluster, replicas: int) -> None:
    adze.plane.request(
        "PATCH", f"/apis/apps/v1/namespaces/{adze.namespace}/deployments/{APP}/scale",
        {"spec": {"replicas": replicas}}, content_type="application/merge-patch+json")


def _converged(adze: AdzeCluster, replicas: int) -> None:
    """The pods Running, every NodeClaim initialized, and one Node per NodeClaim and per running instance (the
    node stand-in registers a Node for every running instance: a leaked one would show as an extra Node)."""
    plane = adze.plane
    wait_for(plane, f"/api/v1/namespaces/{adze.namespace}/pods", lambda pods: running(pods, APP, replicas),
             timeout=300, what=f"{replicas} pods Running after the restart")

    def settled(claims: Objects) -> bool:
        if not claims or any(deleting(c) or not initialized(c) for c in claims.values()):
            return False
        if replicas == DOWN and len(claims) != 1:  # consolidation is over once one node is left
            return False
        joined = {j.name for j in list(adze.nodes.joined)}
        mine = {n["spec"].get("providerID") for n in plane.request("GET", NODES)["items"]
                if n["metadata"]["name"] in joined}
        return mine == {(c.get("status") or {}).get("providerID") for c in claims.values()}

    wait_for(plane, NODECLAIMS, settled, timeout=300, what="NodeClaims, Nodes and instances in step",
             describe=describe_claims)


def _instances_ever(adze: AdzeCluster) -> dict[str, dict[str, Any]]:
    """Every instance of the cluster in moto, whatever its state: id -> tags."""
    pages = adze.aws.client("ec2").get_paginator("describe_instances").paginate(
        Filters=[{"Name": f"tag:kubernetes.io/cluster/{adze.aws.cluster}", "Values": ["owned"]}])
    return {i["InstanceId"]: {t["Key"]: t["Value"] for t in i.get("Tags") or []}
            for page in pages for r in page["Reservations"] for i in r["Instances"]}
