"""Kubernetes events: core/v1 Events with client-go's aggregation (a repeat bumps ``count``), a
per-object token bucket and optional deduplication; recording never fails the caller."""

from __future__ import annotations

import logging
import socket
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from reconciler.kube.api import EVENT, ApiError, KubeAPI, Manifest, NotFoundError
from reconciler.kube.semantics import format_time

EventType = Literal["Normal", "Warning"]


@dataclass(slots=True)
class _Aggregate:
    namespace: str
    name: str
    count: int
    last_seen: datetime


@dataclass(slots=True)
class _Bucket:
    tokens: float
    refilled_at: datetime


class EventRecorder:
    """Record core/v1 Events about objects. Identical events within ``aggregation_window`` bump the
    existing Event's ``count``; each object gets a token bucket (``burst`` events, then one per
    ``refill_every``) as client-go does. Failures are logged, never raised: events are best effort.

    ``record(..., dedupe=seconds)`` is Karpenter's deduplication, for explanations a controller
    repeats every pass: the same (object, type, reason, message) goes out at most once per
    ``dedupe`` seconds and a changed message at once. ``dedupe_key`` replaces the message in that
    comparison (for messages that carry a countdown). Memory is bounded: what went out, the
    aggregates and the buckets are each an LRU of ``max_entries`` keys."""

    def __init__(
        self,
        kube: KubeAPI,
        *,
        component: str = "karpenter",
        instance: str | None = None,
        clock: Callable[[], datetime] | None = None,
        burst: int = 25,
        refill_every: float = 300.0,
        aggregation_window: float = 600.0,
        max_entries: int = 50_000,  # above the (object, reason) pairs of a 5,000-node cluster
    ) -> None:
        self.kube = kube
        self.component = component
        self.instance = instance or socket.gethostname()
        self._clock = clock or (lambda: datetime.now(UTC))
        self._burst = burst
        self._refill_every = refill_every
        self._window = timedelta(seconds=aggregation_window)
        self._max_entries = max_entries
        self._aggregates: OrderedDict[tuple[str, ...], _Aggregate] = OrderedDict()
        self._sent: OrderedDict[tuple[str, ...], datetime] = OrderedDict()  # dedupe key -> when it went out
        self._buckets: OrderedDict[tuple[str, ...], _Bucket] = OrderedDict()
        self._sequence = 0
        self.dropped = 0  # refused by an object's token bucket
        self.deduplicated = 0  # suppressed as a repeat within its dedupe period

    async def record(
        self,
        involved: Manifest,
        event_type: EventType,
        reason: str,
        message: str,
        *,
        dedupe: float | None = None,
        dedupe_key: str | None = None,
        limiter: Callable[[], bool] | None = None,
    ) -> None:
        """``limiter``: a rate limit shared by a family of events (e.g. a ``TokenBucket.try_accept`` for every
        pod's Nominated event, as Karpenter's): an event it refuses is dropped, not remembered as sent."""
        now = self._clock()
        metadata = involved.get("metadata") or {}
        subject = (str(involved.get("kind", "")), str(metadata.get("namespace") or ""), str(metadata.get("name", "")))
        identity = (*subject, str(metadata.get("uid", "")), event_type, reason)
        key = (*identity, message)
        sent_key = (*identity, message if dedupe_key is None else f"key:{dedupe_key}") if dedupe else None
        if sent_key is not None and self._sent_within(sent_key, now, timedelta(seconds=dedupe or 0.0)):
            self.deduplicated += 1
            return
        if limiter is not None and not limiter():
            self.dropped += 1
            return
        try:
            existing = self._aggregates.get(key)
            if existing is not None and now - existing.last_seen < self._window:
                self._aggregates.move_to_end(key)
                await self._bump(existing, now)
            elif self._take_token(subject, now):
                self._remember(self._aggregates, key, await self._create(involved, event_type, reason,
                                                                          message[:1024], now))
            else:
                self.dropped += 1
                return
        except ApiError as error:
            logging.getLogger(__name__).warning("recording event %s failed: %s", reason, error)
            return
        if sent_key is not None:
            self._remember(self._sent, sent_key, now)

    def _sent_within(self, key: tuple[str, ...], now: datetime, period: timedelta) -> bool:
        sent_at = self._sent.get(key)
        if sent_at is None:
            return False
        self._sent.move_to_end(key)
        return now - sent_at < period

    def _remember(self, cache: OrderedDict[tuple[str, ...], Any], key: tuple[str, ...], value: Any) -> None:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > self._max_entries:
            cache.popitem(last=False)

    def _take_token(self, subject: tuple[str, str, str], now: datetime) -> bool:
        bucket = self._buckets.get(subject)
        if bucket is None:
            bucket = _Bucket(float(self._burst), now)
        self._remember(self._buckets, subject, bucket)
        elapsed = (now - bucket.refilled_at).total_seconds()
        bucket.tokens = min(float(self._burst), bucket.tokens + elapsed / self._refill_every)
        bucket.refilled_at = now
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True

    async def _bump(self, aggregate: _Aggregate, now: datetime) -> None:
        aggregate.count += 1
        aggregate.last_seen = now
        patch = {"count": aggregate.count, "lastTimestamp": format_time(now)}
        try:
            await self.kube.patch(EVENT, aggregate.name, patch, aggregate.namespace)
        except NotFoundError:
            self._aggregates = OrderedDict((k, v) for k, v in self._aggregates.items() if v is not aggregate)

    async def _create(
        self, involved: Manifest, event_type: EventType, reason: str, message: str, now: datetime
    ) -> _Aggregate:
        metadata = involved.get("metadata") or {}
        namespace = metadata.get("namespace") or "default"  # cluster-scoped objects: events go to default
        self._sequence += 1
        name = f"{metadata.get('name', 'unknown')}.{int(now.timestamp() * 1e9):x}{self._sequence:x}"
        reference = {
            "apiVersion": involved.get("apiVersion"),
            "kind": involved.get("kind"),
            "name": metadata.get("name"),
            "namespace": metadata.get("namespace"),
            "uid": metadata.get("uid"),
        }
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {k: v for k, v in reference.items() if v},
            "type": event_type,
            "reason": reason,
            "message": message,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
            "firstTimestamp": format_time(now),
            "lastTimestamp": format_time(now),
            "count": 1,
        }
        await self.kube.create(event)
        return _Aggregate(namespace, name, 1, now)
