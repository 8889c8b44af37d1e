"""Pod events: stamp ``status.lastPodEventTime`` on a NodeClaim when a pod binds to, finishes on or leaves its node.

Which pod changes count and the dedupe window (Karpenter: 10 s) are decided by
``lifecycle.pod_events.PodEventStamper``, the same one the simulator uses; this
controller feeds it the store's pod changes and writes the stamps it returns.
"""

from __future__ import annotations

from typing import Any

from reconciler.controllers.runtime.context import ControllerContext, ControllerLog, Wakeup, ref
from reconciler.kube.api import NODECLAIM, ApiError, NotFoundError
from reconciler.lifecycle.pod_events import PodEventStamper
from reconciler.model.meta import format_time
from reconciler.state.store import StateStore

log = ControllerLog("nodeclaim.podevents")


class PodEventsController:
    def __init__(self, ctx: ControllerContext, store: StateStore) -> None:
        self.ctx = ctx
        self.store = store
        self.wake = Wakeup()
        self.stamper = PodEventStamper(ctx.timings.pod_event_dedupe)
        store.subscribe(self._on_change)

    def _on_change(self, kind: str, manifest: dict[str, Any], deleted: bool) -> None:
        if kind == "Pod" and self.stamper.observe(manifest, deleted, self.ctx.now()):
            self.wake.set()

    async def run(self) -> None:
        while True:
            await self.wake.wait(self.ctx.timings.pod_event_dedupe)
            async with self.ctx.reconciling():
                await self.flush()

    def _live_claim(self, node_name: str) -> str | None:
        node = self.store.get("Node", node_name)
        claim = self.store.nodeclaim_for_node(node) if node else None
        if claim is None or claim["metadata"].get("deletionTimestamp"):
            return None
        return str(claim["metadata"]["name"])

    async def flush(self) -> list[str]:
        """Write the stamps that are due (see ``PodEventStamper``); returns the claims written."""
        written = []
        for stamp in self.stamper.due(self.ctx.now(), self._live_claim):
            try:
                patch = {"status": {"lastPodEventTime": format_time(stamp.at)}}
                await self.ctx.kube.patch(NODECLAIM, stamp.nodeclaim, patch, subresource="status")
            except NotFoundError:
                self.stamper.written(stamp)  # the claim is gone: nothing left to stamp
                continue
            except ApiError as err:  # tried again on the next flush
                log.warning("recording pod event time failed", NodeClaim=ref(stamp.nodeclaim), error=str(err))
                continue
            self.stamper.written(stamp)
            written.append(stamp.nodeclaim)
        return written
