"""RFC 3339 timestamps: one strict parser, and the lenient variant callers choose explicitly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from reconciler.model.meta import ManifestError, format_time, parse_time, parse_time_or_none


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-31T09:30:00Z", datetime(2024, 1, 31, 9, 30, tzinfo=UTC)),
        ("2024-01-31T09:30:00.123456Z", datetime(2024, 1, 31, 9, 30, 0, 123456, tzinfo=UTC)),
        ("2024-01-31T09:30:00.123456789Z", datetime(2024, 1, 31, 9, 30, 0, 123456, tzinfo=UTC)),  # RFC3339Nano
        ("2024-01-31T11:30:00+02:00", datetime(2024, 1, 31, 9, 30, tzinfo=UTC)),
    ],
)
def test_rfc3339_timestamps_become_utc(text: str, expected: datetime) -> None:
    parsed = parse_time(text)
    assert parsed == expected and parsed is not None and parsed.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "text",
    ["2024-01-31", "2024-01-31T09:30:00", "2024-01-31 09:30:00Z", "2024-W05-3", "2024-01-31T09:30:00+0200",
     "2024-13-01T00:00:00Z", "yesterday", "2024-01-31t09:30:00z"],
)
def test_non_rfc3339_is_refused_with_the_field_path(text: str) -> None:
    with pytest.raises(ManifestError, match=r"^metadata\.creationTimestamp: .* is not an RFC 3339 timestamp"):
        parse_time(text, path="metadata.creationTimestamp")
    assert parse_time_or_none(text) is None


def test_absent_and_datetime_values() -> None:
    assert parse_time(None) is None and parse_time("") is None and parse_time_or_none(None) is None
    assert parse_time(datetime(2024, 1, 1)) == datetime(2024, 1, 1, tzinfo=UTC)  # naive: taken as UTC
    plus_two = datetime(2024, 1, 1, 2, tzinfo=timezone(timedelta(hours=2)))
    assert parse_time(plus_two) == datetime(2024, 1, 1, tzinfo=UTC)


def test_format_round_trips() -> None:
    moment = datetime(2024, 1, 31, 9, 30, tzinfo=UTC)
    assert parse_time(format_time(moment)) == moment


@pytest.mark.parametrize("text", ["9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+01:00"])
def test_a_timestamp_whose_utc_instant_is_out_of_range_is_a_path_named_error(text: str) -> None:
    with pytest.raises(ManifestError, match=r"^metadata.creationTimestamp: .* out of range"):
        parse_time(text, path="metadata.creationTimestamp")
    assert parse_time_or_none(text) is None
