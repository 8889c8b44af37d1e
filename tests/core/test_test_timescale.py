"""The slow tests' one time factor, ADZE_TEST_TIME_SCALE (tests/support/timescale.py)."""

from __future__ import annotations

import time

import pytest
from support.timescale import ENV, factor, scaled, wait_until, wait_until_sync


def test_the_factor_defaults_to_one_and_multiplies_every_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert factor() == 1.0 and scaled(40) == 40
    monkeypatch.setenv(ENV, "2.5")
    assert scaled(40) == 100


@pytest.mark.parametrize("value", ["0", "-1", "slow", "inf", "nan"])
def test_a_factor_that_is_not_a_positive_number_is_refused_by_name(monkeypatch: pytest.MonkeyPatch,
                                                                     value: str) -> None:
    monkeypatch.setenv(ENV, value)
    with pytest.raises(ValueError, match=f"{ENV}={value!r}: expected a positive number"):
        scaled(1)


async def test_a_wait_ends_at_the_event_not_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "1000")  # a deadline of hours: only the event can end these waits in time
    calls = 0

    async def third_time() -> bool:
        nonlocal calls
        calls += 1
        return calls >= 3

    started = time.monotonic()
    assert await wait_until(third_time, timeout=10, interval=0.001)
    assert wait_until_sync(lambda: True, timeout=10)
    assert time.monotonic() - started < 5


async def test_a_wait_gives_up_after_the_scaled_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "0.01")

    async def never() -> bool:
        return False

    started = time.monotonic()
    assert not await wait_until(never, timeout=5, interval=0.001)  # 5 s scaled to 50 ms
    assert not wait_until_sync(lambda: False, timeout=5, interval=0.001)
    assert time.monotonic() - started < 4
