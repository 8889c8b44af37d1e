"""Client-side rate limiting and Retry-After handling for API-server calls (client-go's behaviour).

``TokenBucket`` is client-go's ``flowcontrol.NewTokenBucketRateLimiter(qps, burst)``: up to ``burst`` calls
at once, then ``qps`` per second. Karpenter sizes its client with KUBE_CLIENT_QPS / KUBE_CLIENT_BURST (200 /
300); the same bucket with ``try_accept`` (never waiting) is how Karpenter rate-limits its Nominated events.

``retry_after_delay`` reads an answer the way client-go's ``checkWait`` does: a 429 or 5xx that carries a
``Retry-After`` header asks the client to come back after that many seconds; without the header it is an
error like any other.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping

# client-go's rest.Request retries a throttled call at most this many times (maxRetries).
MAX_RETRY_AFTER_ATTEMPTS = 10
# A Retry-After longer than this is waited for only this long before asking again.
MAX_RETRY_AFTER_SECONDS = 10.0


class TokenBucket:
    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"rate limit: need qps > 0 and burst >= 1, got {qps:g}/{burst}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._updated = clock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._updated) * self.qps)
        self._updated = now

    def try_accept(self) -> bool:
        """Take a token if one is there now (never waits)."""
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    async def acquire(self) -> None:
        """Wait for a token. Callers queue by reservation: each waits for its own token, none starves."""
        self._refill()
        self._tokens -= 1.0  # reserve now (may go negative): later callers wait behind this one
        if self._tokens < 0:
            await self._sleep(-self._tokens / self.qps)


def retry_after_delay(status: int, headers: Mapping[str, str]) -> float | None:
    """Seconds to wait before asking again, or None when the answer is not a "come back later"."""
    if status != 429 and status < 500:
        return None
    raw = headers.get("Retry-After")
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        return None  # an HTTP date: not sent by the API server; treat as an error
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_SECONDS)
