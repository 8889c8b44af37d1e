"""Pod events: stamp ``status.lastPodEventTime`` on a NodeClaim when a pod binds to, finishes on or leaves its node.

Consolidation waits ``consolidateAfter`` after the last such event, so a node
that keeps receiving pods is left alone. DaemonSet pods don't count, and a claim
is written at most once per ``pod_event_dedupe`` seconds (Karpenter: 10 s).
"""

from __future__ import annotations

from typing import Any

from reconciler.controllers.cluster import StateStore
from reconciler.controllers.runtime import ControllerContext, ControllerLog, Wakeup, ref
from reconciler.kube.api import NODECLAIM, ApiError, NotFoundError
from reconciler.model.meta import format_time, owned_by_daemonset

log = ControllerLog("nodeclaim.podevents")
PodFacts = tuple[str, bool, bool]  # (node name, terminal, terminating)


def _facts(pod: dict[str, Any]) -> PodFacts:
    spec, status, metadata = pod.get("spec") or {}, pod.get("status") or {}, pod.get("metadata") or {}
    return (
        str(spec.get("nodeName") or ""),
        status.get("phase") in ("Succeeded", "Failed"),
        bool(metadata.get("deletionTimestamp")),
    )


def _is_daemon_pod(pod: dict[str, Any]) -> bool:
    return owned_by_daemonset(pod.get("metadata"))


class PodEventsController:
    def __init__(self, ctx: ControllerContext, store: StateStore) -> None:
        self.ctx = ctx
        self.store = store
        self.wake = Wakeup()
        self._known: dict[str, PodFacts] = {}
        self._dirty_nodes: set[str] = set()
        self._stamped: dict[str, float] = {}  # claim -> monotonic time of our last write
        store.subscribe(self._on_change)

    def _on_change(self, kind: str, manifest: dict[str, Any], deleted: bool) -> None:
        if kind != "Pod" or _is_daemon_pod(manifest):
            return
        metadata = manifest.get("metadata") or {}
        key = f"{metadata.get('namespace') or 'default'}/{metadata.get('name')}"
        before = self._known.pop(key, None) if deleted else self._known.get(key)
        after = None if deleted else _facts(manifest)
        if not deleted:
            self._known[key] = after  # type: ignore[assignment]
        if before == after:
            return
        node = (after or before or ("", False, False))[0]
        if node:
            self._dirty_nodes.add(node)
            self.wake.set()

    async def run(self) -> None:
        while True:
            await self.wake.wait(self.ctx.timings.pod_event_dedupe)
            async with self.ctx.reconciling():
                await self.flush()

    async def flush(self) -> list[str]:
        """Write the event time on the claims of nodes whose pods changed (deduplicated); returns them."""
        written = []
        now_mono = self.ctx.clock.monotonic()
        pending, self._dirty_nodes = self._dirty_nodes, set()
        for node_name in sorted(pending):
            node = self.store.get("Node", node_name)
            claim = self.store.nodeclaim_for_node(node) if node else None
            if claim is None or claim["metadata"].get("deletionTimestamp"):
                continue
            name = claim["metadata"]["name"]
            last = self._stamped.get(name)
            if last is not None and now_mono - last < self.ctx.timings.pod_event_dedupe:
                self._dirty_nodes.add(node_name)  # write it when the dedupe window ends
                continue
            try:
                patch = {"status": {"lastPodEventTime": format_time(self.ctx.now())}}
                await self.ctx.kube.patch(NODECLAIM, name, patch, subresource="status")
            except (NotFoundError, ApiError) as err:
                log.warning("recording pod event time failed", NodeClaim=ref(name), error=str(err))
                continue
            self._stamped[name] = now_mono
            written.append(name)
        return written
