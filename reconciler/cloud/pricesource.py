"""Where a price came from: one human-readable label per source, carried on offerings and instances.

Every cost Adze shows names its source (``status``, ``plan``, ``simulate`` in text, Markdown, JSON and
HTML), so a figure from a bundled list, the live APIs, a user's price file or an estimate is never
mistaken for another. An estimate label always starts with ``estimate``.
"""

from __future__ import annotations

from collections.abc import Iterable

SCENARIO = "scenario catalogue"
SPOT_ESTIMATE = "estimate: spot at a fixed 30-45% of the on-demand price (not a market price)"
SPOT_UNTIL_REFRESH = "estimate: spot at the on-demand price until spot prices are read"
LIVE_ON_DEMAND = "live: AWS Pricing API"
LIVE_SPOT = "live: EC2 spot price history"
ESTIMATE_PREFIX = "estimate"


def bundled_list(region: str, as_of: str) -> str:
    return f"bundled AWS on-demand list prices ({region}, as of {as_of})"


def region_estimate(region: str, prices_region: str, as_of: str) -> str:
    """Karpenter's own fallback: a region without a bundled table is priced from us-east-1's."""
    return f"estimate: {prices_region} list prices as of {as_of} ({region} prices are not bundled)"


def user_file(path: str) -> str:
    return f"user price file {path}"


def is_estimate(source: str) -> bool:
    return source.startswith(ESTIMATE_PREFIX)


def legend(sources: Iterable[str]) -> list[str]:
    """The distinct sources, estimates last, for a "prices:" footer."""
    distinct = sorted({s for s in sources if s}, key=lambda s: (is_estimate(s), s))
    return distinct
