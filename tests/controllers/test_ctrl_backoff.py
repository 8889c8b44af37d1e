"""The per-object backoff (client-go's item exponential failure rate limiter, with jitter) and ``Workers``."""

from __future__ import annotations

import random

import pytest

from reconciler.controllers.runtime.backoff import CONTROLLER_BACKOFF, EVICTION_BACKOFF, Backoffs, ItemBackoff
from reconciler.controllers.runtime.workers import Workers


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_delays_double_from_the_base_to_the_cap_and_jitter_only_lengthens() -> None:
    assert [CONTROLLER_BACKOFF.base_delay(n) for n in (1, 2, 3, 7, 8, 100)] == [1, 2, 4, 60, 60, 60]
    assert [EVICTION_BACKOFF.base_delay(n) for n in (1, 2, 8, 9)] == [0.1, 0.2, 10, 10]
    rng = random.Random(1)
    delays = [CONTROLLER_BACKOFF.delay(3, rng) for _ in range(200)]
    assert min(delays) >= 4 and max(delays) <= 4.8 and len(set(delays)) > 100, "up to 20 % longer, spread"
    with pytest.raises(ValueError):
        ItemBackoff(base=2, maximum=1)


def test_backoffs_are_per_object_and_a_success_forgets() -> None:
    clock = Clock()
    backoffs = Backoffs(ItemBackoff(1, 8, jitter=0), clock)
    assert backoffs.failed("a") == (1, 1) and backoffs.failed("a") == (2, 2)
    assert not backoffs.ready("a") and backoffs.ready("b")
    assert backoffs.next_due() == 2
    clock.now = 2
    assert backoffs.ready("a") and backoffs.next_due() is None
    backoffs.forget("a")
    assert backoffs.failed("a") == (1, 1)
    backoffs.defer("b", 5)
    assert not backoffs.ready("b") and backoffs.failures("b") == 0


async def test_workers_back_a_failing_key_off_and_never_log_a_traceback(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = Clock()
    woken: list[int] = []
    workers = Workers("test", on_done=lambda: woken.append(1), clock=clock, backoff=ItemBackoff(1, 60, jitter=0))
    runs = 0

    async def fails() -> None:
        nonlocal runs
        runs += 1
        raise RuntimeError("500 InternalError")

    assert workers.start("claim", fails)
    await workers.drain()
    for _ in range(5):  # woken at once, as often as you like: still backing off
        assert not workers.start("claim", fails)
    assert runs == 1 and woken and workers.retry_in() == 1
    clock.now = 1
    assert workers.start("claim", fails)
    await workers.drain()
    assert runs == 2 and workers.retry_in() == 2
    done: list[str] = []

    async def succeeds() -> None:
        done.append("other")

    assert workers.start("other", succeeds)  # another key is not held up
    await workers.drain()
    assert done == ["other"] and not workers.backing_off("other")
    assert "Traceback" not in caplog.text + capsys.readouterr().out
