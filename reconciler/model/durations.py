"""Go-style durations (``time.ParseDuration`` / ``Duration.String``) in seconds: the one duration parser.

Karpenter's API fields, annotations and settings hold Go duration strings
("720h", "1h30m", "300ms", "-1.5h") and, where a field allows it, the word
``Never``. The engine works in seconds (``float``); these helpers convert both
ways exactly, going through integer nanoseconds like Go does. Every caller that
reads a duration goes through :func:`parse_duration_nanos`; callers decide
whether ``Never`` or a negative value is allowed where they use it.
"""

from __future__ import annotations

import re
from decimal import Decimal

NEVER = "Never"

_NANOS_PER_UNIT = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}
_NUMBER = re.compile(r"\d+(?:\.\d*)?|\.\d+")
_UNIT = re.compile(r"[^\d.]*")
_NANOS_PER_SECOND = 1_000_000_000
# Go's Duration is an int64 of nanoseconds; ParseDuration rejects anything beyond it.
_MAX_NANOS = 2**63 - 1


class DurationError(ValueError):
    """A string that is not a Go duration; the message names the field when the caller gave one."""


def parse_duration_nanos(text: str, *, path: str | None = None) -> int:
    """Parse a Go duration ("1h30m", "-1.5s", "0") into integer nanoseconds."""
    if not isinstance(text, str):
        raise _error(path, f"duration must be a string, got {type(text).__name__}")
    body = text
    sign = 1
    if body[:1] in ("+", "-"):
        sign = -1 if body[0] == "-" else 1
        body = body[1:]
    if body == "0":
        return 0
    if not body:
        raise _error(path, f"{text!r} is not a duration (expected e.g. 30s, 5m, 1h30m)")
    total = Decimal(0)
    position = 0
    while position < len(body):
        number = _NUMBER.match(body, position)
        if not number:
            raise _error(path, f"{text!r} is not a duration (expected e.g. 30s, 5m, 1h30m)")
        unit = _UNIT.match(body, number.end())
        name = unit.group() if unit else ""
        if not name:
            raise _error(path, f"{text!r} is not a duration: missing unit after {number.group()!r}")
        if name not in _NANOS_PER_UNIT:
            raise _error(path, f"{text!r} is not a duration: unknown unit {name!r} (use ns, us, ms, s, m or h)")
        total += Decimal(number.group()) * _NANOS_PER_UNIT[name]
        position = number.end() + len(name)
    # Go truncates fractions below a nanosecond.
    nanos = int(total)
    if nanos > _MAX_NANOS + (1 if sign < 0 else 0):
        raise _error(path, f"{text!r} is not a duration: longer than Go's limit of about 292 years")
    return sign * nanos


def parse_duration(text: str, *, path: str | None = None) -> float:
    """Parse a Go duration into seconds."""
    return parse_duration_nanos(text, path=path) / _NANOS_PER_SECOND


def parse_length(text: str, *, path: str | None = None) -> float:
    """A Go duration that is a length of time, in seconds: negative ones are refused (``DurationError``).

    What a manifest's expireAfter, terminationGracePeriod and consolidateAfter hold (their CRD patterns
    allow no sign), and what every duration setting is.
    """
    seconds = parse_duration(text, path=path)
    if seconds < 0:
        raise _error(path, f"{text!r} must not be negative")
    return seconds


def parse_nillable_duration(text: str, *, path: str | None = None) -> float | None:
    """Like :func:`parse_duration`, but ``"Never"`` means no duration (``None``)."""
    if text == NEVER:
        return None
    return parse_duration(text, path=path)


def _error(path: str | None, problem: str) -> DurationError:
    return DurationError(f"{path}: {problem}" if path else problem)


def format_duration(seconds: float | int | None) -> str:
    """Format seconds as Go's ``Duration.String()`` does ("720h0m0s", "1.5s", "250ms").

    ``None`` formats as ``"Never"``, the counterpart of :func:`parse_nillable_duration`.
    """
    if seconds is None:
        return NEVER
    return format_duration_nanos(round(Decimal(str(seconds)) * _NANOS_PER_SECOND))


def format_duration_nanos(nanos: int) -> str:
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    nanos = abs(nanos)
    if nanos < _NANOS_PER_SECOND:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if nanos >= size:
                return f"{sign}{_decimal(nanos, size)}{unit}"
    hours, rest = divmod(nanos, _NANOS_PER_UNIT["h"])
    minutes, rest = divmod(rest, _NANOS_PER_UNIT["m"])
    text = f"{_decimal(rest, _NANOS_PER_SECOND)}s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return sign + text


def format_duration_short(seconds: float) -> str:
    """A compact form for messages: zero units dropped ("1h30m", "8h", "45s"); not meant to be parsed back."""
    whole = int(seconds)
    if whole != seconds:
        return f"{seconds}s"
    sign = "-" if whole < 0 else ""
    hours, rest = divmod(abs(whole), 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{secs}s" if secs else "")
    return sign + text if text else "0s"


def _decimal(amount: int, unit: int) -> str:
    whole, fraction = divmod(amount, unit)
    if not fraction:
        return str(whole)
    digits = str(fraction).rjust(len(str(unit)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"
