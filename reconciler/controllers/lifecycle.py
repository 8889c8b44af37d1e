"""NodeClaim lifecycle: launch -> Launched, Node appears -> Registered, Node ready -> Initialized.

Each step is the shared executor from ``reconciler.lifecycle.launch``; this
controller decides which one a claim needs, runs it on a fresh copy of the
claim (a cached copy may lag the claim's real status), logs it the way
Karpenter does and records an event. A claim not Launched within the launch
timeout (5 min) or not Registered within the registration timeout (15 min
after launch) is deleted; its termination finalizer then removes any instance.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from reconciler.cloud.types import CloudError
from reconciler.controllers.cluster import StateStore
from reconciler.controllers.registration_health import RegistrationHealth
from reconciler.controllers.runtime import ControllerContext, ControllerLog, Wakeup, ref
from reconciler.controllers.workers import Workers
from reconciler.kube.api import NODE, NODECLAIM, ApiError, NotFoundError
from reconciler.lifecycle.conditions import make
from reconciler.lifecycle.launch import (
    has_condition,
    initialization_blockers,
    initialize,
    launch,
    register,
    set_condition,
)
from reconciler.model import labels as wk
from reconciler.model.meta import format_time

log = ControllerLog("nodeclaim.lifecycle")
MAX_LAUNCH_BACKOFF = 60.0


class NodeClaimLifecycle:
    def __init__(self, ctx: ControllerContext, store: StateStore, on_launch_failed: Callable[[], None],
                 health: RegistrationHealth | None = None) -> None:
        self.ctx = ctx
        self.store = store
        self.on_launch_failed = on_launch_failed
        self.health = health or RegistrationHealth(ctx, store)
        self.wake = Wakeup()
        self.workers = Workers("lifecycle", on_done=self.wake.set)
        self._retry_at: dict[str, float] = {}
        self._failures: dict[str, int] = {}
        store.subscribe(self._on_change)

    def _on_change(self, kind: str, manifest: dict[str, Any], deleted: bool) -> None:
        if kind in ("NodeClaim", "Node"):
            self.wake.set()

    async def run(self) -> None:
        try:
            while True:
                self.reconcile_all()
                await self.wake.wait(self.ctx.timings.lifecycle_resync)
        finally:
            await self.workers.cancel()

    def reconcile_all(self) -> None:
        """Start the next step for every claim that needs one (each runs as its own task)."""
        now = self.ctx.now()
        for claim in self.store.nodeclaims():
            name = claim["metadata"]["name"]
            if claim["metadata"].get("deletionTimestamp") or self.workers.busy(name) or self.ctx.locks.busy(name):
                continue
            step = self._next_step(claim, now)
            if step is not None:
                self.workers.start(name, functools.partial(self._locked, name, step))

    async def _locked(self, name: str, step: Callable[[str], Any]) -> None:
        async with self.ctx.locks.holding([name]) as held:
            if held:
                async with self.ctx.reconciling():
                    await step(name)

    def _next_step(self, claim: dict[str, Any], now: datetime) -> Callable[[str], Any] | None:
        name = claim["metadata"]["name"]
        model = self.store.state.nodeclaims.get(name)
        status = claim.get("status") or {}
        if not status.get("providerID"):
            created = model.creation_timestamp if model else None
            if created is not None and now - created > timedelta(seconds=self.ctx.timings.launch_timeout):
                return lambda n: self._delete_for_timeout(n, "launch", self.ctx.timings.launch_timeout)
            if self._retry_at.get(name, 0.0) > self.ctx.clock.monotonic():
                return None
            return self._launch
        if not has_condition(claim, "Registered"):
            if self.store.node_for(claim) is not None:
                return self._register
            launched = model.conditions.get("Launched") if model else None
            since = (launched.last_transition_time if launched else None) or (
                model.creation_timestamp if model else None
            )
            if since is not None and now - since > timedelta(seconds=self.ctx.timings.registration_timeout):
                return lambda n: self._delete_for_timeout(n, "registration", self.ctx.timings.registration_timeout)
            return None
        if not has_condition(claim, "Initialized"):
            node = self.store.node_for(claim)
            if node is not None and not initialization_blockers(claim, node):
                return self._initialize
        return None

    # -- steps -------------------------------------------------------------------------------------

    async def _fresh(self, name: str) -> dict[str, Any] | None:
        try:
            claim = await self.ctx.kube.get(NODECLAIM, name)
        except NotFoundError:
            return None
        return None if claim["metadata"].get("deletionTimestamp") else claim

    async def _launch(self, name: str) -> None:
        claim = await self._fresh(name)
        if claim is None or (claim.get("status") or {}).get("providerID"):
            return
        now = self.ctx.now()
        try:
            outcome = await launch(self.ctx.kube, self.ctx.cloud, claim, now)
        except (CloudError, ApiError) as err:
            await self._launch_failed(name, claim, str(err), now)
            return
        if outcome.instance is None:
            labels = claim["metadata"].get("labels") or {}
            self.ctx.metrics.nodeclaims_disrupted.labels(reason=outcome.deleted_for, nodepool=_nodepool(claim),
                                                         capacity_type=labels.get(wk.CAPACITY_TYPE, "")).inc()
            log.error("failed launching nodeclaim", NodeClaim=ref(name), error=outcome.error)
            await self.ctx.event(claim, "Warning", "InsufficientCapacityError",
                                 f"NodeClaim {name} event: Failed to launch: {outcome.error}")
            self.on_launch_failed()
            return
        self._failures.pop(name, None)
        self._retry_at.pop(name, None)
        instance = outcome.instance
        try:
            self.store.write_through(await self.ctx.kube.get(NODECLAIM, name))
        except NotFoundError:
            return
        log.info(
            "launched nodeclaim",
            NodeClaim=ref(name),
            allocatable=instance.allocatable.to_manifest(),
            **{
                "provider-id": instance.provider_id,
                "instance-type": instance.instance_type,
                "zone": instance.zone,
                "capacity-type": instance.capacity_type,
            },
        )
        await self.ctx.event(
            claim, "Normal", "Launched",
            f"launched {instance.instance_type} ({instance.capacity_type}) in {instance.zone} "
            f"as {instance.provider_id}",
        )

    async def _launch_failed(self, name: str, claim: dict[str, Any], error: str, now: datetime) -> None:
        failures = self._failures.get(name, 0) + 1
        self._failures[name] = failures
        self._retry_at[name] = self.ctx.clock.monotonic() + min(MAX_LAUNCH_BACKOFF, 2.0 ** (failures - 1))
        log.error("failed launching nodeclaim", NodeClaim=ref(name), error=error, attempt=failures)
        await self.ctx.event(claim, "Warning", "LaunchFailed", f"Failed to launch: {error}")
        with contextlib.suppress(NotFoundError):  # Karpenter: Launched=Unknown until the launch timeout
            await set_condition(self.ctx.kube, name, make("Launched", "Unknown", format_time(now),
                                                          reason="LaunchFailed", message=error[:1024]))

    async def _register(self, name: str) -> None:
        claim = await self._fresh(name)
        node = self.store.node_for(claim) if claim else None
        if claim is None or node is None or has_condition(claim, "Registered"):
            return
        try:
            node = await self.ctx.kube.get(NODE, node["metadata"]["name"])
        except NotFoundError:
            return
        await register(self.ctx.kube, claim, node, self.ctx.now())
        node_name = node["metadata"]["name"]
        log.info("registered nodeclaim", NodeClaim=ref(name), Node=ref(node_name),
                 **{"provider-id": (claim.get("status") or {}).get("providerID", "")})
        self.ctx.metrics.nodes_created.labels(
            nodepool=_nodepool(claim), zone=((claim["metadata"].get("labels") or {}).get(wk.ZONE, ""))).inc()
        await self.health.record(claim, healthy=True)
        await self.ctx.event(claim, "Normal", "Registered", f"Status condition transitioned, Type: Registered, "
                                                            f"Status: True, Node: {node_name}")

    async def _initialize(self, name: str) -> None:
        claim = await self._fresh(name)
        node = self.store.node_for(claim) if claim else None
        if claim is None or node is None or has_condition(claim, "Initialized"):
            return
        try:
            node = await self.ctx.kube.get(NODE, node["metadata"]["name"])
        except NotFoundError:
            return
        if not await initialize(self.ctx.kube, claim, node, self.ctx.now()):
            return
        node_name = node["metadata"]["name"]
        log.info("initialized nodeclaim", NodeClaim=ref(name), Node=ref(node_name),
                 allocatable=(node.get("status") or {}).get("allocatable") or {},
                 **{"provider-id": (claim.get("status") or {}).get("providerID", "")})
        await self.ctx.event(claim, "Normal", "Initialized", f"Status condition transitioned, Type: Initialized, "
                                                             f"Status: True, Node: {node_name}")

    async def _delete_for_timeout(self, name: str, phase: str, limit: float) -> None:
        claim = await self._fresh(name)
        if claim is None:
            return
        if phase == "launch" and (claim.get("status") or {}).get("providerID"):
            return
        if phase == "registration" and has_condition(claim, "Registered"):
            return
        message = f"{phase} timed out: not {'Launched' if phase == 'launch' else 'Registered'} within {limit:g}s"
        log.info("deleting nodeclaim", NodeClaim=ref(name), reason=f"{phase}_timeout", detail=message)
        await self.ctx.event(claim, "Warning", "NodeClaimTimeout" if phase == "launch" else "RegistrationTimeout",
                             message)
        await self.health.record(claim, healthy=False)
        try:
            await self.ctx.kube.delete(NODECLAIM, name)
        except NotFoundError:
            return
        self.ctx.metrics.nodeclaims_disrupted.labels(
            reason=f"{phase}_timeout", nodepool=_nodepool(claim),
            capacity_type=(claim["metadata"].get("labels") or {}).get(wk.CAPACITY_TYPE, "")).inc()


def _nodepool(claim: dict[str, Any]) -> str:
    return str(((claim.get("metadata") or {}).get("labels") or {}).get(wk.NODEPOOL, ""))
