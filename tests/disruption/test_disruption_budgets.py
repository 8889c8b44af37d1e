from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reconciler.disruption.budgets import (
    REASON_DRIFTED,
    REASON_EMPTY,
    REASON_UNDERUTILIZED,
    UNLIMITED,
    Budget,
    BudgetError,
    allowance,
    parse_budgets,
)

NOON = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)  # a Monday


def allowed(raw: list[dict] | None, reason: str, nodes: int, disrupting: int = 0, now: datetime = NOON) -> int:
    return allowance("pool", parse_budgets(raw), reason, node_count=nodes, disrupting=disrupting, now=now).remaining


def test_default_budget_is_ten_percent_rounded_up() -> None:
    assert allowed(None, REASON_UNDERUTILIZED, 3) == 1  # 10% of 3 rounds up to 1
    assert allowed(None, REASON_UNDERUTILIZED, 10) == 1
    assert allowed(None, REASON_UNDERUTILIZED, 11) == 2
    assert allowed(None, REASON_UNDERUTILIZED, 0) == 0


def test_count_and_percent_budgets_take_the_minimum() -> None:
    raw = [{"nodes": "50%"}, {"nodes": "3"}]
    assert allowed(raw, REASON_EMPTY, 10) == 3
    assert allowed(raw, REASON_EMPTY, 4) == 2


def test_disrupting_nodes_use_up_the_budget_and_floor_at_zero() -> None:
    assert allowed([{"nodes": "2"}], REASON_DRIFTED, 10, disrupting=1) == 1
    assert allowed([{"nodes": "2"}], REASON_DRIFTED, 10, disrupting=5) == 0


def test_reasons_scope_a_budget() -> None:
    raw = [{"nodes": "0", "reasons": ["Drifted"]}, {"nodes": "100%"}]
    assert allowed(raw, REASON_DRIFTED, 5) == 0
    assert allowed(raw, REASON_UNDERUTILIZED, 5) == 5
    assert allowed(raw, REASON_EMPTY, 5) == 5


def test_scheduled_zero_budget_blocks_only_inside_its_window() -> None:
    # Business hours on weekdays, UTC: no disruption from 09:00 for 8h.
    raw = [{"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"}, {"nodes": "10"}]
    assert allowed(raw, REASON_UNDERUTILIZED, 20, now=datetime(2026, 1, 5, 9, 0, tzinfo=UTC)) == 0
    assert allowed(raw, REASON_UNDERUTILIZED, 20, now=datetime(2026, 1, 5, 16, 59, tzinfo=UTC)) == 0
    assert allowed(raw, REASON_UNDERUTILIZED, 20, now=datetime(2026, 1, 5, 17, 1, tzinfo=UTC)) == 10
    assert allowed(raw, REASON_UNDERUTILIZED, 20, now=datetime(2026, 1, 5, 8, 59, tzinfo=UTC)) == 10
    # Saturday: the weekday schedule has no hit within the last 8h.
    assert allowed(raw, REASON_UNDERUTILIZED, 20, now=datetime(2026, 1, 10, 12, 0, tzinfo=UTC)) == 10


def test_schedule_is_evaluated_in_utc_whatever_the_clock_zone() -> None:
    from datetime import timedelta, timezone

    raw = [{"nodes": "0", "schedule": "@daily", "duration": "1h"}]
    local = timezone(timedelta(hours=-5))
    # 19:30 at UTC-5 is 00:30 UTC: inside the first hour after midnight UTC.
    assert allowed(raw, REASON_EMPTY, 5, now=datetime(2026, 1, 4, 19, 30, tzinfo=local)) == 0
    assert allowed(raw, REASON_EMPTY, 5, now=datetime(2026, 1, 4, 0, 30, tzinfo=local)) == UNLIMITED


def test_inactive_schedule_means_unlimited() -> None:
    raw = [{"nodes": "0", "schedule": "@hourly", "duration": "10m"}]
    assert allowed(raw, REASON_EMPTY, 5, now=datetime(2026, 1, 5, 12, 30, tzinfo=UTC)) == UNLIMITED
    assert allowed(raw, REASON_EMPTY, 5, now=datetime(2026, 1, 5, 12, 5, tzinfo=UTC)) == 0


