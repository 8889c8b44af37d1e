"""Go-style durations and budget cron schedules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from reconciler.api.cron import cron_problem, next_activation, window_is_active
from reconciler.model.durations import (
    DurationError,
    format_duration,
    format_duration_short,
    parse_duration,
    parse_duration_nanos,
    parse_length,
    parse_nillable_duration,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("720h", 2_592_000),
        ("1h30m", 5400),
        ("30s", 30),
        ("0s", 0),
        ("0", 0),
        ("1.5s", 1.5),
        ("500ms", 0.5),
        ("2h45m0.5s", 9900.5),
        ("-1m", -60),
        ("1h0m0s", 3600),
        ("8h0m0s", 28800),
        ("250us", 0.00025),
        ("250µs", 0.00025),
        ("250μs", 0.00025),
        ("-1.5h", -5400),
        ("+2m", 120),
        (".5s", 0.5),
        ("1.s", 1),
        ("300ms", 0.3),
        ("2562047h47m16.854775807s", 9_223_372_036.854775807),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["10d", "", "h", "1", "1h-", "Never", " 1h", "1 h", "1.h2", "--1s"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(DurationError, match="is not a duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("10d", "unknown unit 'd'"),
        ("1", "missing unit after '1'"),
        ("2562047h47m16.854775808s", "Go's limit"),
        (".s", "expected e.g. 30s"),
        ("+", "expected e.g. 30s"),
    ],
)
def test_parse_duration_says_what_is_wrong_and_where(text: str, problem: str) -> None:
    with pytest.raises(DurationError, match=rf"^spec\.expireAfter: .*{problem}"):
        parse_duration(text, path="spec.expireAfter")


def test_go_minimum_duration_is_accepted() -> None:
    assert parse_duration_nanos("-2562047h47m16.854775808s") == -(2**63)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (2_592_000, "720h0m0s"),
        (90, "1m30s"),
        (1.5, "1.5s"),
        (0.25, "250ms"),
        (3600, "1h0m0s"),
        (-5, "-5s"),
        (0.000001, "1µs"),
        (None, "Never"),
    ],
)
def test_format_duration_like_go(seconds: float | None, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize("text", ["720h", "1h30m", "45s", "1.25s", "3ms", "7ns"])
def test_duration_round_trip_is_exact(text: str) -> None:
    nanos = parse_duration_nanos(text)
    assert parse_duration_nanos(format_duration(nanos / 1e9)) == nanos


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (90, "1m30s"), (28800, "8h"), (5400, "1h30m"), (1.5, "1.5s"), (-90, "-1m30s")]
)
def test_short_format_for_messages(seconds: float, text: str) -> None:
    assert format_duration_short(seconds) == text


def test_never_is_no_duration() -> None:
    assert parse_nillable_duration("Never") is None
    assert parse_nillable_duration("5m") == 300


@pytest.mark.parametrize(
    "schedule",
    [
        "@daily",
        "@yearly",
        "@annually",
        "@midnight",
        "@hourly",
        "0 9 * * 1-5",
        "*/15 * * * *",
        "0 0 ? * MON-FRI",
        "30 2 1,15 jan,jul *",
        "0 22 * * SUN",
        "5/10 * * * *",
    ],
)
def test_valid_schedules(schedule: str) -> None:
    assert cron_problem(schedule) is None


@pytest.mark.parametrize(
    ("schedule", "problem"),
    [
        ("@every 1h", "unknown descriptor"),
        ("* * * *", "must have 5 fields"),
        ("0 * * * * *", "must have 5 fields"),
        ("CRON_TZ=UTC 0 * * * *", "must have 5 fields"),
        ("60 * * * *", "out of range 0-59"),
        ("0 24 * * *", "out of range 0-23"),
        ("0 0 0 * *", "out of range 1-31"),
        ("0 0 * 13 *", "out of range 1-12"),
        ("0 0 * * 7", "out of range 0-6"),
        ("0 0 * * FUNDAY", "out of range"),
        ("0 0 L * *", "out of range"),
        ("? * * * *", "only allowed in day-of-month and day-of-week"),
        ("*/0 * * * *", "zero step"),
        ("5-1 * * * *", "backwards"),
        ("0 0 1#2 * *", "not valid cron syntax"),
    ],
)
def test_invalid_schedules(schedule: str, problem: str) -> None:
    found = cron_problem(schedule)
    assert found is not None and problem in found


def test_next_activation_is_strictly_after() -> None:
    nine = datetime(2024, 1, 1, 9, 0, tzinfo=UTC)
    assert next_activation("0 9 * * *", nine) == datetime(2024, 1, 2, 9, 0, tzinfo=UTC)
    assert next_activation("0 9 * * *", nine - timedelta(seconds=1)) == nine


def test_windows_are_evaluated_in_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    # 10:30 at UTC+2 is 08:30 UTC: before a 09:00 UTC window opens.
    assert not window_is_active(
        "0 9 * * *", timedelta(hours=1), datetime(2024, 1, 1, 10, 30, tzinfo=plus_two)
    )
    assert window_is_active("0 9 * * *", timedelta(hours=1), datetime(2024, 1, 1, 11, 30, tzinfo=plus_two))
    assert window_is_active("0 9 * * *", timedelta(hours=8), datetime(2024, 1, 1, 16, 59, tzinfo=UTC))
    assert not window_is_active("0 9 * * *", timedelta(hours=8), datetime(2024, 1, 1, 17, 0, tzinfo=UTC))
    # Naive times are taken as UTC.
    assert window_is_active("0 9 * * *", timedelta(hours=1), datetime(2024, 1, 1, 9, 30))


def test_lengths_of_time_refuse_negatives_and_name_the_field() -> None:
    assert parse_length("1h30m") == 5400.0 and parse_length("0") == 0.0
    with pytest.raises(DurationError, match=r"spec.expireAfter: '-1h' must not be negative"):
        parse_length("-1h", path="spec.expireAfter")


def test_manifest_fields_are_read_as_go_durations() -> None:
    """expireAfter, terminationGracePeriod and consolidateAfter go through the Go parser, no settings leniency:
    a padded value the API server would refuse is unreadable (fail safe), a negative one likewise."""
    from reconciler.disruption.policy import settings_of
    from reconciler.lifecycle.drain import termination_deadline
    from reconciler.lifecycle.expiration import expiration_time
    from reconciler.model.nodepool import NodePool

    created = "2026-01-01T00:00:00Z"

    def claim(**spec: str) -> dict:
        meta = {"name": "c", "creationTimestamp": created, "deletionTimestamp": created}
        return {"metadata": meta, "spec": spec}

    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert expiration_time(claim(expireAfter="1.5h")) == start + timedelta(minutes=90)
    assert termination_deadline(claim(terminationGracePeriod="90s")) == start + timedelta(seconds=90)
    for unreadable in (" 1h", "-1h", "1 h"):
        assert expiration_time(claim(expireAfter=unreadable)) is None
        assert termination_deadline(claim(terminationGracePeriod=unreadable)) is None

    def pool(after: str) -> NodePool:
        return NodePool.from_manifest(
            {"metadata": {"name": "p"}, "spec": {"disruption": {"consolidateAfter": after}, "template": {"spec": {}}}}
        )

    assert settings_of(pool("90m")).consolidate_after == 5400.0
    assert settings_of(pool("-5m")).consolidate_after is None
    assert settings_of(pool(" 5m")).consolidate_after is None
