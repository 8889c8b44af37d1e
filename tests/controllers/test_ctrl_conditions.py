"""Karpenter's conditions, step by step: NodeClaim Ready (root), Consolidatable, the termination conditions,
NodePool NodeRegistrationHealthy; and the re-stamping of NodeClaims of another hash version."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ctrl_objects import nodeclass, nodepool
from ctrl_steps import Steps, bound_pod, launched_node, nodeclaim_manifest

from reconciler.controllers.disruption.consolidatable_condition import ConsolidatableMarker
from reconciler.controllers.nodeclaim.lifecycle_controller import NodeClaimLifecycle
from reconciler.controllers.nodeclaim.termination_controller import TerminationController
from reconciler.controllers.pools_and_classes.hash_stamper import HashStamper
from reconciler.controllers.pools_and_classes.status_controller import StatusController
from reconciler.kube.api import NODECLAIM, NODEPOOL, PDB, Kind, WatchEvent
from reconciler.model import labels as wk
from reconciler.model.conditions import NODECLAIM_DEPENDENTS, with_root
from reconciler.model.meta import format_time
from reconciler.provisioning.drift_hashes import NODEPOOL_HASH_VERSION, nodepool_hash
from reconciler.sim.workloads import create_with_status


def conditions(manifest: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c.get("reason", "")) for c in (manifest.get("status") or {}).get("conditions")
            or []}


def test_ready_is_the_root_of_launched_registered_initialized() -> None:
    stamp = "2026-01-01T00:00:00Z"
    launched = [{"type": "Launched", "status": "True", "reason": "Launched", "lastTransitionTime": stamp}]
    pending = {c["type"]: c for c in with_root(launched, NODECLAIM_DEPENDENTS, stamp)}
    assert pending["Registered"]["reason"] == "AwaitingReconciliation"  # filled in, as operatorpkg does
    assert (pending["Ready"]["status"], pending["Ready"]["reason"]) == ("Unknown", "ReconcilingDependents")
    assert pending["Ready"]["message"] in ("Registered=Unknown, Initialized=Unknown",
                                           "Initialized=Unknown, Registered=Unknown")
    failed = with_root([*launched, {"type": "Registered", "status": "False", "reason": "X", "lastTransitionTime":
                                     stamp}], NODECLAIM_DEPENDENTS, stamp)
    assert {c["type"]: c["status"] for c in failed}["Ready"] == "False"
    done = [{"type": t, "status": "True", "reason": t, "lastTransitionTime": stamp} for t in NODECLAIM_DEPENDENTS]
    ready = {c["type"]: c for c in with_root(done, NODECLAIM_DEPENDENTS, "2026-01-02T00:00:00Z")}["Ready"]
    assert (ready["status"], ready["reason"], ready["lastTransitionTime"]) == ("True", "Ready", "2026-01-02T00:00:00Z")
    kept = {c["type"]: c for c in with_root([*done, ready], NODECLAIM_DEPENDENTS, "2026-01-03T00:00:00Z")}
    assert kept["Ready"]["lastTransitionTime"] == "2026-01-02T00:00:00Z"  # unchanged status keeps its time


async def test_a_claim_is_ready_once_launched_registered_and_initialized() -> None:
    steps = Steps()
    await steps.basics()
    await steps.kube.create(nodeclaim_manifest())
    lifecycle = NodeClaimLifecycle(steps.context(), steps.store, on_launch_failed=lambda: None)
    lifecycle.reconcile_all()
    await lifecycle.workers.drain()
    launched = conditions(await steps.kube.get(NODECLAIM, "default-abcde"))
    assert launched["Launched"][0] == "True" and launched["Ready"] == ("Unknown", "ReconcilingDependents")
    await launched_node(steps, "default-fghij")
    assert conditions(await steps.kube.get(NODECLAIM, "default-fghij"))["Ready"] == ("True", "Ready")


async def test_consolidatable_follows_consolidate_after_since_the_last_pod_event() -> None:
    steps = Steps()
    await steps.kube.create(nodepool(consolidate_after="5m"))
    await steps.kube.create(nodeclass())
    await launched_node(steps)
    marker = ConsolidatableMarker(steps.context(), steps.store)
    due = await marker.reconcile_once()
    assert "Consolidatable" not in conditions(await steps.kube.get(NODECLAIM, "default-abcde"))
    assert due == steps.clock.now() + timedelta(minutes=5)
    steps.clock.advance(300)
    await marker.reconcile_once()
    assert conditions(await steps.kube.get(NODECLAIM, "default-abcde"))["Consolidatable"][0] == "True"
    # A pod event restarts the clock: the condition goes until consolidateAfter has passed again.
    await steps.kube.patch(NODECLAIM, "default-abcde", {"status": {"lastPodEventTime": format_time(
        steps.clock.now())}}, subresource="status")
    await marker.reconcile_once()
    assert "Consolidatable" not in conditions(await steps.kube.get(NODECLAIM, "default-abcde"))
    # consolidateAfter: Never: never consolidatable.
    await steps.kube.patch(NODEPOOL, "default", {"spec": {"disruption": {"consolidateAfter": "Never"}}})
    steps.clock.advance(3600)
    assert await marker.reconcile_once() is None
    assert "Consolidatable" not in conditions(await steps.kube.get(NODECLAIM, "default-abcde"))


async def test_termination_sets_drained_volumes_detached_and_instance_terminating_in_order() -> None:
    steps = Steps()
    await steps.basics()
    node, _ = await launched_node(steps)
    await bound_pod(steps, "web-0", node, {"app": "web"})
    await steps.kube.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                             "metadata": {"name": "web", "namespace": "default"},
                             "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    seen: list[dict[str, tuple[str, str]]] = []

    def record(kind: Kind, event: WatchEvent) -> None:
        if kind.kind == "NodeClaim" and event.type == "MODIFIED":
            seen.append(conditions(event.object))

    steps.kube.subscribe(record)
    await steps.kube.delete(NODECLAIM, "default-abcde")
    termination = TerminationController(steps.context(), steps.store)
    await termination.reconcile_all()
    await termination.workers.drain()
    assert seen[-1]["Drained"] == ("Unknown", "Draining")  # the PDB holds the pod
    await steps.kube.delete(PDB, "web", "default")
    steps.clock.advance(10)
    await termination.reconcile_all()
    await termination.workers.drain()
    await termination.reconcile_all()
    await termination.workers.drain()
    firsts = {kind: next(i for i, c in enumerate(seen) if c.get(kind, ("",))[0] == "True")
              for kind in ("Drained", "VolumesDetached", "InstanceTerminating")}
    assert firsts["Drained"] <= firsts["VolumesDetached"] <= firsts["InstanceTerminating"], firsts
    assert steps.kube.objects(NODECLAIM) == []


async def test_node_registration_health_follows_registrations_and_resets_on_a_pool_change() -> None:
    steps = Steps()
    await steps.basics()
    status = StatusController(steps.context(), steps.store)
    await status.reconcile_once()
    assert conditions(await steps.kube.get(NODEPOOL, "default"))["NodeRegistrationHealthy"][0] == "Unknown"
    await launched_node(steps, "default-aaaaa")
    assert conditions(await steps.kube.get(NODEPOOL, "default"))["NodeRegistrationHealthy"][0] == "True"
    # Two claims that never register (of the last four, half unhealthy): False, RegistrationFailed.
    lifecycle = NodeClaimLifecycle(steps.context(registration_timeout=60), steps.store, lambda: None, status.health)
    for name in ("default-bbbbb", "default-ccccc"):
        await steps.kube.create(nodeclaim_manifest(name))
    lifecycle.reconcile_all()
    await lifecycle.workers.drain()
    steps.clock.advance(61)
    lifecycle.reconcile_all()
    await lifecycle.workers.drain()
    pool = await steps.kube.get(NODEPOOL, "default")
    assert conditions(pool)["NodeRegistrationHealthy"] == ("False", "RegistrationFailed")
    assert conditions(pool)["Ready"][0] == "True"  # not a dependent of Ready
    # A change to the pool starts over.
    await steps.kube.patch(NODEPOOL, "default", {"spec": {"weight": 5}})
    await status.reconcile_once()
    assert conditions(await steps.kube.get(NODEPOOL, "default"))["NodeRegistrationHealthy"][0] == "Unknown"


async def test_claims_of_another_hash_version_are_restamped_and_drifted_ones_keep_their_hash() -> None:
    steps = Steps()
    await steps.basics()
    karpenter = {wk.NODEPOOL_HASH: "6821555240594823858", wk.NODEPOOL_HASH_VERSION: "v3"}
    for name in ("default-aaaaa", "default-bbbbb"):
        claim = nodeclaim_manifest(name)
        claim["metadata"]["annotations"] = dict(karpenter)
        await steps.kube.create(claim)
    drifted = await steps.kube.get(NODECLAIM, "default-bbbbb")
    drifted["status"] = {"conditions": [{"type": "Drifted", "status": "True", "reason": "NodePoolDrifted",
                                         "lastTransitionTime": format_time(steps.clock.now())}]}
    await create_with_status(steps.kube, {**drifted, "metadata": {**drifted["metadata"], "name": "default-ccccc"}})
    stamper = HashStamper(steps.context(), steps.store)
    assert sorted(await stamper.reconcile_once()) == ["default-aaaaa", "default-bbbbb", "default-ccccc"]
    pool = await steps.kube.get(NODEPOOL, "default")
    fresh = (await steps.kube.get(NODECLAIM, "default-aaaaa"))["metadata"]["annotations"]
    assert (fresh[wk.NODEPOOL_HASH], fresh[wk.NODEPOOL_HASH_VERSION]) == (nodepool_hash(pool), NODEPOOL_HASH_VERSION)
    kept = (await steps.kube.get(NODECLAIM, "default-ccccc"))["metadata"]["annotations"]
    assert (kept[wk.NODEPOOL_HASH], kept[wk.NODEPOOL_HASH_VERSION]) == ("6821555240594823858", NODEPOOL_HASH_VERSION)
    assert pool["metadata"]["annotations"][wk.NODEPOOL_HASH_VERSION] == NODEPOOL_HASH_VERSION
    assert await stamper.reconcile_once() == []  # nothing left of another version
