"""Pod events: which pod changes stamp ``status.lastPodEventTime`` on which node's NodeClaim, and when.

Consolidation waits ``consolidateAfter`` after a NodeClaim's last pod event, so a node that keeps
receiving pods is left alone. A pod binding to, finishing on (Succeeded/Failed) or leaving (deleted or
terminating) a node is an event; DaemonSet pods are not (they follow the node). A claim is stamped at
most once per dedupe window (Karpenter: 10 s): an event inside the window is stamped when the window ends.

``PodEventStamper`` is pure: the caller feeds it pod changes with the time they happened and asks which
stamps are due; the live ``PodEventsController`` and the simulator both write what it returns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from reconciler.model.meta import owned_by_daemonset

DEFAULT_DEDUPE_SECONDS = 10.0


@dataclass(frozen=True)
class PodPlacement:
    """What about a pod counts for pod events: its node, and whether it finished or is terminating."""

    node: str
    terminal: bool
    terminating: bool

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> PodPlacement:
        spec, status, metadata = pod.get("spec") or {}, pod.get("status") or {}, pod.get("metadata") or {}
        return cls(str(spec.get("nodeName") or ""), status.get("phase") in ("Succeeded", "Failed"),
                   bool(metadata.get("deletionTimestamp")))


@dataclass(frozen=True)
class Stamp:
    """Write ``lastPodEventTime = at`` on ``nodeclaim`` (the claim of ``node``)."""

    node: str
    nodeclaim: str
    at: datetime


class PodEventStamper:
    """Pod changes in, due ``Stamp``s out; deduplicated per node over ``dedupe_seconds``.

    The result is the same whether stamps are asked for at once (live) or later (the simulator, between
    steps): an event inside the window of the previous stamp is due when that window ends."""

    def __init__(self, dedupe_seconds: float = DEFAULT_DEDUPE_SECONDS) -> None:
        self.window = timedelta(seconds=dedupe_seconds)
        self._known: dict[str, PodPlacement] = {}
        self._due: dict[str, datetime] = {}  # node -> when its pending stamp may be written (and its value)
        self._last: dict[str, datetime] = {}  # node -> its last stamp, written or owed

    def observe(self, pod: Mapping[str, Any], deleted: bool, now: datetime, *, counts: bool = True) -> str:
        """Record one pod change at ``now``; returns the node it makes due for a stamp ('' for none).
        ``counts=False`` only learns where the pod is (the simulator's starting objects, already running)."""
        if owned_by_daemonset(pod.get("metadata")):
            return ""
        metadata = pod.get("metadata") or {}
        key = f"{metadata.get('namespace') or 'default'}/{metadata.get('name')}"
        before = self._known.pop(key, None) if deleted else self._known.get(key)
        after = None if deleted else PodPlacement.of(pod)
        if after is not None:
            self._known[key] = after
        if before == after or not counts:
            return ""
        node = (after or before or PodPlacement("", False, False)).node
        if not node:
            return ""
        pending = self._due.get(node)
        if pending is not None and pending < now:
            # That stamp fell due before this event: the live controller wrote it at once (events at the
            # same instant share one stamp).
            self._last[node] = pending
            pending = None
        if pending is None:
            last = self._last.get(node)
            self._due[node] = now if last is None or now >= last + self.window else last + self.window
        return node

    def due(self, now: datetime, nodeclaim_of: Callable[[str], str | None]) -> list[Stamp]:
        """Stamps to write at ``now``, by node name; ``nodeclaim_of`` names a node's live (not deleting)
        claim or None, and a node without one drops its stamp. Call ``written`` for each one written."""
        stamps = []
        for node in sorted(self._due):
            at = self._due[node]
            if at > now:
                continue  # inside the dedupe window of the node's last stamp
            claim = nodeclaim_of(node)
            if claim is None:
                del self._due[node]
                continue
            stamps.append(Stamp(node, claim, at))
        return stamps

    def written(self, stamp: Stamp) -> None:
        self._last[stamp.node] = stamp.at
        if self._due.get(stamp.node) == stamp.at:
            del self._due[stamp.node]

    def next_due(self) -> datetime | None:
        """When the earliest pending stamp falls due (None when nothing is pending)."""
        return min(self._due.values(), default=None)
