"""Go-style durations (``time.ParseDuration`` / ``Duration.String``) in seconds.

Karpenter's API fields hold Go duration strings ("720h", "1h30m", "30s") and
the word ``Never``. The engine works in seconds (``float``); these helpers
convert both ways exactly, going through integer nanoseconds like Go does.
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
_COMPONENT = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_NANOS_PER_SECOND = 1_000_000_000


class DurationError(ValueError):
    """A string that is not a Go duration."""


def parse_duration_nanos(text: str) -> int:
    """Parse a Go duration ("1h30m", "-1.5s", "0") into integer nanoseconds."""
    if not isinstance(text, str):
        raise DurationError(f"duration must be a string, got {type(text).__name__}")
    body = text
    sign = 1
    if body[:1] in "+-" and body:
        sign = -1 if body[0] == "-" else 1
        body = body[1:]
    if body == "0":
        return 0
    if not body:
        raise DurationError(f"{text!r} is not a valid duration")
    total = Decimal(0)
    position = 0
    while position < len(body):
        match = _COMPONENT.match(body, position)
        if not match:
            raise DurationError(f"{text!r} is not a valid duration (expected e.g. 30s, 5m, 1h30m)")
        number, unit = match.groups()
        total += Decimal(number) * _NANOS_PER_UNIT[unit]
        position = match.end()
    # Go truncates fractions below a nanosecond.
    return sign * int(total)


def parse_duration(text: str) -> float:
    """Parse a Go duration into seconds."""
    return parse_duration_nanos(text) / _NANOS_PER_SECOND


def parse_nillable_duration(text: str) -> float | None:
    """Like :func:`parse_duration`, but ``"Never"`` means no duration (``None``)."""
    if text == NEVER:
        return None
    return parse_duration(text)


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


def _decimal(amount: int, unit: int) -> str:
    whole, fraction = divmod(amount, unit)
    if not fraction:
        return str(whole)
    digits = str(fraction).rjust(len(str(unit)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"
