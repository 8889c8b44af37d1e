"""Disruption budget schedules: standard 5-field cron (UTC) as Karpenter parses it.

Karpenter uses robfig/cron's standard parser: five fields (minute, hour,
day-of-month, month, day-of-week) with ``* ? , - /`` and month/weekday names,
or one of the ``@yearly``-style descriptors. This module checks that syntax and
finds the next activation, both as pure functions.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from croniter import croniter

DESCRIPTORS = ("@annually", "@yearly", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
SCHEDULE_PATTERN = r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly)|\S+\s+\S+\s+\S+\s+\S+\s+\S+)$"

_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_WEEKDAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
# (name, lowest, highest, names) per field, in order.
_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day-of-month", 1, 31, ()),
    ("month", 1, 12, _MONTHS),
    ("day-of-week", 0, 6, _WEEKDAYS),
)
_PART = re.compile(r"^(?P<range>\*|\?|[A-Za-z0-9]+(-[A-Za-z0-9]+)?)(/(?P<step>[0-9]+))?$")


def cron_problem(schedule: str) -> str | None:
    """Why ``schedule`` is not a valid budget schedule, or ``None``."""
    if schedule.startswith("@"):
        if schedule in DESCRIPTORS:
            return None
        return f"schedule {schedule!r}: unknown descriptor, use one of {', '.join(DESCRIPTORS)}"
    fields = schedule.split()
    if len(fields) != 5:
        return (
            f"schedule {schedule!r} must have 5 fields (minute hour day-of-month month day-of-week), "
            f"got {len(fields)}; timezones and seconds are not supported"
        )
    for text, (name, low, high, names) in zip(fields, _FIELDS, strict=True):
        problem = _field_problem(text, name, low, high, names)
        if problem:
            return f"schedule {schedule!r}: {problem}"
    return None


def _field_problem(text: str, name: str, low: int, high: int, names: tuple[str, ...]) -> str | None:
    for part in text.split(","):
        match = _PART.match(part)
        if not match:
            return f"{name} field {text!r} is not valid cron syntax"
        if match["step"] is not None and int(match["step"]) == 0:
            return f"{name} field {text!r} has a zero step"
        bounds = match["range"]
        if bounds == "?" and name not in ("day-of-month", "day-of-week"):
            return f"'?' is only allowed in day-of-month and day-of-week, not {name}"
        if bounds in ("*", "?"):
            continue
        values = []
        for token in bounds.split("-"):
            value = _value(token, low, names)
            if value is None or not low <= value <= high:
                return f"{name} value {token!r} is out of range {low}-{high}"
            values.append(value)
        if len(values) == 2 and values[0] > values[1]:
            return f"{name} range {bounds!r} is backwards"
    return None


def _value(token: str, low: int, names: tuple[str, ...]) -> int | None:
    if token.isdigit():
        return int(token)
    upper = token.upper()
    if upper in names:
        return names.index(upper) + low
    return None


def next_activation(schedule: str, after: datetime) -> datetime:
    """The first time strictly after ``after`` at which ``schedule`` fires (UTC; naive times are UTC)."""
    result: datetime = croniter(schedule, _utc(after)).get_next(datetime)
    return result


def window_is_active(schedule: str, duration: timedelta, now: datetime) -> bool:
    """True when ``now`` falls within ``duration`` of the schedule's latest activation.

    Like Karpenter: step back ``duration`` and see whether the schedule fires again by ``now``.
    """
    current = _utc(now)
    return next_activation(schedule, current - duration) <= current


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
