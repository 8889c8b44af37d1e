"""Running a ``Reconciler`` against ``MemoryKube`` + ``SimulatedCloud`` + ``FakeCluster`` in a test."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ctrl_cluster import FakeCluster, Inventory, inventory
from ctrl_objects import catalog, fast_settings, fast_timings
from support.timescale import wait_until

from reconciler.cloud.sim.provider import SimulatedCloud
from reconciler.controllers.operator.manager import Reconciler
from reconciler.controllers.runtime.context import ControllerContext, SystemClock, Timings
from reconciler.kube.memory import MemoryKube
from reconciler.observability import Metrics, configure_logging
from reconciler.settings import Settings
from reconciler.sim.workloads import create_with_status


async def wait_for(
    predicate: Callable[[], Awaitable[bool]], timeout: float = 45.0, interval: float = 0.02
) -> bool:
    """Until ``predicate`` holds, for at most ``timeout`` seconds times ADZE_TEST_TIME_SCALE."""
    return await wait_until(predicate, timeout, interval)


@dataclass
class Rig:
    """One simulated cluster (API server + cloud + kubelets/scheduler) and the reconcilers run against it."""

    settings: Settings = field(default_factory=fast_settings)
    timings: Timings = field(default_factory=fast_timings)
    clock: SystemClock = field(default_factory=SystemClock)
    kube: MemoryKube = field(init=False)
    cloud: SimulatedCloud = field(init=False)
    cluster: FakeCluster = field(init=False)
    logs: io.StringIO = field(default_factory=io.StringIO)
    metrics: Metrics = field(default_factory=Metrics)

    def __post_init__(self) -> None:
        self.kube = MemoryKube(clock=self.clock.now, seed=7)
        self.cloud = SimulatedCloud(catalog(), clock=self.clock.now)
        self.cluster = FakeCluster(self.kube, self.cloud, self.clock.now)

    async def apply(self, *manifests: dict[str, Any]) -> None:
        for manifest in manifests:
            await create_with_status(self.kube, manifest)

    def context(self, kube: Any = None, cloud: Any = None) -> ControllerContext:
        return ControllerContext(
            kube or self.kube,
            cloud or self.cloud,
            self.settings,
            clock=self.clock,
            timings=self.timings,
            metrics=self.metrics,
        )

    async def inventory(self) -> Inventory:
        return await inventory(self.kube, self.cloud)

    async def converged(self, instances: int | None = None) -> bool:
        inv = await self.inventory()
        return (
            inv.converged and bool(inv.instances) and (instances is None or len(inv.instances) == instances)
        )

    def log_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.logs.getvalue().splitlines() if line.startswith("{")]


@contextlib.asynccontextmanager
async def running(
    rig: Rig, *, seed: int = 1, kube: Any = None, cloud: Any = None, disruption: bool = True
) -> AsyncIterator[Reconciler]:
    """A reconciler and the fake cluster around it, both stopped (cancelled) on exit."""
    configure_logging("info", stream=rig.logs)
    reconciler = Reconciler(rig.context(kube, cloud), seed=seed, disruption=disruption)
    work = asyncio.create_task(reconciler.run())
    surroundings = asyncio.create_task(rig.cluster.run())
    try:
        yield reconciler
    finally:
        for task in (work, surroundings):
            task.cancel()
        results = await asyncio.gather(work, surroundings, return_exceptions=True)
        for result in results:
            if isinstance(result, Exception):
                raise result
