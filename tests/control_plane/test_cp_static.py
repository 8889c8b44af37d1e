"""Issue 26: a static NodePool (``replicas: 3``, ``FEATURE_GATES=StaticCapacity=true``) on the real control plane.

The reconciler keeps exactly three nodes of the static pool, with no pod asking for them; they are empty, yet
never consolidated: a dynamic pool beside it, whose only pod is then scaled away, has its empty node
consolidated (the positive control: consolidation ran over empty nodes while the static ones stayed).
``kubectl scale nodepool`` (the CRD's scale subresource) to 4 adds one node, to 2 removes two. A watch on
the NodeClaims checks at every change that the static pool never has more live NodeClaims than asked and
that none is deleted before the scale-down.
"""

from __future__ import annotations

from support.adze_cluster import AdzeCluster
from support.cluster_watch import Objects, Recorder, wait_for
from support.cp_manifests import deployment, nodepool
from support.cp_state import NODECLAIMS, deleting, describe_claims, initialized, name_of, pool_of, running

from reconciler.model import labels as wk

STATIC, DYNAMIC = "static", "dynamic"


def test_a_static_nodepool_runs_exactly_its_replicas_follows_scale_and_is_never_consolidated(
    adze: AdzeCluster,
) -> None:
    plane = adze.plane
    adze.apply(adze.nodeclass())
    static = nodepool(STATIC, sizes=("large",))
    static["spec"]["replicas"] = 3
    adze.apply(static)
    adze.apply(nodepool(DYNAMIC, sizes=("large",), consolidate_after="0s"))
    adze.apply(deployment("probe", 1, node_selector={wk.NODEPOOL: DYNAMIC}))
    reconciler = adze.start_reconciler(env={"FEATURE_GATES": "StaticCapacity=true"})

    ceiling = {"replicas": 3, "deletions allowed": False}

    def kept(claims: Objects) -> str | None:
        mine = [c for c in claims.values() if pool_of(c) == STATIC]
        live = [name_of(c) for c in mine if not deleting(c)]
        if len(live) > ceiling["replicas"]:
            return f"{len(live)} live static NodeClaims, asked {ceiling['replicas']}: {live}"
        if not ceiling["deletions allowed"] and any(deleting(c) for c in mine):
            return f"a static NodeClaim deleted: {[name_of(c) for c in mine if deleting(c)]}"
        return None

    watch = Recorder(plane, NODECLAIMS, kept).start()
    try:
        first = _static_claims(adze, 3)
        wait_for(plane, f"/api/v1/namespaces/{adze.namespace}/pods", lambda pods: running(pods, "probe", 1),
                 timeout=180, what="the probe pod Running on the dynamic pool")

        # The dynamic node is emptied and consolidated; the (empty) static ones stay.
        plane.request("PATCH", f"/apis/apps/v1/namespaces/{adze.namespace}/deployments/probe/scale",
                      {"spec": {"replicas": 0}}, content_type="application/merge-patch+json")
        wait_for(plane, NODECLAIMS, lambda claims: not any(pool_of(c) == DYNAMIC for c in claims.values()),
                 timeout=180, what="the empty dynamic node consolidated", describe=describe_claims)
        assert set(_static_claims(adze, 3)) == set(first)

        ceiling["replicas"] = 4
        plane.kubectl("scale", "nodepool", STATIC, "--replicas=4")
        grown = _static_claims(adze, 4)
        assert set(first) < set(grown)

        ceiling["deletions allowed"] = True
        plane.kubectl("scale", "nodepool", STATIC, "--replicas=2")
        shrunk = _static_claims(adze, 2)
        assert set(shrunk) < set(grown)
    finally:
        watch.stop()
    assert not watch.errors, watch.errors
    assert watch.changes > 0
    assert not watch.violations, watch.violations[:5]
    pool = plane.request("GET", f"/apis/karpenter.sh/v1/nodepools/{STATIC}")
    assert pool["spec"]["replicas"] == 2
    assert not any(line.get("message", "").startswith("disrupting nodeclaim(s)") and any(
        name in line.get("message", "") for name in grown) for line in reconciler.lines())
    assert reconciler.alive()


def _static_claims(adze: AdzeCluster, count: int) -> dict[str, dict]:
    """Wait until the static pool has exactly ``count`` NodeClaims, all initialized and none deleting."""
    def exactly(claims: Objects) -> dict[str, dict] | None:
        mine = {name_of(c): c for c in claims.values() if pool_of(c) == STATIC}
        return mine if len(mine) == count and all(initialized(c) for c in mine.values()) else None

    return wait_for(adze.plane, NODECLAIMS, exactly, timeout=240, what=f"{count} static NodeClaims initialized",
                    describe=describe_claims)
