"""Taking over a cluster Karpenter runs (docs/deploying.md, "Adopting a running Karpenter cluster in place").

Karpenter holds its Lease and has launched a node whose NodeClaim carries Karpenter's hash stamps (``v3``
NodePool hash, ``v4`` EC2NodeClass hash). Adze, started with its defaults, campaigns for the same Lease and
so waits without touching anything; when Karpenter steps down (releases the Lease), Adze leads, re-stamps
the adopted NodeClaim with its own hashes, and a later change of the NodePool template drifts and replaces
that node, as it would one Adze launched.
"""

from __future__ import annotations

import asyncio

from ctrl_harness import wait_for
from e2e_rig import E2E, e2e, e2e_lease

from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.controllers.operator.app import DEFAULT_LEASE_NAME
from reconciler.kube.api import LEASE, NODECLAIM, NODEPOOL
from reconciler.kube.leader import LeaderElectionConfig, LeaderElector
from reconciler.model import labels as wk
from reconciler.provisioning.drift_hashes import (
    NODECLASS_HASH_ANNOTATION,
    NODECLASS_HASH_VERSION_ANNOTATION,
    NODEPOOL_HASH_VERSION,
    nodepool_hash,
)

# What Karpenter v1.x stamps (its own hash values; Adze cannot compute them, only recognise their version).
KARPENTER_STAMPS = {
    wk.NODEPOOL_HASH: "6821555240594823858",
    wk.NODEPOOL_HASH_VERSION: "v3",
    NODECLASS_HASH_ANNOTATION: "12693305387582539540",
    NODECLASS_HASH_VERSION_ANNOTATION: "v4",
}


def lease(identity: str) -> LeaderElectionConfig:
    """Karpenter's Lease (Adze's default name) in its namespace, with the e2e's short timings."""
    return e2e_lease(identity, DEFAULT_LEASE_NAME)


async def karpenter_holds_the_lease(rig: E2E, stepped_down: asyncio.Event) -> None:
    """Karpenter's client-go elector: leads until told to step down, then releases the Lease."""
    elector = LeaderElector(rig.server.kube, lease("karpenter-7c9d8b5f4-x2x9k_2f1e"), clock=rig.clock.now)
    await elector.run(stepped_down.wait)


async def test_adze_waits_for_karpenters_lease_adopts_its_nodeclaims_and_drifts_them(aws: OfflineAWS) -> None:
    async with e2e(aws, replicas=2) as rig:
        # Karpenter's era: the node is launched (here by Adze standing in for Karpenter on another Lease),
        # then its NodeClaim and NodePool carry Karpenter's stamps, and Karpenter leads on its Lease.
        launcher = rig.launch(rig.replica(lease=e2e_lease("launcher", "launcher")))
        assert await wait_for(lambda: rig.converged(instances=1), timeout=120), await rig.inventory()
        await launcher.stop()
        adopted = rig.server.kube.objects(NODECLAIM)[0]["metadata"]["name"]
        await rig.server.kube.patch(NODECLAIM, adopted, {"metadata": {"annotations": KARPENTER_STAMPS}})
        await rig.server.kube.patch(NODEPOOL, "default", {"metadata": {"annotations": {
            wk.NODEPOOL_HASH: KARPENTER_STAMPS[wk.NODEPOOL_HASH], wk.NODEPOOL_HASH_VERSION: "v3"}}})
        stepped_down = asyncio.Event()
        karpenter = asyncio.create_task(karpenter_holds_the_lease(rig, stepped_down))
        assert await wait_for(lambda: _async(_holder(rig).startswith("karpenter-")), timeout=30)

        # Adze with its defaults: a standby on Karpenter's Lease, acting on nothing.
        adze = rig.launch(rig.replica(lease=lease("adze-0"), serve=True, seed=2))
        assert await wait_for(lambda: _async(adze.observed_holder().startswith("karpenter-")), timeout=60)
        assert adze.app.elector is not None and not adze.app.elector.is_leader
        assert _holder(rig).startswith("karpenter-")
        assert _annotations(rig, adopted)[wk.NODEPOOL_HASH_VERSION] == "v3"

        # Karpenter is scaled down: it releases the Lease and Adze takes over, re-stamping the claim.
        stepped_down.set()
        await asyncio.gather(karpenter, return_exceptions=True)
        assert await wait_for(lambda: _async(_holder(rig) == "adze-0"), timeout=60)
        pool = rig.server.kube.objects(NODEPOOL)[0]
        assert await wait_for(lambda: _async(_annotations(rig, adopted).get(wk.NODEPOOL_HASH_VERSION)
                                             == NODEPOOL_HASH_VERSION), timeout=60)
        stamps = _annotations(rig, adopted)
        assert stamps[wk.NODEPOOL_HASH] == nodepool_hash(pool)
        assert stamps[NODECLASS_HASH_VERSION_ANNOTATION] == "adze-v1"
        assert await wait_for(lambda: _async(_pool_annotations(rig).get(wk.NODEPOOL_HASH_VERSION)
                                             == NODEPOOL_HASH_VERSION), timeout=60)
        passes = adze.disruption_passes()  # two whole disruption passes over the re-stamped claim
        assert await wait_for(lambda: _async(adze.disruption_passes() >= passes + 2), timeout=90)
        assert [c["metadata"]["name"] for c in rig.server.kube.objects(NODECLAIM)] == [adopted]  # not drifted

        # The NodePool template changes: the adopted node drifts and is replaced.
        await rig.server.kube.patch(NODEPOOL, "default",
                                    {"spec": {"template": {"metadata": {"labels": {"team": "web"}}}}})
        assert await wait_for(lambda: _replaced(rig, adopted), timeout=180), await rig.inventory()
        claims = rig.server.kube.objects(NODECLAIM)
        assert all(c["metadata"]["labels"].get("team") == "web" for c in claims)
        drift = [line for line in rig.log_lines() if line["message"].startswith("disrupting nodeclaim(s)")]
        assert drift and drift[0]["reason"] == "Drifted", drift
        await adze.stop()


def _holder(rig: E2E) -> str:
    found = rig.server.kube.peek(LEASE, DEFAULT_LEASE_NAME, "kube-system")
    return str(((found or {}).get("spec") or {}).get("holderIdentity") or "")


def _annotations(rig: E2E, name: str) -> dict[str, str]:
    claim = rig.server.kube.peek(NODECLAIM, name)
    return dict(((claim or {}).get("metadata") or {}).get("annotations") or {})


def _pool_annotations(rig: E2E) -> dict[str, str]:
    return dict((rig.server.kube.objects(NODEPOOL)[0]["metadata"]).get("annotations") or {})


async def _replaced(rig: E2E, adopted: str) -> bool:
    names = {c["metadata"]["name"] for c in rig.server.kube.objects(NODECLAIM)}
    return adopted not in names and bool(names) and await rig.converged(instances=1)


async def _async(value: object) -> bool:
    return bool(value)