@pytest.mark.parametrize(
    "bad",
    [
        {"nodes": "1", "schedule": "61 * * * *", "duration": "1h"},
        {"nodes": "1", "schedule": "0 0 * * * *", "duration": "1h"},  # seconds field: not a 5-field cron
        {"nodes": "1", "schedule": "@every 1h", "duration": "1h"},
        {"nodes": "1", "schedule": "0 0 31 2 *", "duration": "1h"},  # never fires
        {"nodes": "1", "schedule": "0 9 * * 7", "duration": "1h"},  # robfig: weekday 7 is out of range
        {"nodes": "1", "schedule": "@daily"},  # schedule without duration
        {"nodes": "ten"},
        {"nodes": "150%"},
    ],
)
def test_invalid_budget_fails_closed_for_every_reason(bad: dict) -> None:
    raw = [bad, {"nodes": "100%", "reasons": ["Empty"]}]
    result = allowance("pool", parse_budgets(raw), REASON_EMPTY, node_count=10, disrupting=0, now=NOON)
    assert result.remaining == 0
    assert "invalid budget" in result.limited_by
    assert "spec.disruption.budgets[0]" in result.limited_by


def test_budget_shape_errors_name_the_field_path() -> None:
    with pytest.raises(BudgetError, match=r"budgets\[1\]\.duration"):
        parse_budgets([{"nodes": "1"}, {"nodes": "1", "schedule": "@daily", "duration": "soon"}])
    with pytest.raises(BudgetError, match=r"budgets\[0\]\.reasons"):
        parse_budgets([{"nodes": "1", "reasons": "Empty"}])


def test_explanation_names_the_limiting_budget() -> None:
    raw = [{"nodes": "0", "schedule": "0 9 * * *", "duration": "8h", "reasons": ["Underutilized"]}]
    result = allowance("batch", parse_budgets(raw), REASON_UNDERUTILIZED, node_count=4, disrupting=0, now=NOON)
    text = result.explain()
    assert "NodePool batch" in text and "allows 0" in text and '"0 9 * * *"' in text and "8h" in text


def test_budget_from_duration_in_seconds_and_model_dump() -> None:
    class FakeModel:
        def model_dump(self, **_: object) -> dict:
            return {"nodes": "2", "schedule": "@daily", "duration": "2h"}

    budget = Budget.from_manifest(FakeModel())
    assert budget.duration == 7200
    assert budget.limit(10, datetime(2026, 1, 5, 1, 0, tzinfo=UTC)) == 2


@pytest.mark.parametrize(
    ("nodes", "count", "expected"),
    [("10%", 0, 0), ("10%", 1, 1), ("10%", 10, 1), ("10%", 11, 2), ("100%", 7, 7), ("3", 50, 3)],
)
def test_budget_percentages_round_up(nodes: str, count: int, expected: int) -> None:
    assert Budget(nodes=nodes).limit(count, NOON) == expected


def test_negative_budget_duration_fails_closed() -> None:
    with pytest.raises(BudgetError, match=r"budgets\[0\]\.duration: '-1h' must not be negative"):
        parse_budgets([{"nodes": "1", "schedule": "@daily", "duration": "-1h"}])


def test_budget_durations_use_go_syntax() -> None:
    [budget] = parse_budgets([{"nodes": "0", "schedule": "@daily", "duration": "1h30m"}])
    assert budget.duration == 5400
    assert budget.is_active(datetime(2026, 1, 5, 1, 29, tzinfo=UTC))
    assert not budget.is_active(datetime(2026, 1, 5, 1, 30, tzinfo=UTC))


def test_naive_clock_is_a_caller_error_not_a_closed_budget() -> None:
    scheduled = Budget(nodes="0", schedule="@daily", duration=3600)
    with pytest.raises(ValueError, match="timezone-aware"):
        scheduled.is_active(datetime(2026, 1, 5, 0, 30))
    assert Budget(nodes="1").is_active(datetime(2026, 1, 5, 0, 30))  # unscheduled: the clock is not read
