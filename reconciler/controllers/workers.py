"""Per-object background work: at most one task per key, bounded concurrency, cancelled together."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class Workers:
    """Run ``work()`` for a key unless that key is already being worked on."""

    def __init__(self, name: str, concurrency: int = 16, on_done: Callable[[], None] | None = None) -> None:
        self.name = name
        self.concurrency = concurrency
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._limit = asyncio.Semaphore(concurrency)
        # Changes that arrived while an object was busy were skipped: look again when its work ends.
        self._on_done = on_done

    def busy(self, key: str) -> bool:
        return key in self._tasks

    def start(self, key: str, work: Callable[[], Awaitable[None]]) -> bool:
        if key in self._tasks:
            return False
        self._tasks[key] = asyncio.create_task(self._run(key, work), name=f"{self.name}:{key}")
        return True

    async def _run(self, key: str, work: Callable[[], Awaitable[None]]) -> None:
        try:
            async with self._limit:
                await work()
        except asyncio.CancelledError:
            raise
        except Exception:  # one object's failure must not stop the controller; it is retried later
            log.exception("%s: work on %s failed", self.name, key)
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
