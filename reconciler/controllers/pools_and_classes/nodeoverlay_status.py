"""NodeOverlay status (gate ``NodeOverlay``): each overlay's ``ValidationSucceeded`` and ``Ready`` conditions.

Karpenter's nodeoverlay controller evaluates every overlay against every NodePool's instance types
(``reconciler.scheduling.overlay_evaluation.evaluate``) whenever an overlay, NodePool or EC2NodeClass
changes, and at least every few minutes here (instance types and prices move too). An overlay that fails
runtime validation is ``False/RuntimeValidation``; one that conflicts with another of the same weight is
``False/Conflict`` and is not applied; the others are ``True``. The scheduler applies the same evaluation on every pass
(``lifecycle.nodepool_types``), so status and decisions never disagree for long.
"""

from __future__ import annotations

from typing import Any

from reconciler.cloud.overlay import CONDITION, Overlay, OverlayBook, publish
from reconciler.controllers.runtime.context import ControllerContext, ControllerLog, Wakeup, ref
from reconciler.kube.api import NODEOVERLAY, ApiError, NotFoundError
from reconciler.kube.retry import modify
from reconciler.lifecycle.nodepool_types import instance_types_by_nodepool
from reconciler.model.conditions import make, with_root
from reconciler.model.meta import format_time
from reconciler.scheduling.overlay_evaluation import overlaid
from reconciler.state.store import StateStore

log = ControllerLog("nodeoverlay")
REFRESH_SECONDS = 300.0


def desired_conditions(manifest: dict[str, Any], book: OverlayBook, stamp: str) -> list[dict[str, Any]]:
    ok, reason, message = book.condition(Overlay.from_manifest(manifest))
    generation = (manifest.get("metadata") or {}).get("generation")
    validation = make(CONDITION, "True" if ok else "False", stamp, reason, message)
    conditions = with_root([validation], (CONDITION,), stamp)
    for condition in conditions:
        if generation is not None:
            condition["observedGeneration"] = generation
    return conditions


def _view(conditions: list[dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
    return {str(c.get("type")): (c.get("status"), c.get("reason"), c.get("message"), c.get("observedGeneration"))
            for c in conditions}


class NodeOverlayController:
    def __init__(self, ctx: ControllerContext, store: StateStore) -> None:
        self.ctx = ctx
        self.store = store
        self.wake = Wakeup()
        store.subscribe(self._on_change)

    def _on_change(self, kind: str, manifest: dict[str, Any], deleted: bool) -> None:
        if kind in ("NodeOverlay", "NodePool", "EC2NodeClass"):
            self.wake.set()

    async def run(self) -> None:
        while True:
            async with self.ctx.reconciling():
                await self.reconcile_once()
            await self.wake.wait(REFRESH_SECONDS)

    async def reconcile_once(self) -> OverlayBook:
        state = self.store.snapshot()
        types = await instance_types_by_nodepool(self.ctx.cloud, state)
        _, book = overlaid(state, types)
        publish(self.ctx.cloud, book)
        stamp = format_time(self.ctx.now())
        for manifest in list(state.nodeoverlays.values()):
            name = str(manifest["metadata"]["name"])
            wanted = desired_conditions(manifest, book, stamp)
            current = (manifest.get("status") or {}).get("conditions") or []
            if _view(current) == _view(wanted):
                continue

            def edit(stored: dict[str, Any], wanted: list[dict[str, Any]] = wanted) -> dict[str, Any] | None:
                before = (stored.get("status") or {}).get("conditions") or []
                if _view(before) == _view(wanted):
                    return None
                stored["status"] = {**(stored.get("status") or {}), "conditions": wanted}
                return stored

            try:
                await modify(self.ctx.kube, NODEOVERLAY, name, edit, subresource="status")
            except (NotFoundError, ApiError) as err:
                log.warning("updating NodeOverlay status failed", NodeOverlay=ref(name), error=str(err))
                continue
            status = next(c for c in wanted if c["type"] == CONDITION)
            log.info("nodeoverlay validated", NodeOverlay=ref(name), status=status["status"],
                     reason=status["reason"], message=status["message"])
            if status["status"] != "True":
                await self.ctx.event(manifest, "Warning", str(status["reason"]), str(status["message"]))
        return book
