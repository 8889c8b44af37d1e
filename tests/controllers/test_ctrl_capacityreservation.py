"""The live capacity-reservation controllers: capacity blocks deleted 40 minutes before their end, and
reserved NodeClaims (and their Nodes) relabelled on-demand once EC2 reports their instance on-demand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.cloud.aws.capacityreservation import CapacityReservation
from reconciler.cloud.sim.provider import SimulatedCloud
from reconciler.cloud.types import Instance
from reconciler.controllers.aws_provider.capacity_reservation_controller import (
    capacity_reservation_loops,
    expire_capacity_blocks,
    sync_capacity_types,
)
from reconciler.controllers.runtime.context import ControllerContext
from reconciler.kube.api import NODE, NODECLAIM
from reconciler.kube.memory import MemoryKube
from reconciler.model import labels as wk
from reconciler.settings import DEFAULT_FEATURE_GATES, Settings
from reconciler.sim.workloads import create_with_status

END = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.moment = now

    def now(self) -> datetime:
        return self.moment

    def monotonic(self) -> float:
        return self.moment.timestamp()


def reservation(kind: str) -> CapacityReservation:
    return CapacityReservation(id="cr-0123", instance_type="m5.large", zone="z1", reservation_type=kind, end_time=END,
                               available=0, total=1)


def claim(name: str, provider_id: str = "") -> dict[str, Any]:
    labels = {wk.NODEPOOL: "default", wk.CAPACITY_TYPE: "reserved", wk.CAPACITY_RESERVATION_ID: "cr-0123",
              wk.CAPACITY_RESERVATION_TYPE: "default", wk.CAPACITY_RESERVATION_INTERRUPTIBLE: "false"}
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": labels},
            "spec": {"nodeClassRef": {"name": "default"}, "requirements": []},
            "status": {"providerID": provider_id, "nodeName": name}}


async def setup(kind: str, now: datetime) -> tuple[ControllerContext, MemoryKube, SimulatedCloud, Clock]:
    clock = Clock(now)
    kube = MemoryKube(clock=clock.now)
    cloud = SimulatedCloud([], clock=clock.now, capacity_reservations=[reservation(kind)])
    cloud.register_existing(Instance("aws:///z1/i-1", "m5.large", "z1", "reserved", 0.0, nodeclaim="c1",
                                     labels={wk.CAPACITY_RESERVATION_ID: "cr-0123"}))
    await create_with_status(kube, claim("c1", "aws:///z1/i-1"))
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "c1", "labels": {**claim("c1")["metadata"]["labels"], wk.REGISTERED: "true"}}}
    await kube.create(node)
    return ControllerContext(kube, cloud, Settings(), clock=clock), kube, cloud, clock


async def test_a_capacity_block_nodeclaim_is_deleted_40_minutes_before_the_end() -> None:
    ctx, kube, cloud, clock = await setup("capacity-block", END - timedelta(minutes=41))
    assert await expire_capacity_blocks(ctx, cloud) == {"deleted": 0}
    clock.moment = END - timedelta(minutes=40)
    assert await expire_capacity_blocks(ctx, cloud) == {"deleted": 1}
    assert kube.peek(NODECLAIM, "c1") is None


async def test_an_odcr_nodeclaim_is_not_expired_but_demoted_when_its_reservation_ends() -> None:
    ctx, kube, cloud, clock = await setup("default", END - timedelta(minutes=10))
    assert await expire_capacity_blocks(ctx, cloud) == {"deleted": 0}
    assert await sync_capacity_types(ctx, cloud) == {"demoted": 0}
    clock.moment = END + timedelta(minutes=1)
    assert await sync_capacity_types(ctx, cloud) == {"demoted": 1}
    for kind in (NODECLAIM, NODE):
        labels = kube.peek(kind, "c1")["metadata"]["labels"]
        assert labels[wk.CAPACITY_TYPE] == "on-demand"
        assert not set(wk.RESERVATION_LABELS) & set(labels)


def test_the_loops_follow_the_gate() -> None:
    on = ControllerContext(MemoryKube(), SimulatedCloud([], clock=lambda: END), Settings())
    off = ControllerContext(MemoryKube(), SimulatedCloud([], clock=lambda: END),
                            Settings(feature_gates={**DEFAULT_FEATURE_GATES, "ReservedCapacity": False}))
    assert sorted(capacity_reservation_loops(on, on.cloud)) == [
        "capacityreservation.capacitytype", "capacityreservation.expiration"]
    assert capacity_reservation_loops(off, off.cloud) == {}
