"""``Reconciler``: one leader's worth of controllers over one ``ControllerContext``.

``run()`` starts the reflectors that feed ``ClusterState`` (``StateStore``),
waits for their first lists, brings node class and NodePool status up to date,
then runs every controller loop until cancelled. A loop that fails is logged
and restarted with backoff; cancelling ``run()`` stops everything and writes
nothing on the way out, so a cancelled reconciler behaves like a killed one and
the next leader converges from what is stored in the API server and the cloud.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

from reconciler.controllers.disruption.consolidatable_condition import ConsolidatableMarker
from reconciler.controllers.disruption.disruption_controller import DisruptionController
from reconciler.controllers.disruption.drift_condition import DriftMarker
from reconciler.controllers.exporters.state_metrics import StateMetrics
from reconciler.controllers.nodeclaim.expiration_controller import ExpirationController
from reconciler.controllers.nodeclaim.garbage_collection import GarbageCollector
from reconciler.controllers.nodeclaim.lifecycle_controller import NodeClaimLifecycle
from reconciler.controllers.nodeclaim.node_repair_controller import HealthController
from reconciler.controllers.nodeclaim.pod_events_controller import PodEventsController
from reconciler.controllers.nodeclaim.termination_controller import TerminationController
from reconciler.controllers.pools_and_classes.field_support import FieldSupportController
from reconciler.controllers.pools_and_classes.hash_stamper import HashStamper
from reconciler.controllers.pools_and_classes.nodeclass_termination import NodeClassTermination
from reconciler.controllers.pools_and_classes.nodeoverlay_status import NodeOverlayController
from reconciler.controllers.pools_and_classes.registration_health import RegistrationHealth
from reconciler.controllers.pools_and_classes.status_controller import StatusController
from reconciler.controllers.provisioning.provisioning_controller import Provisioner
from reconciler.controllers.provisioning.static_capacity import StaticCapacityController
from reconciler.controllers.runtime.context import CURRENT_CONTROLLER, ControllerContext, ControllerLog, NameGenerator
from reconciler.kube.api import NODEOVERLAY, VOLUMEATTACHMENT
from reconciler.kube.reflector import CLUSTER_STATE_KINDS, Backoff, Reflectors, drop_managed_fields
from reconciler.state.store import StateStore

log = ControllerLog("manager")
MAX_RESTART_BACKOFF = 30.0
# What the informers cache: the cluster state, plus VolumeAttachments for the terminator's volume wait.
WATCHED_KINDS = (*CLUSTER_STATE_KINDS, VOLUMEATTACHMENT)


class BackgroundLoop(Protocol):
    """Anything else the leader runs (e.g. the interruption queue consumer)."""

    async def run(self) -> None: ...


class Reconciler:
    def __init__(
        self,
        ctx: ControllerContext,
        *,
        seed: int | None = None,
        extra_loops: dict[str, BackgroundLoop] | None = None,
        disruption: bool = True,
    ) -> None:
        self.ctx = ctx
        self.store = StateStore()
        ctx.cache = self.store  # also for the extra loops (the interruption queue reads NodeClaims from it)
        self.names = NameGenerator(
            lambda name: self.store.get("NodeClaim", name) is not None or self.store.get("Node", name) is not None,
            seed=seed,
        )
        self.provisioner = Provisioner(ctx, self.store, self.names)
        self.registration_health = RegistrationHealth(ctx, self.store)
        self.lifecycle = NodeClaimLifecycle(
            ctx, self.store, on_launch_failed=lambda: self.provisioner.trigger("launch"),
            health=self.registration_health,
        )
        self.termination = TerminationController(ctx, self.store)
        self.disruption = DisruptionController(ctx, self.store, self.names)
        self.expiration = ExpirationController(ctx, self.store)
        self.garbage = GarbageCollector(ctx, self.store)
        self.status = StatusController(ctx, self.store, self.registration_health)
        self.drift = DriftMarker(ctx, self.store)
        self.podevents = PodEventsController(ctx, self.store)
        self.nodeclass_termination = NodeClassTermination(ctx, self.store)
        self.hashes = HashStamper(ctx, self.store)
        self.consolidatable = ConsolidatableMarker(ctx, self.store)
        self.state_metrics = StateMetrics(ctx, self.store)
        self.field_support = FieldSupportController(ctx, self.store)
        self.provisioner.on_decided = self.state_metrics.pods_decided
        self.loops: dict[str, Callable[[], Awaitable[None]]] = {
            "provisioner": self.provisioner.run,
            "nodeclaim.lifecycle": self.lifecycle.run,
            "nodeclaim.termination": self.termination.run,
            "nodeclaim.expiration": self.expiration.run,
            "nodeclaim.garbagecollection": self.garbage.run,
            "nodeclaim.podevents": self.podevents.run,
            "status": self.status.run,
            "nodeclass.termination": self.nodeclass_termination.run,
            "nodepool.hash": self.hashes.run,
            "nodeclaim.consolidation": self.consolidatable.run,
            "metrics": self.state_metrics.run,
            "fields.support": self.field_support.run,
        }
        if ctx.settings.gate("StaticCapacity"):  # static NodePools (spec.replicas), behind their gate
            self.static_capacity = StaticCapacityController(ctx, self.store, self.names)
            self.loops["static.provisioning"] = self.static_capacity.run
        if ctx.settings.gate("NodeRepair"):  # as Karpenter: the node.health controller runs only behind its gate
            self.health = HealthController(ctx, self.store)
            self.loops["node.health"] = self.health.run
        self.watched = WATCHED_KINDS
        if ctx.settings.gate("NodeOverlay"):
            self.nodeoverlay = NodeOverlayController(ctx, self.store)
            self.loops["nodeoverlay"] = self.nodeoverlay.run
            self.watched = (*WATCHED_KINDS, NODEOVERLAY)
        if disruption:
            self.loops["disruption"] = self.disruption.run
            self.loops["nodeclaim.disruption"] = self.drift.run
        for name, loop in (extra_loops or {}).items():
            self.loops[name] = loop.run
        # Controllers that work on several objects at once; every other loop does one thing at a time.
        self.concurrency = {"nodeclaim.lifecycle": self.lifecycle.workers.concurrency,
                            "nodeclaim.termination": self.termination.workers.concurrency}
        self.ready = asyncio.Event()

    async def run(self) -> None:
        reflectors = Reflectors(
            self.ctx.kube, self.watched, on_upsert=self.store.upsert, on_delete=self.store.remove,
            backoff=Backoff(initial=0.2, maximum=10.0), progress_deadline=self.ctx.settings.watch_progress_deadline,
            transform=drop_managed_fields,
        )
        tasks: list[asyncio.Task[None]] = []
        metrics = self.ctx.metrics
        unsynced_since = self.ctx.clock.monotonic()
        metrics.cluster_state_unsynced_time.set_function(
            lambda: 0.0 if self.store.synced else self.ctx.clock.monotonic() - unsynced_since)
        async with reflectors:
            try:
                await reflectors.wait_synced(timeout=self.ctx.timings.state_sync_timeout)
                self.store.synced = True
                metrics.cluster_state_synced.set(1)
                log.info("cluster state synced", nodes=len(self.store.nodes()),
                         nodeclaims=len(self.store.nodeclaims()), pods=len(self.store.manifests("Pod")))
                await self.status.nodeclasses_once(force=True)
                await self.status.nodepools_once()
                tasks = [asyncio.create_task(self._supervise(name, loop), name=name)
                         for name, loop in self.loops.items()]
                self.ready.set()
                await asyncio.gather(*tasks)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                self.ready.clear()
                metrics.cluster_state_synced.set(0)

    async def _supervise(self, name: str, loop: Callable[[], Awaitable[None]]) -> None:
        CURRENT_CONTROLLER.set(name)  # this task's context: the loop and the tasks it starts work for ``name``
        runtime = self.ctx.metrics.runtime
        runtime.max_concurrent_reconciles.labels(controller=name).set(self.concurrency.get(name, 1))
        failures = 0
        while True:
            try:
                await loop()
                return
            except asyncio.CancelledError:
                raise
            except Exception as err:
                # controller-runtime's "panic": the whole loop failed, not one reconciliation.
                runtime.reconcile_panics.labels(controller=name).inc()
                failures += 1
                delay = min(MAX_RESTART_BACKOFF, 0.5 * 2 ** (failures - 1))
                log.error("controller failed; restarting", controller=name, error=repr(err), retry_in=delay)
                await asyncio.sleep(delay)
