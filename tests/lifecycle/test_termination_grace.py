"""Force-deletion at the terminationGracePeriod deadline sends ``gracePeriodSeconds`` = the time left.

Karpenter deletes a pod whose own terminationGracePeriodSeconds would outlast the
NodeClaim's deadline with only the remaining time, so it is gone before the node.
Here the terminator talks HTTP (live client) to the fake API server.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from support.fake_apiserver import FakeApiServer

from reconciler.cloud.sim.provider import SimulatedCloud
from reconciler.cloud.types import InstanceType, Offering
from reconciler.kube.api import NODE, NODECLAIM, POD
from reconciler.kube.live import LiveKube
from reconciler.kube.memory import MemoryKube
from reconciler.lifecycle.launch import launch, node_for_instance, register
from reconciler.lifecycle.termination import Terminator
from reconciler.model import labels as wk
from reconciler.model.resources import Resources
from reconciler.sim.workloads import create_with_status

START = datetime(2026, 2, 1, 8, tzinfo=UTC)


@dataclass
class Rig:
    server: FakeApiServer
    live: LiveKube
    cloud: SimulatedCloud
    now: list[datetime]  # the API server's clock, moved by the test

    def at(self, seconds: int) -> datetime:
        self.now[0] = START + timedelta(seconds=seconds)
        return self.now[0]


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    now = [START]
    cloud = SimulatedCloud(
        [InstanceType("t", Resources.of(cpu="2", memory="4Gi", pods="10"), offerings=(Offering("z", "on-demand", 1),))],
        clock=lambda: now[0],
    )
    async with FakeApiServer(kube=MemoryKube(clock=lambda: now[0])) as server:
        async with LiveKube.for_url(server.url, token="t") as live:
            yield Rig(server, live, cloud, now)
        assert not server.violations


async def launched_claim(kube: LiveKube, cloud: SimulatedCloud, grace: str) -> None:
    """Created over HTTP, so the server applies the CRD's defaults as a real one would."""
    await kube.create({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "pool-a", "labels": {wk.NODEPOOL: "pool"}, "finalizers": [wk.TERMINATION_FINALIZER]},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["t"]}],
            "terminationGracePeriod": grace,
        },
    })
    outcome = await launch(kube, cloud, await kube.get(NODECLAIM, "pool-a"), START)
    assert outcome.instance is not None
    await kube.create(node_for_instance(await kube.get(NODECLAIM, "pool-a"), outcome.instance, START))
    await register(kube, await kube.get(NODECLAIM, "pool-a"), await kube.get(NODE, "pool-a"), START)


def slow_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {
            "nodeName": "pool-a",
            "terminationGracePeriodSeconds": 600,
            "containers": [{"name": "c", "image": "pause"}],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


async def test_a_pod_slower_than_the_deadline_is_deleted_with_the_time_left(rig: Rig) -> None:
    kube = rig.live
    await launched_claim(kube, rig.cloud, grace="2m")  # deleted now: the deadline is 120 s away
    await create_with_status(kube, slow_pod("slow"))
    await kube.delete(NODECLAIM, "pool-a")
    terminator = Terminator(rig.live, rig.cloud)

    step = await terminator.step(await rig.live.get(NODECLAIM, "pool-a"), rig.at(0))
    assert step.force_deleted == ["default/slow"] and step.grace_periods == {"default/slow": 120}
    pod_deletes = [r for r in rig.server.requests if r.method == "DELETE" and "/pods/" in r.path]
    assert [json.loads(r.body) for r in pod_deletes] == [
        {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 120}
    ]
    terminating = (await rig.live.get(POD, "slow", "default"))["metadata"]
    assert terminating["deletionGracePeriodSeconds"] == 120
    assert terminating["deletionTimestamp"] == "2026-02-01T08:02:00Z"  # exactly the NodeClaim's deadline

    step = await terminator.step(await rig.live.get(NODECLAIM, "pool-a"), rig.at(60))
    assert not step.finished and not step.force_deleted  # shutting down; not deleted again
    assert len(await rig.cloud.list()) == 1

    step = await terminator.step(await rig.live.get(NODECLAIM, "pool-a"), rig.at(120))
    assert step.finished and step.instance_deleted  # the pod was gone by the deadline, then the instance
    assert await rig.cloud.list() == []


async def test_a_pod_that_fits_before_the_deadline_is_evicted_not_force_deleted(rig: Rig) -> None:
    kube = rig.live
    await launched_claim(kube, rig.cloud, grace="1h")
    await create_with_status(kube, slow_pod("slow"))
    await kube.delete(NODECLAIM, "pool-a")
    step = await Terminator(rig.live, rig.cloud).step(await rig.live.get(NODECLAIM, "pool-a"), rig.at(0))
    assert step.evicted == ["default/slow"] and not step.force_deleted
    assert not [r for r in rig.server.requests if r.method == "DELETE" and "/pods/" in r.path]
