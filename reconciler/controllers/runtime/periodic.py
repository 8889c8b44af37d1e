"""``PeriodicTask``: run one refresh every interval on the leader, surviving its failures.

A pass returns the facts it logs (one structured line per pass). A pass that
raises is logged as a warning and retried with exponential backoff (from
``retry_initial``, doubling, never beyond the interval), so a throttled or
briefly unreachable API neither stops the loop nor waits a whole interval.
``sleep`` is injectable so tests run passes without waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from reconciler.controllers.runtime.context import ControllerLog

Sleep = Callable[[float], Awaitable[None]]
Pass = Callable[[], Awaitable[Mapping[str, Any]]]
DEFAULT_RETRY_INITIAL = 15.0


class PeriodicTask:
    """One named periodic pass; ``run`` is a ``BackgroundLoop`` for the reconciler's manager."""

    def __init__(
        self,
        name: str,
        interval: float,
        work: Pass,
        *,
        message: str,
        run_at_start: bool = True,
        retry_initial: float = DEFAULT_RETRY_INITIAL,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if interval <= 0 or retry_initial <= 0:
            raise ValueError(f"{name}: interval and retry_initial must be positive seconds")
        self.name = name
        self.interval = interval
        self.failures = 0  # consecutive failed passes
        self._work = work
        self._message = message
        self._run_at_start = run_at_start
        self._retry_initial = retry_initial
        self._sleep = sleep
        self._log = ControllerLog(name)

    async def run(self) -> None:
        if not self._run_at_start:
            await self._sleep(self.interval)
        while True:
            await self._sleep(await self.run_once())

    async def run_once(self) -> float:
        """One pass; returns the seconds to wait before the next (the interval, or a backoff)."""
        try:
            facts = await self._work()
        except asyncio.CancelledError:
            raise
        except Exception as err:  # any failure: keep the previous data and try again soon
            self.failures += 1
            delay = min(self.interval, self._retry_initial * 2 ** (self.failures - 1))
            self._log.warning(f"{self._message} failed", error=str(err) or type(err).__name__,
                              failures=self.failures, retry_in=delay)
            return delay
        self.failures = 0
        self._log.info(self._message, **facts, next_in=self.interval)
        return self.interval
