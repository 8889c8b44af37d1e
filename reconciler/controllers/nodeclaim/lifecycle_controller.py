"""NodeClaim lifecycle: launch -> Launched, Node appears -> Registered, Node ready -> Initialized.

Each step is the shared executor from ``reconciler.lifecycle.launch``; this
controller decides which one a claim needs, runs it on the informer's copy of
the claim and its Node (as Karpenter's controllers read their cache; every
write is guarded by the copy's resourceVersion, so a stale copy costs a 409 and
a read, never a lost update, and what a step writes is fed back into the cache
at once so the next step never acts on an older copy of our own write), logs it
the way Karpenter does and records an event. A step that fails is retried after
the per-claim backoff (``workers.Workers``); a failed launch after its own (1 s
doubling to 1 min, with jitter). A claim not Launched within the launch
timeout (5 min) or not Registered within the registration timeout (15 min
after launch) is deleted; its termination finalizer then removes any instance.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from reconciler.cloud.types import CloudError, LaunchPendingError
from reconciler.controllers.pools_and_classes.registration_health import RegistrationHealth
from reconciler.controllers.runtime.backoff import CONTROLLER_BACKOFF, Backoffs
from reconciler.controllers.runtime.context import ControllerContext, ControllerLog, Wakeup, ref
from reconciler.controllers.runtime.workers import Workers, wait_time
from reconciler.kube.api import NODE, NODECLAIM, ApiError, Manifest, NotFoundError
from reconciler.lifecycle.conditions import set_condition
from reconciler.lifecycle.launch import initialization_blockers, initialize, launch, register, registration_drift
from reconciler.model import labels as wk
from reconciler.model.conditions import is_true, make
from reconciler.model.meta import format_time
from reconciler.state.store import StateStore

log = ControllerLog("nodeclaim.lifecycle")


class NodeClaimLifecycle:
    def __init__(self, ctx: ControllerContext, store: StateStore, on_launch_failed: Callable[[], None],
                 health: RegistrationHealth | None = None) -> None:
        self.ctx = ctx
        self.store = store
        self.on_launch_failed = on_launch_failed
        self.health = health or RegistrationHealth(ctx, store)
        self.wake = Wakeup()
        self.workers = Workers("nodeclaim.lifecycle", on_done=self.wake.set, clock=ctx.clock.monotonic)
        self.launches = Backoffs(CONTROLLER_BACKOFF, ctx.clock.monotonic)  # failed launches, per claim
        store.subscribe(self._on_change)

    def _on_change(self, kind: str, manifest: dict[str, Any], deleted: bool) -> None:
        if kind in ("NodeClaim", "Node"):
            self.wake.set()

    async def run(self) -> None:
        try:
            while True:
                self.reconcile_all()
                await self.wake.wait(wait_time(self.ctx.timings.lifecycle_resync, self.workers.retry_in(),
                                               self.launches.next_due()))
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
            if not self.launches.ready(name):
                return None
            return self._launch
        if not is_true(claim, "Registered"):
            if self.store.node_for(claim) is not None:
                return self._register
            launched = model.conditions.get("Launched") if model else None
            since = (launched.last_transition_time if launched else None) or (
                model.creation_timestamp if model else None
            )
            if since is not None and now - since > timedelta(seconds=self.ctx.timings.registration_timeout):
                return lambda n: self._delete_for_timeout(n, "registration", self.ctx.timings.registration_timeout)
            return None
        node = self.store.node_for(claim)
        if node is not None and not node["metadata"].get("deletionTimestamp") and registration_drift(claim, node):
            return self._readopt  # the kubelet registered the Node again (it was deleted outside Karpenter)
        if not is_true(claim, "Initialized"):
            if node is not None and not initialization_blockers(claim, node):
                return self._initialize
        elif node is not None and (node["metadata"].get("labels") or {}).get(wk.INITIALIZED) != "true" \
                and not initialization_blockers(claim, node):
            return self._readopt
        return None

    # -- steps -------------------------------------------------------------------------------------

    def _current(self, name: str) -> Manifest | None:
        """The informer's copy of a claim still to work on (None when gone or deleting)."""
        claim = self.store.get("NodeClaim", name)
        return None if claim is None or claim["metadata"].get("deletionTimestamp") else claim

    async def _launch(self, name: str) -> None:
        claim = self._current(name)
        if claim is None or (claim.get("status") or {}).get("providerID"):
            return
        now = self.ctx.now()
        try:
            outcome = await launch(self.ctx.kube, self.ctx.cloud, claim, now, idempotent=True,
                                   nodeclasses=lambda name: self.store.get("EC2NodeClass", name))
        except LaunchPendingError as err:  # launched before (a crash, a lost answer), not visible yet: wait for it
            attempt, delay = self.launches.failed(name)
            log.info("waiting for the instance of an earlier launch to become visible", NodeClaim=ref(name),
                     detail=str(err), attempt=attempt, retryIn=round(delay, 3))
            return
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
        self.launches.forget(name)
        instance = outcome.instance
        if outcome.stored is not None:
            self.store.write_through(outcome.stored)
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
        failures, delay = self.launches.failed(name)
        log.error("failed launching nodeclaim", NodeClaim=ref(name), error=error, attempt=failures,
                  retryIn=round(delay, 3))
        await self.ctx.event(claim, "Warning", "LaunchFailed", f"Failed to launch: {error}")
        with contextlib.suppress(NotFoundError):  # Karpenter: Launched=Unknown until the launch timeout
            await set_condition(self.ctx.kube, name, make("Launched", "Unknown", format_time(now),
                                                          reason="LaunchFailed", message=error[:1024]),
                                current=claim)

    async def _register(self, name: str) -> None:
        claim = self._current(name)
        node = self.store.node_for(claim) if claim else None
        if claim is None or node is None or is_true(claim, "Registered"):
            return
        self.store.write_through(await register(self.ctx.kube, claim, node, self.ctx.now()))
        node_name = node["metadata"]["name"]
        log.info("registered nodeclaim", NodeClaim=ref(name), Node=ref(node_name),
                 **{"provider-id": (claim.get("status") or {}).get("providerID", "")})
        self.ctx.metrics.nodes_created.labels(
            nodepool=_nodepool(claim), zone=((claim["metadata"].get("labels") or {}).get(wk.ZONE, ""))).inc()
        await self.health.record(claim, healthy=True)
        await self.ctx.event(claim, "Normal", "Registered", f"Status condition transitioned, Type: Registered, "
                                                            f"Status: True, Node: {node_name}")

    async def _readopt(self, name: str) -> None:
        """A Registered claim whose Node came back without what registration gave it (force-deleted, then
        registered again by its kubelet with ``karpenter.sh/unregistered:NoExecute``): sync it as registration
        does (labels, taints, finalizer, ownerReference, the unregistered taint removed), then mark it
        initialized again once nothing blocks that."""
        claim = self._current(name)
        node = self.store.node_for(claim) if claim else None
        if claim is None or node is None or node["metadata"].get("deletionTimestamp"):
            return
        missing = registration_drift(claim, node)
        if missing:
            self.store.write_through(await register(self.ctx.kube, claim, node, self.ctx.now()))
            log.info("synced node of a registered nodeclaim", NodeClaim=ref(name),
                     Node=ref(node["metadata"]["name"]), synced=missing)
            await self.ctx.event(claim, "Normal", "Registered",
                                 f"Node {node['metadata']['name']} registered again; synced: {'; '.join(missing)}")
            return  # initialized (below) on the next pass, from the synced Node
        if is_true(claim, "Initialized") and not initialization_blockers(claim, node):
            await self.ctx.kube.patch(NODE, node["metadata"]["name"],
                                      {"metadata": {"labels": {wk.INITIALIZED: "true"}}})
            log.info("re-initialized node of an initialized nodeclaim", NodeClaim=ref(name),
                     Node=ref(node["metadata"]["name"]))

    async def _initialize(self, name: str) -> None:
        claim = self._current(name)
        node = self.store.node_for(claim) if claim else None
        if claim is None or node is None or is_true(claim, "Initialized"):
            return
        stored = await initialize(self.ctx.kube, claim, node, self.ctx.now())
        if stored is None:
            return
        self.store.write_through(stored)
        node_name = node["metadata"]["name"]
        log.info("initialized nodeclaim", NodeClaim=ref(name), Node=ref(node_name),
                 allocatable=(node.get("status") or {}).get("allocatable") or {},
                 **{"provider-id": (claim.get("status") or {}).get("providerID", "")})
        await self.ctx.event(claim, "Normal", "Initialized", f"Status condition transitioned, Type: Initialized, "
                                                             f"Status: True, Node: {node_name}")

    async def _delete_for_timeout(self, name: str, phase: str, limit: float) -> None:
        claim = self._current(name)
        if claim is None:
            return
        if phase == "launch" and (claim.get("status") or {}).get("providerID"):
            return
        if phase == "registration" and is_true(claim, "Registered"):
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
