"""Termination waits for the instance: the NodeClaim keeps its finalizer until the cloud reports the instance
gone (looked up again, never assumed), with Karpenter's instance-termination duration."""

from __future__ import annotations

from datetime import timedelta

from test_termination_exec import NOW, launched_node

from reconciler.cloud.sim.provider import SimulatedCloud
from reconciler.cloud.types import InstanceType, Offering
from reconciler.kube.api import NODE, NODECLAIM, NotFoundError
from reconciler.kube.memory import MemoryKube
from reconciler.lifecycle.termination import Terminator
from reconciler.model import labels as wk
from reconciler.model.conditions import condition_of
from reconciler.model.resources import Resources


async def exists(kube: MemoryKube, kind: object, name: str) -> bool:
    try:
        await kube.get(kind, name)  # type: ignore[arg-type]
    except NotFoundError:
        return False
    return True


async def test_the_claim_and_node_stay_until_the_shutting_down_instance_is_gone() -> None:
    now = [NOW]
    kube = MemoryKube(clock=lambda: now[0])
    cloud = SimulatedCloud([InstanceType("t", Resources.of(cpu="2", memory="4Gi", pods="10"),
                                         offerings=(Offering("z", "on-demand", 1),))],
                           clock=lambda: now[0], shutdown_seconds=90)
    provider_id = await launched_node(kube, cloud)
    await kube.delete(NODECLAIM, "pool-a")
    terminator = Terminator(kube, cloud, min_drain=timedelta(0))

    first = await terminator.step(await kube.get(NODECLAIM, "pool-a"), now[0])
    assert first.instance_deleted and first.awaiting_instance and not first.finished
    assert (await cloud.get(provider_id)).state == "shutting-down"  # re-checked: the cloud still has it
    claim = await kube.get(NODECLAIM, "pool-a")
    assert wk.TERMINATION_FINALIZER in claim["metadata"]["finalizers"]
    assert (condition_of(claim, "InstanceTerminating") or {}).get("status") == "True"
    assert await exists(kube, NODE, "pool-a")

    now[0] += timedelta(seconds=60)
    again = await terminator.step(await kube.get(NODECLAIM, "pool-a"), now[0])
    assert again.awaiting_instance and not again.instance_deleted and not again.finished
    assert cloud.calls.count(("delete", provider_id)) == 2  # asked again; the cloud sends no second terminate
    assert not again.evicted and again.instance_termination_seconds is None

    now[0] += timedelta(seconds=30)
    done = await terminator.step(await kube.get(NODECLAIM, "pool-a"), now[0])
    assert done.finished and done.instance_termination_seconds == 90.0
    assert not await exists(kube, NODECLAIM, "pool-a") and not await exists(kube, NODE, "pool-a")


async def test_an_instance_gone_at_once_finishes_in_the_same_step_with_a_zero_duration() -> None:
    kube = MemoryKube(clock=lambda: NOW)
    cloud = SimulatedCloud([InstanceType("t", Resources.of(cpu="2", memory="4Gi", pods="10"),
                                         offerings=(Offering("z", "on-demand", 1),))], clock=lambda: NOW)
    await launched_node(kube, cloud)
    await kube.delete(NODECLAIM, "pool-a")
    step = await Terminator(kube, cloud, min_drain=timedelta(0)).step(await kube.get(NODECLAIM, "pool-a"), NOW)
    assert step.finished and step.instance_deleted and step.instance_termination_seconds == 0.0
