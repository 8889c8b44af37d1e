"""The in-memory cluster's event history and watch streams.

One cluster-wide, monotonically increasing revision (etcd's), a bounded history of changes
that watches replay from a resourceVersion (410 Gone once compacted away), selector-aware
event translation and optional bookmarks.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field

from reconciler.kube.api import ApiError, GoneError, Kind, Manifest, WatchEvent, WatchEventType
from reconciler.kube.semantics import BadRequestError, clone

Matcher = Callable[[Manifest], bool]


@dataclass(slots=True)
class Change:
    resource_version: int
    kind: Kind
    type: WatchEventType
    object: Manifest
    previous: Manifest | None  # the state before a MODIFIED, to translate it for selector watches


@dataclass(slots=True, eq=False)
class _Watcher:
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    ending: ApiError | None = None
    closed: bool = False


class EventHistory:
    """Revisions, the replayable change log and the open watches."""

    def __init__(self, limit: int) -> None:
        self.revision = 0
        self._limit = limit
        self._log: list[Change] = []
        self._oldest_replayable = 0  # watches from a resourceVersion below this get 410
        self._watchers: set[_Watcher] = set()

    def next_revision(self) -> int:
        self.revision += 1
        return self.revision

    def append(self, change: Change) -> None:
        self._log.append(change)
        if len(self._log) > 2 * self._limit:
            dropped = len(self._log) - self._limit
            self._oldest_replayable = self._log[dropped].resource_version
            del self._log[:dropped]
        for watcher in self._watchers:
            watcher.wakeup.set()

    def compact(self) -> None:
        self._log.clear()
        self._oldest_replayable = self.revision + 1

    def break_watches(self, *, gone: bool) -> None:
        for watcher in self._watchers:
            watcher.ending = GoneError("too old resource version (scripted)") if gone else None
            watcher.closed = True
            watcher.wakeup.set()

    def _check_replayable(self, cursor: int) -> None:
        if cursor + 1 < self._oldest_replayable:
            raise GoneError(f"too old resource version: {cursor} ({self._oldest_replayable - 1})")

    async def watch(
        self,
        kind: Kind,
        resource_version: str,
        matches: Matcher,
        current: Callable[[], Iterable[Manifest]],
        bookmark_interval: float | None,
    ) -> AsyncIterator[WatchEvent]:
        """Changes to ``kind`` after ``resource_version``; ``""``/``"0"`` first sends ``current()`` as ADDED."""
        watcher = _Watcher()
        self._watchers.add(watcher)
        try:
            if resource_version in ("", "0"):
                cursor = self.revision
                for obj in list(current()):
                    if matches(obj):
                        yield WatchEvent("ADDED", clone(obj))
            else:
                try:
                    cursor = int(resource_version)
                except ValueError:
                    raise BadRequestError(f"resourceVersion: {resource_version!r} is not valid") from None
            while True:
                self._check_replayable(cursor)
                start = bisect.bisect_right(self._log, cursor, key=lambda change: change.resource_version)
                pending = self._log[start:]
                if pending:
                    cursor = pending[-1].resource_version
                for change in pending:
                    if change.kind == kind:
                        event_type = _as_seen_through(change, matches)
                        if event_type:
                            yield WatchEvent(event_type, _as_sent(change, event_type))
                if watcher.closed:
                    if watcher.ending is not None:
                        raise watcher.ending
                    return
                if self.revision == cursor:
                    watcher.wakeup.clear()
                    try:
                        await asyncio.wait_for(watcher.wakeup.wait(), bookmark_interval)
                    except TimeoutError:
                        # Everything up to ``cursor`` has been delivered: safe to resume from it.
                        yield WatchEvent("BOOKMARK", _bookmark(kind, cursor))
        finally:
            self._watchers.discard(watcher)


def _bookmark(kind: Kind, resource_version: int) -> Manifest:
    return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": {"resourceVersion": str(resource_version)}}


def _as_sent(change: Change, event_type: WatchEventType) -> Manifest:
    """The object an event carries: an object leaving a selector's view is sent as it was before the change
    (the state that matched), with the change's resourceVersion, as the API server's watch cache does."""
    if event_type == "DELETED" and change.type == "MODIFIED" and change.previous is not None:
        before = clone(change.previous)
        before["metadata"] = {**before.get("metadata", {}), "resourceVersion": str(change.resource_version)}
        return before
    return clone(change.object)


def _as_seen_through(change: Change, matches: Matcher) -> WatchEventType | None:
    """How a selector-filtered watch reports a change: objects entering the selection are
    ADDED and objects leaving it are DELETED, as the API server does."""
    now = matches(change.object)
    if change.type != "MODIFIED" or change.previous is None:
        return change.type if now else None
    before = matches(change.previous)
    if now and before:
        return "MODIFIED"
    if now:
        return "ADDED"
    return "DELETED" if before else None
