"""Step-by-step controller tests: a MemoryKube on a manual clock, feeding a StateStore synchronously."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ctrl_cluster import node_name_for, utc
from ctrl_objects import catalog, fast_settings, fast_timings, nodeclass, nodepool

from reconciler.cloud.sim.provider import SimulatedCloud
from reconciler.controllers.nodeclaim.lifecycle_controller import NodeClaimLifecycle
from reconciler.controllers.runtime.context import ControllerContext, ManualClock
from reconciler.kube.api import EVENT, NODECLAIM, Kind, WatchEvent
from reconciler.kube.memory import MemoryKube
from reconciler.lifecycle.launch import node_for_instance
from reconciler.model import labels as wk
from reconciler.observability import EventRecorder, Metrics
from reconciler.sim.workloads import create_with_status, running_status
from reconciler.state.store import StateStore


@dataclass
class Steps:
    clock: ManualClock = field(default_factory=lambda: ManualClock(utc()))
    kube: MemoryKube = field(init=False)
    cloud: Any = field(init=False)
    store: StateStore = field(default_factory=StateStore)
    metrics: Metrics = field(default_factory=Metrics)
    recorder: EventRecorder | None = None  # one per "process", as in the reconciler
    # Kinds whose watch events are held back (a slow watch) until ``deliver_lagging``.
    lagging: set[str] = field(default_factory=set)
    _held_back: list[WatchEvent] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.kube = MemoryKube(clock=self.clock.now, seed=3)
        self.cloud = SimulatedCloud(catalog(), clock=self.clock.now)
        self.kube.subscribe(self._feed)
        self.store.synced = True

    def _feed(self, kind: Kind, event: WatchEvent) -> None:
        if kind.kind in self.lagging:
            self._held_back.append(event)
            return
        self._apply(event)

    def deliver_lagging(self) -> None:
        """The slow watch catches up: every held-back event, in order."""
        held, self._held_back = self._held_back, []
        for event in held:
            self._apply(event)

    def _apply(self, event: WatchEvent) -> None:
        if event.type == "DELETED":
            self.store.remove(event.object)
        else:
            self.store.upsert(event.object)

    def context(self, **timings: Any) -> ControllerContext:
        if self.recorder is None:
            self.recorder = EventRecorder(self.kube, clock=self.clock.now)
        return ControllerContext(self.kube, self.cloud, fast_settings(), clock=self.clock,
                                 timings=fast_timings(**timings), metrics=self.metrics, events=self.recorder)

    async def basics(self) -> None:
        await self.kube.create(nodeclass())
        await self.kube.create(nodepool())

    def events(self, reason: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.kube.objects(EVENT) if reason is None or e["reason"] == reason]


def nodeclaim_manifest(name: str = "default-abcde", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {wk.NODEPOOL: "default"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["c5.large", "c5.xlarge"]},
                {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
            ],
            "resources": {"requests": {"cpu": "1"}},
            **spec,
        },
    }


async def launched_node(steps: Steps, name: str = "default-abcde", **spec: Any) -> tuple[str, str]:
    """A claim launched, registered and initialized; returns (node name, provider id)."""
    await steps.kube.create(nodeclaim_manifest(name, **spec))
    lifecycle = NodeClaimLifecycle(steps.context(), steps.store, on_launch_failed=lambda: None)
    lifecycle.reconcile_all()
    await lifecycle.workers.drain()
    claim = await steps.kube.get(NODECLAIM, name)
    instance = await steps.cloud.get(claim["status"]["providerID"])
    node = node_for_instance(claim, instance, steps.clock.now())
    node["metadata"]["name"] = node_name_for(instance.provider_id)
    await create_with_status(steps.kube, node)
    for _ in range(2):
        lifecycle.reconcile_all()
        await lifecycle.workers.drain()
    return node["metadata"]["name"], instance.provider_id


async def bound_pod(steps: Steps, name: str, node: str, labels: dict[str, str]) -> None:
    await create_with_status(steps.kube, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "pause"}]},
        "status": running_status(steps.clock.now()),
    })
