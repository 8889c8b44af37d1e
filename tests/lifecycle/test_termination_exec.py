"""The async terminator: taint, drain through the Eviction API (PDBs respected), delete the instance, release."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from reconciler.cloud.sim.provider import SimulatedCloud
from reconciler.cloud.types import InstanceType, Offering
from reconciler.kube.api import NODE, NODECLAIM, PDB, POD, NotFoundError
from reconciler.kube.memory import MemoryKube
from reconciler.lifecycle.launch import launch, node_for_instance, register
from reconciler.lifecycle.termination import Terminator
from reconciler.model import labels as wk
from reconciler.model.resources import Resources
from reconciler.sim.workloads import create_with_status

NOW = datetime(2026, 1, 1, 9, tzinfo=UTC)


def running_pod(name: str, node: str, labels: dict[str, str], **annotations: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels, "annotations": annotations},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


async def launched_node(kube: MemoryKube, cloud: SimulatedCloud, **spec: object) -> str:
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": "pool-a",
            "labels": {wk.NODEPOOL: "pool"},
            "finalizers": [wk.TERMINATION_FINALIZER],
        },
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["t"]}],
            **spec,
        },
    }
    await kube.create(claim)
    outcome = await launch(kube, cloud, await kube.get(NODECLAIM, "pool-a"), NOW)
    assert outcome.instance is not None
    await kube.create(node_for_instance(await kube.get(NODECLAIM, "pool-a"), outcome.instance, NOW))
    await register(kube, await kube.get(NODECLAIM, "pool-a"), await kube.get(NODE, "pool-a"), NOW)
    return outcome.instance.provider_id


@pytest.fixture
def env() -> tuple[MemoryKube, SimulatedCloud]:
    kube = MemoryKube(clock=lambda: NOW)
    cloud = SimulatedCloud(
        [
            InstanceType(
                "t",
                Resources.of(cpu="2", memory="4Gi", pods="10"),
                offerings=(Offering("z", "on-demand", 1),),
            )
        ],
        clock=lambda: NOW,
    )
    return kube, cloud


async def test_pdb_blocks_eviction_until_it_allows_then_instance_and_objects_go(
    env: tuple[MemoryKube, SimulatedCloud],
) -> None:
    kube, cloud = env
    provider_id = await launched_node(kube, cloud)
    await create_with_status(kube, running_pod("web-0", "pool-a", {"app": "web"}))
    await create_with_status(kube, running_pod("other", "elsewhere", {"app": "web"}))
    await kube.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        }
    )
    await kube.delete(NODECLAIM, "pool-a")
    terminator = Terminator(kube, cloud)

    step = await terminator.step(await kube.get(NODECLAIM, "pool-a"), NOW)
    assert not step.finished and not step.evicted
    assert any("web-0" in message for message in step.blocked)
    node = await kube.get(NODE, "pool-a")
    assert {"key": wk.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"} in node["spec"]["taints"]
    assert node["metadata"]["labels"][wk.EXCLUDE_FROM_LB] == "karpenter"
    assert len(await cloud.list()) == 1  # nothing terminated while the drain is blocked

    await kube.patch(PDB, "web", {"spec": {"minAvailable": 1}}, "default")
    step = await terminator.step(await kube.get(NODECLAIM, "pool-a"), NOW + timedelta(seconds=10))
    assert step.evicted == ["default/web-0"]
    with pytest.raises(NotFoundError):
        await kube.get(POD, "web-0", "default")
    step = await terminator.step(await kube.get(NODECLAIM, "pool-a"), NOW + timedelta(seconds=20))
    assert step.finished and step.instance_deleted
    assert await cloud.list() == []
    for kind, name in ((NODE, "pool-a"), (NODECLAIM, "pool-a")):
        with pytest.raises(NotFoundError):
            await kube.get(kind, name)
    assert provider_id


async def test_termination_grace_period_force_deletes_a_do_not_disrupt_pod(
    env: tuple[MemoryKube, SimulatedCloud],
) -> None:
    _, cloud = env
    now = [NOW]
    kube = MemoryKube(clock=lambda: now[0])  # the API server's clock moves with the terminator's
    await launched_node(kube, cloud, terminationGracePeriod="1m")
    await create_with_status(
        kube, running_pod("pinned", "pool-a", {"app": "x"}, **{wk.DO_NOT_DISRUPT: "true"})
    )
    await kube.delete(NODECLAIM, "pool-a")
    terminator = Terminator(kube, cloud)
    step = await terminator.step(await kube.get(NODECLAIM, "pool-a"), NOW)
    assert not step.evicted and not step.force_deleted and not step.finished
    # The pod's own 30 s grace must end by the deadline (deletion + 1m): force-delete after 30 s,
    # with only the 29 s that are left.
    now[0] = NOW + timedelta(seconds=31)
    step = await terminator.step(await kube.get(NODECLAIM, "pool-a"), now[0])
    assert step.force_deleted == ["default/pinned"] and step.grace_periods == {"default/pinned": 29}
    now[0] = NOW + timedelta(seconds=32)
    step = await terminator.step(await kube.get(NODECLAIM, "pool-a"), now[0])
    assert not step.finished and step.blocked == ["default/pinned: terminating"]  # shutting down
    now[0] = NOW + timedelta(seconds=60)  # its grace period is over: the kubelet has removed it
    step = await terminator.step(await kube.get(NODECLAIM, "pool-a"), now[0])
    assert step.finished
    assert await cloud.list() == []


async def test_terminating_a_claim_whose_instance_is_already_gone_is_idempotent(
    env: tuple[MemoryKube, SimulatedCloud],
) -> None:
    kube, cloud = env
    provider_id = await launched_node(kube, cloud)
    await cloud.delete(provider_id)  # e.g. a spot interruption took it
    await kube.delete(NODECLAIM, "pool-a")
    terminator = Terminator(kube, cloud)
    # The node still reports Ready (its kubelet may run), so it is drained: for the minimum 5 s.
    step = await terminator.step(await kube.get(NODECLAIM, "pool-a"), NOW)
    assert not step.finished and step.drain_ends_at == NOW + timedelta(seconds=5)
    step = await terminator.step(await kube.get(NODECLAIM, "pool-a"), NOW + timedelta(seconds=5))
    assert step.finished and not step.instance_deleted
    with pytest.raises(NotFoundError):
        await kube.get(NODECLAIM, "pool-a")
