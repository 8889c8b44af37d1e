"""The one way Adze prints money: ``$1,234.5678/h ($900,877.49/month)``.

Every renderer (``plan`` text/Markdown/HTML, ``simulate``, ``status``, the HTML report) formats prices
through ``money`` so the same figure reads the same everywhere. Hourly figures keep four decimals (spot
prices differ in the third), monthly ones two, with AWS's 730 hours a month. ``source`` tags where a
price came from (a catalogue preset, the live Pricing API, an estimate) when the caller knows it. It sits in
``model`` so the simulator's report and ``insight``'s renderers share it without ``sim`` depending on ``insight``.
"""

from __future__ import annotations

HOURS_PER_MONTH = 730  # AWS pricing convention


def _amount(value: float, decimals: int, signed: bool) -> str:
    rounded = round(value, decimals)
    if rounded == 0:
        rounded = 0.0  # no "-$0.00"
    sign = "-" if rounded < 0 else ("+" if signed and rounded > 0 else "")
    return f"{sign}${abs(rounded):,.{decimals}f}"


def money(per_hour: float, *, month: bool = True, signed: bool = False, source: str | None = None) -> str:
    """``$2.4370/h ($1,779.01/month)``; ``month=False`` drops the monthly figure (per-node prices),
    ``signed`` prints ``+`` on increases (differences), ``source`` appends ``[source]``."""
    text = f"{_amount(per_hour, 4, signed)}/h"
    if month:
        text += f" ({_amount(per_hour * HOURS_PER_MONTH, 2, signed)}/month)"
    if source:
        text += f" [{source}]"
    return text


def per_month(per_hour: float, *, signed: bool = False) -> str:
    """The monthly figure alone, ``$1,779.01/month`` (summary cards, columns)."""
    return f"{_amount(per_hour * HOURS_PER_MONTH, 2, signed)}/month"


def dollars(amount: float) -> str:
    """An amount spent, not a rate: ``$17.26``."""
    return _amount(amount, 2, False)
