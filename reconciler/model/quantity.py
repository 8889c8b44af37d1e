"""Kubernetes resource quantities as exact integer milli-units.

Every quantity is held as ``value * 1000`` in an ``int`` so that CPU ("100m"),
memory ("1Gi") and counts ("110") share one exact representation and sums never
drift the way floats do. Sub-milli precision (e.g. "1n") rounds up, like the
API server does when it canonicalises a quantity.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

_BINARY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_SUFFIXES = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$")

MILLI = 1000
# The API server keeps quantities in int64 milli-units at most; anything larger is not a real request or size.
MAX_MILLI = 2**63 - 1
MAX_EXPONENT = 30


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> int:
    """Parse a quantity (``"1.5"``, ``"100m"``, ``"4Gi"``, ``2``) into milli-units."""
    if isinstance(value, bool):
        raise QuantityError(f"quantity must be a number or string, got {value!r}")
    if isinstance(value, int):
        if abs(value) > MAX_MILLI // MILLI:
            raise QuantityError(f"{value!r} is out of range (at most {MAX_MILLI // MILLI} units)")
        return value * MILLI
    if isinstance(value, float):
        if not math.isfinite(value) or abs(value) > MAX_MILLI // MILLI:
            raise QuantityError(f"quantity must be finite and at most {MAX_MILLI // MILLI}, got {value!r}")
        return _round_up(Decimal(repr(value)) * MILLI)
    if not isinstance(value, str):
        raise QuantityError(f"quantity must be a number or string, got {type(value).__name__}")
    known = _PARSED.get(value)
    if known is not None:
        return known
    milli = _parse_text(value)
    if len(_PARSED) >= _PARSED_LIMIT:
        _PARSED.clear()
    _PARSED[value] = milli
    return milli


# Strings already parsed (a cluster repeats a few dozen quantities thousands of times; Decimal is slow).
_PARSED: dict[str, int] = {}
_PARSED_LIMIT = 4096


def _parse_text(value: str) -> int:
    match = _QUANTITY.match(value.strip())
    if not match:
        raise QuantityError(f"{value!r} is not a valid quantity (expected e.g. 100m, 1.5, 512Mi, 2Gi)")
    number, exponent, suffix = match.groups()
    try:
        amount = Decimal(number)
    except InvalidOperation as err:  # pragma: no cover - the regex already guarantees a number
        raise QuantityError(f"{value!r} is not a valid quantity") from err
    if exponent:
        power = int(exponent[1:])
        if abs(power) > MAX_EXPONENT:
            raise QuantityError(f"{value!r} is out of range (exponent beyond ±{MAX_EXPONENT})")
        amount *= Decimal(10) ** power
    elif suffix in _BINARY_SUFFIXES:
        amount *= _BINARY_SUFFIXES[suffix]
    else:
        amount *= _DECIMAL_SUFFIXES[suffix or ""]
    milli = _round_up(amount * MILLI)
    if abs(milli) > MAX_MILLI:
        raise QuantityError(f"{value!r} is out of range (at most {MAX_MILLI // MILLI} units)")
    return milli


def _round_up(amount: Decimal) -> int:
    return int(amount.to_integral_value(rounding="ROUND_CEILING"))


# Memory-like resources print in binary units; everything else in decimal/milli form.
_BINARY_RESOURCES = ("memory", "ephemeral-storage", "storage", "hugepages-")


def format_quantity(milli: int, resource: str = "cpu") -> str:
    """Canonical, human-friendly string for a milli-unit amount of ``resource``."""
    if milli % MILLI:
        return f"{milli}m"
    whole = milli // MILLI
    if resource.startswith(_BINARY_RESOURCES) and whole:
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            unit = _BINARY_SUFFIXES[suffix]
            if whole % unit == 0:
                return f"{whole // unit}{suffix}"
    return str(whole)


def to_float(milli: int) -> float:
    """The quantity's value as a float (for display and prices, never for arithmetic)."""
    return milli / MILLI
