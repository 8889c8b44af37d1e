"""Termination as Karpenter's, through ``Terminator.step``: the drain lasts at least 5 s, then the instance waits
for the VolumeAttachments of drained pods, unless the terminationGracePeriod deadline has passed (issue 17).

Each test drives the terminator the way its callers do (step, come back later) on the in-memory API server
and the simulated cloud, and looks at what a user would see: is the instance still running, which pods went.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from test_termination_exec import NOW, launched_node, running_pod

from reconciler.cloud.sim.provider import SimulatedCloud
from reconciler.cloud.types import InstanceType, Offering
from reconciler.kube.api import NODECLAIM, POD, VOLUMEATTACHMENT, NotFoundError
from reconciler.kube.memory import MemoryKube
from reconciler.lifecycle.termination import Terminator
from reconciler.model import labels as wk
from reconciler.model.resources import Resources
from reconciler.sim.workloads import create_with_status


@pytest.fixture
def env() -> tuple[MemoryKube, SimulatedCloud]:
    one_type = InstanceType("t", Resources.of(cpu="2", memory="4Gi", pods="10"),
                            offerings=(Offering("z", "on-demand", 1),))
    return MemoryKube(clock=lambda: NOW), SimulatedCloud([one_type], clock=lambda: NOW)


def conditions(claim: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c.get("reason", "")) for c in (claim.get("status") or {}).get("conditions") or []}


def at(seconds: float) -> Any:
    return NOW + timedelta(seconds=seconds)


def with_claim(pod: dict[str, Any], claim: str) -> dict[str, Any]:
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return pod


def tolerating_everything(pod: dict[str, Any]) -> dict[str, Any]:
    pod["spec"]["tolerations"] = [{"operator": "Exists"}]
    return pod


async def bound_claim(kube: MemoryKube, claim: str, volume: str) -> None:
    await kube.create({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume},
                       "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{volume}"}}})
    await create_with_status(kube, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim, "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": volume,
                 "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Bound"},
    })


async def attachment(kube: MemoryKube, name: str, volume: str | None, node: str = "pool-a") -> None:
    source = {"persistentVolumeName": volume} if volume else {"inlineVolumeSpec": {}}
    await kube.create({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": name},
                       "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node, "source": source}})


async def step(terminator: Terminator, kube: MemoryKube, seconds: float) -> Any:
    return await terminator.step(await kube.get(NODECLAIM, "pool-a"), at(seconds))


async def test_an_empty_node_is_drained_for_five_seconds_before_its_instance_goes(
    env: tuple[MemoryKube, SimulatedCloud],
) -> None:
    kube, cloud = env
    await launched_node(kube, cloud)
    await kube.delete(NODECLAIM, "pool-a")
    terminator = Terminator(kube, cloud)

    first = await step(terminator, kube, 0)
    assert not first.finished and first.drain_ends_at == at(5)
    assert conditions(await kube.get(NODECLAIM, "pool-a"))["Drained"] == ("Unknown", "Draining")
    again = await step(terminator, kube, 4.9)
    assert not again.finished and again.drain_ends_at == at(5), "the drain's start is kept between steps"
    assert len(await cloud.list()) == 1, "the instance runs until the drain is over"
    done = await step(terminator, kube, 5)
    assert done.finished and done.instance_deleted and await cloud.list() == []


async def test_a_pod_bound_just_after_the_taint_is_drained_before_the_instance_goes(
    env: tuple[MemoryKube, SimulatedCloud],
) -> None:
    """What the minimum drain time is for: the scheduler bound a pod before it saw the disrupted taint."""
    kube, cloud = env
    await launched_node(kube, cloud)
    await kube.delete(NODECLAIM, "pool-a")
    terminator = Terminator(kube, cloud)
    assert not (await step(terminator, kube, 0)).finished  # tainted, nothing to evict yet

    await create_with_status(kube, running_pod("late", "pool-a", {"app": "late"}))
    late = await step(terminator, kube, 2)
    assert late.evicted == ["default/late"] and not late.finished
    assert len(await cloud.list()) == 1
    assert (await step(terminator, kube, 5)).finished


async def test_the_instance_waits_for_the_volume_attachment_of_a_drained_pod(
    env: tuple[MemoryKube, SimulatedCloud],
) -> None:
    kube, cloud = env
    await launched_node(kube, cloud)
    await bound_claim(kube, "data-db-0", "pv-db")
    await create_with_status(kube, with_claim(running_pod("db-0", "pool-a", {"app": "db"}), "data-db-0"))
    await attachment(kube, "csi-db", "pv-db")
    await kube.delete(NODECLAIM, "pool-a")
    terminator = Terminator(kube, cloud)

    assert (await step(terminator, kube, 0)).evicted == ["default/db-0"]
    with pytest.raises(NotFoundError):
        await kube.get(POD, "db-0", "default")
    waiting = await step(terminator, kube, 6)
    assert waiting.awaiting_volumes == ["csi-db"] and not waiting.finished
    seen = conditions(await kube.get(NODECLAIM, "pool-a"))
    assert seen["Drained"][0] == "True" and seen["VolumesDetached"] == ("Unknown", "AwaitingVolumeDetachment")
    assert len(await cloud.list()) == 1, "the volume is still attached: the instance stays"
    assert (await step(terminator, kube, 30)).awaiting_volumes == ["csi-db"]

    await kube.delete(VOLUMEATTACHMENT, "csi-db")  # the CSI driver detached it
    done = await step(terminator, kube, 31)
    assert done.finished and done.instance_deleted and not done.awaiting_volumes


async def test_volumes_of_pods_the_drain_leaves_alone_and_attachments_without_a_pv_do_not_block(
    env: tuple[MemoryKube, SimulatedCloud],
) -> None:
    kube, cloud = env
    await launched_node(kube, cloud)
    await bound_claim(kube, "logs", "pv-logs")
    # Tolerates the disrupted taint: never drained, so its volume never detaches while the node runs.
    await create_with_status(kube, tolerating_everything(with_claim(running_pod("agent", "pool-a", {}), "logs")))
    await attachment(kube, "csi-logs", "pv-logs")
    await attachment(kube, "csi-inline", None)
    await kube.delete(NODECLAIM, "pool-a")
    terminator = Terminator(kube, cloud)

    assert not (await step(terminator, kube, 0)).evicted
    done = await step(terminator, kube, 5)
    assert done.finished and not done.awaiting_volumes
    assert done.deleted_with_node == ["default/agent"]


async def test_after_the_grace_period_deadline_the_volumes_are_not_waited_for(
    env: tuple[MemoryKube, SimulatedCloud],
) -> None:
    kube, cloud = env
    await launched_node(kube, cloud, terminationGracePeriod="1m")
    await bound_claim(kube, "data", "pv-data")
    await create_with_status(kube, with_claim(running_pod("app", "pool-a", {"app": "x"}), "data"))
    await attachment(kube, "csi-data", "pv-data")
    await kube.delete(NODECLAIM, "pool-a")  # deadline: NOW + 1 min
    terminator = Terminator(kube, cloud)

    assert (await step(terminator, kube, 0)).evicted == ["default/app"]
    assert (await step(terminator, kube, 59)).awaiting_volumes == ["csi-data"]
    done = await step(terminator, kube, 60)
    assert done.finished and done.instance_deleted
    assert done.volumes_left_attached == ["csi-data"] and not done.awaiting_volumes


async def test_a_deadline_annotation_counts_as_the_grace_period_deadline(
    env: tuple[MemoryKube, SimulatedCloud],
) -> None:
    """Forceful deletions (interruption) stamp the deadline on the NodeClaim; the volume wait honours it."""
    kube, cloud = env
    await launched_node(kube, cloud)
    await kube.patch(NODECLAIM, "pool-a", {"metadata": {"annotations": {
        wk.NODECLAIM_TERMINATION_TIMESTAMP: at(10).strftime("%Y-%m-%dT%H:%M:%SZ")}}})
    await bound_claim(kube, "data", "pv-data")
    await attachment(kube, "csi-data", "pv-data")
    await kube.delete(NODECLAIM, "pool-a")
    terminator = Terminator(kube, cloud)
    assert not (await step(terminator, kube, 0)).finished
    assert (await step(terminator, kube, 5)).awaiting_volumes == ["csi-data"]
    assert (await step(terminator, kube, 10)).finished
