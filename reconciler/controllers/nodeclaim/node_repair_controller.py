"""Node auto repair (``node.health``, feature gate ``NodeRepair``): replace nodes unhealthy for too long.

The decisions are ``lifecycle.repair.decide_repairs`` over the informer cache. A repair stamps
``karpenter.sh/nodeclaim-termination-timestamp`` with now (so the termination finalizer deletes the
pods at once instead of evicting them: no drain) and deletes the NodeClaim; it is counted in
``karpenter_nodeclaims_disrupted_total{reason="unhealthy"}`` and
``karpenter_nodeclaims_unhealthy_disrupted_total`` (condition, nodepool, capacity type, image ID), logged
and recorded as an event. A repair held back by the 20 % guard is a ``NodeRepairBlocked`` warning on the
Node (once per 15 minutes). The loop wakes on Node changes and when the next toleration runs out.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from reconciler.controllers.runtime.context import ControllerContext, ControllerLog, Wakeup, ref, snake_case
from reconciler.kube.api import NotFoundError
from reconciler.lifecycle.repair import RepairDecision, decide_repairs, delete_forcefully
from reconciler.model import labels as wk
from reconciler.model.meta import format_time
from reconciler.state.store import StateStore

log = ControllerLog("node.health")
MAX_WAIT = 60.0  # seconds between passes when nothing is due sooner
BLOCKED_EVENT_DEDUPE = 15 * 60.0


class HealthController:
    def __init__(self, ctx: ControllerContext, store: StateStore) -> None:
        self.ctx = ctx
        self.store = store
        self.wake = Wakeup()
        store.subscribe(self._on_change)

    def _on_change(self, kind: str, manifest: dict[str, Any], deleted: bool) -> None:
        if kind == "Node" and not deleted:
            self.wake.set()

    async def run(self) -> None:
        while True:
            async with self.ctx.reconciling():
                decisions = await self.reconcile_once()
            now = self.ctx.now()
            later = [(d.at - now).total_seconds() for d in decisions if d.action != "repair"]
            await self.wake.wait(max(0.0, min([MAX_WAIT, *later])))

    def decisions(self, now: datetime) -> list[RepairDecision]:
        pairs = []
        nodes = self.store.nodes()
        for node in nodes:
            claim = self.store.nodeclaim_for_node(node)
            if claim is not None:
                pairs.append((claim, node))
        return decide_repairs(pairs, nodes, now)

    async def reconcile_once(self) -> list[RepairDecision]:
        now = self.ctx.now()
        decisions = self.decisions(now)
        for decision in decisions:
            if decision.action == "repair":
                await self._repair(decision, now)
            elif decision.action == "blocked":
                node = self.store.get("Node", decision.node)
                log.info("node repair blocked", Node=ref(decision.node), NodeClaim=ref(decision.nodeclaim),
                         NodePool=ref(decision.nodepool), reason=decision.message)
                await self.ctx.event(node, "Warning", "NodeRepairBlocked", decision.message,
                                     dedupe=BLOCKED_EVENT_DEDUPE)
        return decisions

    async def _repair(self, decision: RepairDecision, now: datetime) -> None:
        claim = self.store.get("NodeClaim", decision.nodeclaim)
        node = self.store.get("Node", decision.node)
        if claim is None:
            return
        try:
            await delete_forcefully(self.ctx.kube, claim, now)
        except NotFoundError:
            return
        labels = (node or claim).get("metadata", {}).get("labels") or {}
        pool, capacity_type = labels.get(wk.NODEPOOL, ""), labels.get(wk.CAPACITY_TYPE, "")
        metrics = self.ctx.metrics
        metrics.nodeclaims_disrupted.labels(reason="unhealthy", nodepool=pool, capacity_type=capacity_type).inc()
        metrics.nodeclaims_unhealthy_disrupted.labels(
            condition=snake_case(decision.unhealthy.condition), nodepool=pool, capacity_type=capacity_type,
            image_id=str((claim.get("status") or {}).get("imageID") or ""),
        ).inc()
        log.info("deleting unhealthy node", Node=ref(decision.node), NodeClaim=ref(decision.nodeclaim),
                 NodePool=ref(pool), condition=decision.unhealthy.condition, status=decision.unhealthy.status,
                 since=format_time(decision.unhealthy.since))
        await self.ctx.event(claim, "Warning", "NodeRepair",
                             f"Deleting the NodeClaim without a drain: its node is {decision.unhealthy.describe()}")
