"""Per-object retry backoff: client-go's ``ItemExponentialFailureRateLimiter``, with jitter.

An object whose reconciliation failed (any error: a 5xx, a 409 that outlasted the conflict retries, a dropped
connection, a refused eviction) is not tried again before ``base * 2**(failures-1)`` seconds, at most
``maximum``, each delay lengthened by up to ``jitter`` (20 %) so objects that failed together do not retry
together. A success forgets the object. Karpenter's values: its controllers retry an object after 1 s
doubling to 1 min (``nodeclaim.lifecycle``, ``node.termination``); its eviction queue after 100 ms doubling
to 10 s.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True, frozen=True)
class ItemBackoff:
    base: float = 1.0
    maximum: float = 60.0
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if not 0 < self.base <= self.maximum or self.jitter < 0:
            raise ValueError(f"backoff: need 0 < base <= maximum and jitter >= 0, got {self}")

    def base_delay(self, failures: int) -> float:
        """The delay after the ``failures``-th failure in a row, before jitter."""
        return min(self.maximum, self.base * 2 ** min(max(0, failures - 1), 62))

    def delay(self, failures: int, rng: random.Random) -> float:
        return self.base_delay(failures) * (1.0 + self.jitter * rng.random())


CONTROLLER_BACKOFF = ItemBackoff(1.0, 60.0)  # Karpenter's nodeclaim.lifecycle / node.termination
EVICTION_BACKOFF = ItemBackoff(0.1, 10.0)  # Karpenter's eviction queue


class Backoffs:
    """Which objects are backing off and until when (on ``clock``, a monotonic clock)."""

    def __init__(self, policy: ItemBackoff, clock: Callable[[], float], *, seed: int | None = None) -> None:
        self.policy = policy
        self._clock = clock
        self._rng = random.Random(seed)
        self._failures: dict[str, int] = {}
        self._retry_at: dict[str, float] = {}

    def failed(self, key: str) -> tuple[int, float]:
        """Count a failure of ``key``; returns (failures in a row, seconds until it may run again)."""
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        delay = self.policy.delay(failures, self._rng)
        self._retry_at[key] = self._clock() + delay
        return failures, delay

    def defer(self, key: str, seconds: float) -> None:
        """Not before ``seconds`` from now, without counting a failure (a poll: "look again in 5 s")."""
        self._retry_at[key] = self._clock() + seconds

    def forget(self, key: str) -> None:
        self._failures.pop(key, None)
        self._retry_at.pop(key, None)

    def failures(self, key: str) -> int:
        return self._failures.get(key, 0)

    def ready(self, key: str) -> bool:
        return self._retry_at.get(key, 0.0) <= self._clock()

    def next_due(self) -> float | None:
        """Seconds until the earliest backing-off object may run again (None: none is waiting)."""
        now = self._clock()
        waiting = [at - now for at in self._retry_at.values() if at > now]
        return max(0.0, min(waiting)) if waiting else None


class Retries(Backoffs):
    """``Backoffs`` for a loop that writes object after object: each failure is one structured warning line
    (the error, the attempt, when the object is tried again), and the loop skips the object until then."""

    def __init__(self, log: Any, clock: Callable[[], float], policy: ItemBackoff = CONTROLLER_BACKOFF) -> None:
        super().__init__(policy, clock)
        self._log = log

    def failure(self, key: str, error: BaseException, message: str, **facts: Any) -> None:
        attempt, delay = self.failed(key)
        self._log.warning(message, error=str(error)[:512], errorType=type(error).__name__, attempt=attempt,
                          retryIn=round(delay, 3), **facts)
