"""Gentle on the API server (issue 16, item 6): the live controllers read through their informer cache.

The reconciler runs over HTTP against the fake API server (which records every request). Once its informers
have listed, terminating a NodeClaim (drained across a PodDisruptionBudget, stepped many times) and the
garbage collector's passes must not LIST anything: pods, budgets, nodes, NodeClaims and VolumeAttachments
come from the cache, as in Karpenter.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from ctrl_harness import Rig, running, wait_for
from ctrl_objects import deployment, nodeclass, nodepool

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support.fake_apiserver import FakeApiServer, RecordedRequest
from support.fault_proxy import FaultProxy, summary

from reconciler.kube.api import NODE, NODECLAIM, POD
from reconciler.kube.live import LiveKube

pytestmark = pytest.mark.slow  # the live reconciler over HTTP against the fake API server


def lists(server: FakeApiServer, requests: list[RecordedRequest]) -> list[str]:
    """The collection reads (not watches) among ``requests``: method and path."""
    found = []
    for request in requests:
        if request.method != "GET" or request.query.get("watch") in ("true", "1"):
            continue
        target = server._resolve(request.path)
        if target is not None and target.name is None:
            found.append(f"GET {request.path}")
    return found


async def test_termination_and_garbage_collection_read_the_cache_not_the_api() -> None:
    rig = Rig()
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
              "metadata": {"name": "inflate", "namespace": "default"},
              "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "inflate"}}}}
    await rig.apply(nodeclass(), nodepool(consolidate_after="Never"), deployment(replicas=3), budget)
    async with (
        FakeApiServer(kube=rig.kube, bookmark_interval=0.05) as server,
        LiveKube.for_url(server.url, watch_timeout=30) as live,
        running(rig, kube=live, disruption=False),
    ):
        assert await wait_for(lambda: rig.converged(instances=1))
        [claim] = rig.kube.objects(NODECLAIM)
        old = claim["metadata"]["name"]
        mark = len(server.requests)
        await rig.kube.delete(NODECLAIM, old)

        async def replaced() -> bool:
            claims = [c["metadata"]["name"] for c in rig.kube.objects(NODECLAIM)]
            pods = rig.kube.objects(POD)
            return old not in claims and len(pods) == 3 and all(p["spec"].get("nodeName") for p in pods)

        assert await wait_for(replaced, timeout=90)
        during = server.requests[mark:]
    evictions = [r for r in during if r.path.endswith("/eviction")]
    assert len(evictions) >= 3, "the drain went through the Eviction API, one pod at a time (minAvailable 2 of 3)"
    assert lists(server, during) == []
    assert len(rig.kube.objects(NODE)) == 1


async def test_a_scale_up_reads_through_the_cache_not_with_gets() -> None:
    """Issue 24: about 30 % of a scale-up's requests were direct GETs (393 NodeClaim, 154 Node, 113 NodePool,
    90 EC2NodeClass). Karpenter reads these through its informer cache: here every request of a 40-pod scale
    up (several nodes launched, registered, initialized) is counted through a proxy by verb and resource; GETs
    of single objects stay a small share, only the re-reads after a conflict (a stale cached copy)."""
    rig = Rig()
    await rig.apply(nodeclass(), nodepool(consolidate_after="Never"), deployment(replicas=40, cpu="1"))
    async with (
        FakeApiServer(kube=rig.kube, bookmark_interval=0.05) as server,
        FaultProxy(server.url) as proxy,
        LiveKube.for_url(proxy.url, watch_timeout=30) as live,
        running(rig, kube=live, disruption=False),
    ):
        assert await wait_for(lambda: rig.converged(), timeout=60)
        pods = rig.kube.objects(POD)
        assert len(pods) == 40 and all(p["spec"].get("nodeName") for p in pods)
    counts = proxy.counts()
    totals = summary(counts)
    gets = {resource: n for (verb, resource), n in counts.items() if verb == "get"}
    writes = sum(totals[v] for v in ("create", "update", "patch", "delete"))
    report = f"{sum(counts.values())} requests: {totals}; GETs {gets}"
    print(report)
    assert len(rig.kube.objects(NODECLAIM)) >= 3, report
    # Before: 76 GETs of 225 requests (34 %: 26 NodeClaim, 22 EC2NodeClass, 16 NodePool, 12 Node); now a few.
    assert sum(gets.values()) <= 0.10 * sum(counts.values()), report
    for resource in ("nodeclaims", "nodes", "nodepools", "ec2nodeclasses"):
        assert gets.get(resource, 0) <= max(5, writes // 10), f"{resource}: {report}"
