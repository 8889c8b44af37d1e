"""A Node deleted outside Karpenter and registered again by its kubelet is adopted again by its NodeClaim.

The live audit (issue 24): after a force deletion (finalizer stripped) the kubelet registers the Node again
with ``karpenter.sh/unregistered:NoExecute``; Adze skipped NodeClaims already Registered, so the Node kept the
taint (nothing could run there) while its NodeClaim stayed Ready, evicted pods got a second node and the ghost
lingered. Karpenter's registration sync (labels, taints, the unregistered taint removed, finalizer,
ownerReference) must be applied to the returning Node, and nothing new launched for it.
"""

from __future__ import annotations

import time

import pytest
from ctrl_harness import wait_for
from ctrl_objects import deployment
from e2e_rig import e2e_nodepool
from fault_rig import ApiServer, FaultRig, fault_rig

from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.kube.api import NODE, NODECLAIM, POD, Manifest
from reconciler.model import labels as wk

# What the real control plane does and the fake server does not (issue 24, found by the ``real`` parameter).
TAINT_EVICTION = (
    "on the real control plane kube-controller-manager's taint-eviction controller deletes the pods bound to the "
    "re-registered Node (karpenter.sh/unregistered:NoExecute) before Adze re-adopts it; the Deployment's "
    "replacements go pending and Adze launches a second NodeClaim for them, then Empty consolidation deletes the "
    "first NodeClaim and its emptied node (the fake server has no taint manager)"
)


async def only_node(rig: FaultRig) -> Manifest | None:
    nodes, _ = await rig.server.admin.list(NODE)
    return nodes[0] if len(nodes) == 1 else None


def adopted(node: Manifest | None, claim: Manifest) -> bool:
    if node is None:
        return False
    metadata = node["metadata"]
    return (not any(t.get("key") == wk.UNREGISTERED_TAINT_KEY for t in node["spec"].get("taints") or [])
            and (metadata.get("labels") or {}).get(wk.REGISTERED) == "true"
            and (metadata.get("labels") or {}).get(wk.INITIALIZED) == "true"
            and wk.TERMINATION_FINALIZER in (metadata.get("finalizers") or [])
            and any(o.get("uid") == claim["metadata"]["uid"] and o.get("kind") == "NodeClaim"
                    for o in metadata.get("ownerReferences") or []))


async def test_a_force_deleted_node_registered_again_is_readopted(apiserver: ApiServer, aws: OfflineAWS) -> None:
    async with fault_rig(apiserver, aws) as rig:
        await rig.seed(aws.nodeclass(), e2e_nodepool(), deployment(replicas=2, cpu="1500m"))
        a = rig.launch(await rig.replica("a"))
        admin = rig.server.admin

        async def settled() -> bool:
            claims, _ = await admin.list(NODECLAIM)
            return len(claims) == 1 and adopted(await only_node(rig), claims[0])

        assert await wait_for(settled, timeout=60), "registered and owned the first time"
        [claim], _ = await admin.list(NODECLAIM)
        node = await only_node(rig)
        assert node is not None
        name, uid = node["metadata"]["name"], node["metadata"]["uid"]
        def synced() -> list[dict[str, object]]:
            return [line for line in rig.log_lines() if line.get("message") == "synced node of a registered nodeclaim"]

        # Under load a registration can be synced once more before the cut (a watch event older than the write
        # that owned the Node lands after it): only the syncs after the force deletion are about the new Node.
        synced_before = len(synced())
        cut = time.monotonic()
        await admin.patch(NODE, name, {"metadata": {"finalizers": None}})  # kubectl delete --force, finalizer off
        await admin.delete(NODE, name)

        async def back() -> bool:
            found = await only_node(rig)
            return found is not None and found["metadata"]["uid"] != uid  # the kubelet registered it again

        assert await wait_for(back, timeout=30)
        readopted = await wait_for(lambda: _readopted(rig, claim), timeout=30)
        claims, _ = await admin.list(NODECLAIM)
        if rig.server.name == "real" and [c["metadata"]["uid"] for c in claims] != [claim["metadata"]["uid"]]:
            pytest.xfail(f"{TAINT_EVICTION} (re-adopted by its NodeClaim: {readopted}; NodeClaims: "
                         f"{[(c['metadata']['name'], c['metadata']['uid'][:8]) for c in claims]}, "
                         f"first {claim['metadata']['name']}/{claim['metadata']['uid'][:8]})")
        assert readopted, await only_node(rig)
        assert [c["metadata"]["uid"] for c in claims] == [claim["metadata"]["uid"]], "no second NodeClaim"
        assert a.proxy.counts(cut)[("create", "nodeclaims")] == 0

        async def on_the_node() -> bool:  # at once on the fake; the real plane's replacements are bound by then
            pods, _ = await admin.list(POD, rig.server.namespace)
            return {p["spec"].get("nodeName") for p in pods} == {name}

        assert await wait_for(on_the_node, timeout=30)

        assert await wait_for(lambda: _true(synced()[synced_before:]), timeout=10)
        # The Node registered again carried the unregistered taint, and a sync removed it. (A sync may also come
        # between stripping the finalizer and the delete, adding it back: that one names only the finalizer.)
        assert any("taint karpenter.sh/unregistered is present" in line["synced"]  # type: ignore[operator]
                   for line in synced()[synced_before:]), synced()


async def _readopted(rig: FaultRig, claim: Manifest) -> bool:
    return adopted(await only_node(rig), claim)


async def _true(value: object) -> bool:
    return bool(value)
