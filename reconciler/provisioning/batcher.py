"""The provisioning batch window as a pure state machine (no clock: callers pass ``now``).

The window opens on the first trigger (an unschedulable pod, or a node being
disrupted) and closes ``idle`` seconds after the last trigger that brought a
*new* UID, or ``maximum`` seconds after it opened, whichever comes first
(Karpenter's BATCH_IDLE_DURATION / BATCH_MAX_DURATION, 1 s / 10 s).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from reconciler.settings import Settings


@dataclass(slots=True)
class Batcher:
    idle: float = 1.0
    maximum: float = 10.0
    opened_at: datetime | None = None
    last_new_trigger: datetime | None = None
    seen: set[str] = field(default_factory=set)

    @classmethod
    def from_settings(cls, settings: Settings) -> Batcher:
        return cls(idle=settings.batch_idle_duration, maximum=settings.batch_max_duration)

    @property
    def is_open(self) -> bool:
        return self.opened_at is not None

    def trigger(self, uid: str, now: datetime) -> None:
        """Record a trigger; only a UID not seen in this window extends the idle timer."""
        if self.opened_at is None:
            self.opened_at = now
        if uid not in self.seen:
            self.seen.add(uid)
            self.last_new_trigger = now

    def closes_at(self) -> datetime | None:
        """When the open window closes (None when no window is open)."""
        if self.opened_at is None or self.last_new_trigger is None:
            return None
        idle_end = self.last_new_trigger + timedelta(seconds=self.idle)
        max_end = self.opened_at + timedelta(seconds=self.maximum)
        return min(idle_end, max_end)

    def ready(self, now: datetime) -> bool:
        closes = self.closes_at()
        return closes is not None and now >= closes

    def close(self) -> set[str]:
        """End the window; returns the UIDs it collected."""
        uids = self.seen
        self.opened_at = None
        self.last_new_trigger = None
        self.seen = set()
        return uids
