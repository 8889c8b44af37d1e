"""Per-object background work: at most one task per key, bounded concurrency, failures backed off, cancelled together.

A key whose work raised is not started again before its backoff (``backoff.Backoffs``: exponential per key,
with jitter, capped; a success forgets it), whatever wakes the controller meanwhile, and each failure is one
structured log line (the error, the attempt, when it is retried), never a traceback: an API server that
answers 500 to every write must not turn a controller into a loop as fast as the client allows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from reconciler.controllers.runtime.backoff import CONTROLLER_BACKOFF, Backoffs, ItemBackoff
from reconciler.controllers.runtime.context import ControllerLog


class Workers:
    """Run ``work()`` for a key unless that key is already being worked on or is backing off."""

    def __init__(
        self, name: str, concurrency: int = 16, on_done: Callable[[], None] | None = None, *,
        clock: Callable[[], float] | None = None, backoff: ItemBackoff = CONTROLLER_BACKOFF,
        seed: int | None = None,
    ) -> None:
        self.name = name
        self.concurrency = concurrency
        self.log = ControllerLog(name)
        self.backoffs = Backoffs(backoff, clock or _loop_time, seed=seed)
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._limit = asyncio.Semaphore(concurrency)
        # Changes that arrived while an object was busy were skipped: look again when its work ends.
        self._on_done = on_done

    def busy(self, key: str) -> bool:
        return key in self._tasks

    def backing_off(self, key: str) -> bool:
        return not self.backoffs.ready(key)

    def retry_in(self) -> float | None:
        """Seconds until the earliest key that is backing off may run again (None: none is)."""
        return self.backoffs.next_due()

    def start(self, key: str, work: Callable[[], Awaitable[None]]) -> bool:
        if key in self._tasks or self.backing_off(key):
            return False
        self._tasks[key] = asyncio.create_task(self._run(key, work), name=f"{self.name}:{key}")
        return True

    async def _run(self, key: str, work: Callable[[], Awaitable[None]]) -> None:
        try:
            async with self._limit:
                await work()
            self.backoffs.forget(key)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # one object's failure must not stop the controller; it is retried later
            attempt, delay = self.backoffs.failed(key)
            self.log.warning("reconcile failed; backing off", object=key, error=str(err)[:512],
                             errorType=type(err).__name__, attempt=attempt, retryIn=round(delay, 3))
        finally:
            self._tasks.pop(key, None)
            if self._on_done is not None:
                self._on_done()

    async def drain(self) -> None:
        """Wait for every running task (tests use this to let a pass finish)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    async def cancel(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()


def wait_time(*candidates: float | None) -> float | None:
    """The shortest of the given waits (None: no bound)."""
    bounded = [c for c in candidates if c is not None]
    return min(bounded) if bounded else None


def _loop_time() -> float:
    return asyncio.get_running_loop().time()
