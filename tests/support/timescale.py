"""One factor for every deadline of the slow tests: ``ADZE_TEST_TIME_SCALE`` (default 1).

Tests wait for events, never for fixed times: ``wait_until`` polls a condition and returns as soon as it
holds, so a generous deadline costs nothing when things go well and only says how long to wait before
calling it a failure. On a machine slower or busier than the ones the deadlines were written for, raise
the factor (``ADZE_TEST_TIME_SCALE=3 ./scripts/test.sh``): every deadline, timeout and timing that a
test gives the code under test (leases, watch and request timeouts) is multiplied by it.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable

ENV = "ADZE_TEST_TIME_SCALE"


def factor() -> float:
    """The factor from the environment; a value that is not a positive number is refused by name."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{ENV}={raw!r}: expected a positive number such as 1, 2.5 or 4") from None
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{ENV}={raw!r}: expected a positive number such as 1, 2.5 or 4")
    return value


def scaled(seconds: float) -> float:
    """``seconds`` times the factor: for deadlines and for timings handed to the code under test."""
    return seconds * factor()


async def wait_until(
    condition: Callable[[], Awaitable[bool]], timeout: float, interval: float = 0.02
) -> bool:
    """Poll ``condition`` until it holds (True) or ``scaled(timeout)`` seconds have passed (its last answer)."""
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        if await condition():
            return True
        await asyncio.sleep(interval)
    return await condition()


def wait_until_sync(condition: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """``wait_until`` for code without an event loop (threads, subprocesses)."""
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()
