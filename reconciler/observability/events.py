"""Kubernetes events: core/v1 Events with client-go's aggregation (a repeat bumps ``count``) and a
per-object token bucket; recording never fails the caller."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

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
    ``refill_every``) as client-go does. Failures are logged, never raised: events are best effort."""

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
    ) -> None:
        self.kube = kube
        self.component = component
        self.instance = instance or socket.gethostname()
        self._clock = clock or (lambda: datetime.now(UTC))
        self._burst = burst
        self._refill_every = refill_every
        self._window = timedelta(seconds=aggregation_window)
        self._aggregates: dict[tuple[str, ...], _Aggregate] = {}
        self._buckets: dict[tuple[str, str, str], _Bucket] = {}
        self._sequence = 0
        self.dropped = 0

    async def record(self, involved: Manifest, event_type: EventType, reason: str, message: str) -> None:
        now = self._clock()
        metadata = involved.get("metadata") or {}
        subject = (str(involved.get("kind", "")), str(metadata.get("namespace") or ""), str(metadata.get("name", "")))
        key = (*subject, str(metadata.get("uid", "")), event_type, reason, message)
        self._forget_stale(now)
        try:
            existing = self._aggregates.get(key)
            if existing is not None and now - existing.last_seen < self._window:
                await self._bump(existing, now)
                return
            if not self._take_token(subject, now):
                self.dropped += 1
                return
            self._aggregates[key] = await self._create(involved, event_type, reason, message[:1024], now)
        except ApiError as error:
            logging.getLogger(__name__).warning("recording event %s failed: %s", reason, error)

    def _forget_stale(self, now: datetime) -> None:
        """Bound memory: drop aggregates past their window and buckets that have refilled."""
        if len(self._aggregates) + len(self._buckets) < 4096:
            return
        self._aggregates = {k: v for k, v in self._aggregates.items() if now - v.last_seen < self._window}
        full = timedelta(seconds=self._burst * self._refill_every)
        self._buckets = {k: v for k, v in self._buckets.items() if now - v.refilled_at < full}

    def _take_token(self, subject: tuple[str, str, str], now: datetime) -> bool:
        bucket = self._buckets.setdefault(subject, _Bucket(float(self._burst), now))
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
            self._aggregates = {k: v for k, v in self._aggregates.items() if v is not aggregate}

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
