"""Static NodePools (``static.provisioning`` + ``static.deprovisioning``, feature gate ``StaticCapacity``).

Each pass takes the informer cache's snapshot and the pure ``provisioning.static.plan_static``: missing
replicas become NodeClaims (created here, launched by the lifecycle controller like any other, counted in
``karpenter_nodeclaims_created_total{reason="provisioned"}``), surplus ones are deleted (the termination
finalizer drains them). Why a pool got fewer nodes than asked (``limits.nodes``, no instance type) is
logged and recorded on the NodePool. The loop wakes on NodePool and NodeClaim changes, and every minute.
"""

from __future__ import annotations

from typing import Any

from reconciler.controllers.runtime.context import (
    ControllerContext,
    ControllerLog,
    NameGenerator,
    Wakeup,
    ref,
    summarize,
)
from reconciler.kube.api import NODECLAIM, ApiError, ConflictError, NotFoundError
from reconciler.lifecycle.nodepool_types import instance_types_by_nodepool
from reconciler.provisioning.nodeclaim import PlannedNodeClaim
from reconciler.provisioning.static import StaticPlan, plan_static, static_pools
from reconciler.state.store import StateStore

log = ControllerLog("static.provisioning")
RESYNC = 60.0  # Karpenter requeues static NodePools every minute


class StaticCapacityController:
    def __init__(self, ctx: ControllerContext, store: StateStore, names: NameGenerator) -> None:
        self.ctx = ctx
        self.store = store
        self.names = names
        self.wake = Wakeup()
        store.subscribe(self._on_change)

    def _on_change(self, kind: str, manifest: dict[str, Any], deleted: bool) -> None:
        if kind in ("NodePool", "NodeClaim"):
            self.wake.set()

    async def run(self) -> None:
        while True:
            async with self.ctx.reconciling():
                await self.reconcile_once()
            await self.wake.wait(RESYNC)

    async def reconcile_once(self) -> StaticPlan:
        state = self.store.snapshot()
        if not static_pools(state):
            return StaticPlan()
        now = self.ctx.now()
        types = await instance_types_by_nodepool(self.ctx.cloud, state)
        plan = plan_static(state, types, self.ctx.settings, now, self.names)
        for pool, note in plan.notes:
            log.info("static nodepool not at its replica count", NodePool=ref(pool), reason=note)
            await self.ctx.event(self.store.get("NodePool", pool), "Warning", "StaticCapacityBlocked", note,
                                 dedupe=self.ctx.timings.event_dedupe)
        if plan.create:
            log.info("provisioning nodeclaims to satisfy replica count", NodePool=ref(plan.create[0].nodepool),
                     **{"provision-count": len(plan.create)})
        for planned in plan.create:
            await self._create(planned)
        if plan.delete:
            log.info("deprovisioning nodeclaims to satisfy replica count", NodeClaims=summarize(plan.delete),
                     **{"deprovision-count": len(plan.delete)})
        for name in plan.delete:
            claim = self.store.get("NodeClaim", name)
            try:
                await self.ctx.kube.delete(NODECLAIM, name)
            except NotFoundError:
                continue
            log.info("deleting nodeclaim", NodeClaim=ref(name))
            await self.ctx.event(claim, "Normal", "DisruptionTerminating",
                                 "Deleting the NodeClaim: its static NodePool has more nodes than its replicas")
        return plan

    async def _create(self, planned: PlannedNodeClaim) -> None:
        manifest = planned.manifest()
        try:
            created = await self.ctx.kube.create(manifest)
        except ConflictError:
            return  # the name was taken meanwhile: the next pass plans it again
        except ApiError as err:
            log.error("creating nodeclaim failed", NodeClaim=ref(planned.name), error=str(err))
            return
        self.store.write_through(created)
        log.info("created nodeclaim", NodePool=ref(planned.nodepool), NodeClaim=ref(planned.name),
                 **{"instance-types": summarize(list(planned.instance_type_options))})
        self.ctx.metrics.nodeclaims_created.labels(reason="provisioned", nodepool=planned.nodepool,
                                                   min_values_relaxed="false").inc()
        await self.ctx.event(created, "Normal", "Created",
                             f"created for static NodePool {planned.nodepool}; instance types "
                             f"{summarize(list(planned.instance_type_options))}")
