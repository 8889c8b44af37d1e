"""Termination finalizers, expiration and garbage collection, step by step."""

from __future__ import annotations

from typing import Any

from ctrl_steps import Steps, bound_pod, launched_node

from reconciler.controllers.nodeclaim.expiration_controller import ExpirationController
from reconciler.controllers.nodeclaim.garbage_collection import GarbageCollector
from reconciler.controllers.nodeclaim.termination_controller import TerminationController
from reconciler.kube.api import NODE, NODECLAIM, PDB, POD, VOLUMEATTACHMENT, NotFoundError
from reconciler.model import labels as wk


async def terminate_pass(termination: TerminationController) -> None:
    await termination.reconcile_all()
    await termination.workers.drain()


async def test_a_deleted_nodeclaim_is_drained_respecting_pdbs_then_its_instance_is_deleted() -> None:
    steps = Steps()
    await steps.basics()
    node, provider_id = await launched_node(steps)
    await bound_pod(steps, "web-0", node, {"app": "web"})
    await steps.kube.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                             "metadata": {"name": "web", "namespace": "default"},
                             "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    await steps.kube.delete(NODECLAIM, "default-abcde")
    termination = TerminationController(steps.context(), steps.store)

    await terminate_pass(termination)
    tainted = await steps.kube.get(NODE, node)
    assert any(t["key"] == wk.DISRUPTED_TAINT_KEY for t in tainted["spec"]["taints"])
    assert await steps.kube.get(POD, "web-0", "default")  # the PDB refused the eviction
    assert steps.events("FailedDraining")
    assert (await steps.cloud.list())  # the instance waits for the drain

    await steps.kube.delete(PDB, "web", "default")
    steps.clock.advance(10)
    await terminate_pass(termination)
    await terminate_pass(termination)
    assert steps.kube.objects(POD) == []
    assert await steps.cloud.list() == []
    assert steps.kube.objects(NODECLAIM) == [] and steps.kube.objects(NODE) == []
    assert ("delete", provider_id) in steps.cloud.calls
    assert steps.metrics.sample("karpenter_pods_eviction_requests_total", {"code": "200"}) == 1
    assert steps.metrics.sample("karpenter_nodeclaims_terminated_total",
                                {"nodepool": "default", "capacity_type": "on-demand", "zone": "us-east-1a"}) == 1


async def test_deleting_a_node_deletes_its_nodeclaim_which_then_terminates() -> None:
    steps = Steps()
    await steps.basics()
    node, _ = await launched_node(steps)
    await steps.kube.delete(NODE, node)
    termination = TerminationController(steps.context(), steps.store)
    await terminate_pass(termination)
    await terminate_pass(termination)
    steps.clock.advance(1)  # the drain's minimum duration (0.2 s in these timings)
    await terminate_pass(termination)
    assert steps.kube.objects(NODECLAIM) == [] and steps.kube.objects(NODE) == []
    messages = [m for m in steps.events() if m["involvedObject"]["kind"] == "NodeClaim"]
    assert any(e["reason"] == "Terminated" for e in messages)
    assert await steps.cloud.list() == []


async def test_expired_nodeclaims_are_deleted_and_fresh_ones_kept() -> None:
    steps = Steps()
    await steps.basics()
    await launched_node(steps, "old", expireAfter="1h")
    await launched_node(steps, "young", expireAfter="720h")
    expiration = ExpirationController(steps.context(), steps.store)
    assert await expiration.reconcile_once() == []
    steps.clock.advance(3601)
    expired = await expiration.reconcile_once()
    assert [e.nodeclaim for e in expired] == ["old"]
    assert (await steps.kube.get(NODECLAIM, "old"))["metadata"].get("deletionTimestamp")
    assert not (await steps.kube.get(NODECLAIM, "young"))["metadata"].get("deletionTimestamp")
    assert steps.metrics.sample("karpenter_nodeclaims_disrupted_total",
                                {"reason": "expired", "nodepool": "default", "capacity_type": "on-demand"}) == 1


async def test_garbage_collection_terminates_old_orphans_and_deletes_claims_whose_instance_vanished() -> None:
    steps = Steps()
    await steps.basics()
    _, kept_id = await launched_node(steps, "kept")
    node, gone_id = await launched_node(steps, "gone")
    # A launch whose claim was never recorded (crash between CreateFleet and the status write).
    orphan = await steps.cloud.create(_request("lost"), None)
    # An instance terminated behind Adze's back.
    await steps.cloud.delete(gone_id)
    collector = GarbageCollector(steps.context(gc_min_age=30), steps.store)

    young = await collector.collect_once()
    assert young.instances == []  # the orphan is too young: its claim may still record it
    assert young.nodeclaims == ["gone"]
    steps.clock.advance(31)
    result = await collector.collect_once()
    assert result.instances == [orphan.provider_id]
    assert {i.provider_id for i in await steps.cloud.list()} == {kept_id}
    assert (await steps.kube.get(NODECLAIM, "gone"))["metadata"].get("deletionTimestamp")
    try:
        await steps.kube.get(NODECLAIM, "kept")
    except NotFoundError as err:
        raise AssertionError("a healthy claim was collected") from err
    _ = node


def _request(name: str) -> Any:
    from reconciler.cloud.types import LaunchRequest

    return LaunchRequest(nodeclaim=name, nodepool="default", nodeclass="default", instance_types=["c5.large"])


async def test_the_termination_controller_drains_for_the_minimum_time_then_waits_for_volumes() -> None:
    """Issue 17: the live finalizer controller (reading pods, budgets and VolumeAttachments from its cache)
    keeps the instance until the drain's minimum time is over and the drained pod's volume is detached."""
    steps = Steps()
    await steps.basics()
    node, _ = await launched_node(steps)
    await steps.kube.create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                             "metadata": {"name": "data", "namespace": "default"},
                             "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": "pv-data",
                                      "resources": {"requests": {"storage": "1Gi"}}}})
    await bound_pod(steps, "db-0", node, {"app": "db"})
    await steps.kube.patch(POD, "db-0", {"spec": {"volumes": [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}}, "default")
    await steps.kube.create({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
                             "metadata": {"name": "csi-data"},
                             "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node,
                                      "source": {"persistentVolumeName": "pv-data"}}})
    await steps.kube.delete(NODECLAIM, "default-abcde")
    termination = TerminationController(steps.context(min_drain_time=5.0), steps.store)

    await terminate_pass(termination)
    assert steps.kube.objects(POD) == []  # evicted
    steps.clock.advance(4)
    await terminate_pass(termination)
    assert await steps.cloud.list(), "the drain lasts 5 s"
    assert not steps.events("AwaitingVolumeDetachment")
    steps.clock.advance(1)
    await terminate_pass(termination)
    assert await steps.cloud.list(), "the drained pod's volume is still attached"
    [event] = steps.events("AwaitingVolumeDetachment")
    assert event["message"] == "Awaiting deletion of 1 VolumeAttachments bound to node"

    await steps.kube.delete(VOLUMEATTACHMENT, "csi-data")
    await terminate_pass(termination)
    assert await steps.cloud.list() == []
    assert steps.kube.objects(NODECLAIM) == [] and steps.kube.objects(NODE) == []
