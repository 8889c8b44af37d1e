"""EC2 prices: bundled on-demand table, Pricing API refresh, spot price history.

Start-up prices come from the bundled catalogue (on-demand list prices) and spot
starts equal to on-demand, as in Karpenter. ``refresh_on_demand`` replaces them
with the Pricing API's ``GetProducts`` answer (Linux, shared tenancy + bare
metal, used capacity, on-demand); ``refresh_spot`` takes the latest
``DescribeSpotPriceHistory`` price per (type, zone). Prices are merged, never
dropped; after the first successful spot refresh a zone without a spot price
has no spot offering. Staleness is exported as a metric per kind.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from reconciler.cloud import pricesource
from reconciler.cloud.aws.clients import AwsCaller
from reconciler.cloud.aws.metrics import AWSMetrics

SPOT_PRODUCT_DESCRIPTIONS = ["Linux/UNIX", "Linux/UNIX (Amazon VPC)"]


class PriceSource(Protocol):
    """What instance-type offerings need to price themselves."""

    def on_demand_price(self, instance_type: str, zone: str | None = None) -> float | None: ...

    def spot_price(self, instance_type: str, zone: str) -> float | None: ...

    def source_of(self, capacity_type: str, instance_type: str, zone: str) -> str:
        """Where the price of this offering comes from (``reconciler.cloud.pricesource`` labels)."""
        ...


class PricingProvider:
    def __init__(
        self,
        region: str,
        on_demand: Mapping[str, float],
        *,
        bundled_as_of: datetime | None = None,
        bundled_source: str = "",
        clock: Callable[[], float] = time.time,
        metrics: AWSMetrics | None = None,
    ) -> None:
        self.region = region
        self.metrics = metrics = AWSMetrics.of(None) if metrics is None else metrics
        self._on_demand: dict[str, float] = dict(on_demand)
        self._on_demand_live: set[str] = set()
        self._bundled_source = bundled_source or (
            pricesource.bundled_list(region, bundled_as_of.date().isoformat()) if bundled_as_of else "bundled table"
        )
        self._spot: dict[tuple[str, str], float] = {}
        self._spot_source = pricesource.LIVE_SPOT
        self._spot_refreshed = False
        self._clock = clock
        self._bundled_time = bundled_as_of.timestamp() if bundled_as_of else clock()
        self._updated: dict[str, float] = {}
        for kind in ("on-demand", "spot"):
            metrics.pricing_last_update.labels(kind=kind).set(0)
            # Evaluated at scrape time, so the gauge keeps growing between refreshes.
            metrics.pricing_staleness.labels(kind=kind).set_function(functools.partial(self.staleness, kind))

    # --- PriceSource ---------------------------------------------------------------------------------

    def on_demand_price(self, instance_type: str, zone: str | None = None) -> float | None:
        return self._on_demand.get(instance_type)

    def source_of(self, capacity_type: str, instance_type: str, zone: str) -> str:
        if capacity_type == "spot":
            if (instance_type, zone) in self._spot:
                return self._spot_source
            return pricesource.SPOT_UNTIL_REFRESH
        return pricesource.LIVE_ON_DEMAND if instance_type in self._on_demand_live else self._bundled_source

    def spot_price(self, instance_type: str, zone: str) -> float | None:
        price = self._spot.get((instance_type, zone))
        if price is not None:
            return price
        if self._spot_refreshed:
            return None
        return self._on_demand.get(instance_type)

    # --- staleness -----------------------------------------------------------------------------------

    def staleness(self, kind: str) -> float:
        """Seconds since prices of ``kind`` were refreshed (since the table was built if never)."""
        return max(self._clock() - self._updated.get(kind, self._bundled_time), 0.0)

    def _mark_updated(self, kind: str) -> None:
        now = self._clock()
        self._updated[kind] = now
        self.metrics.pricing_last_update.labels(kind=kind).set(now)

    # --- refresh -------------------------------------------------------------------------------------

    async def refresh_on_demand(self, caller: AwsCaller, pricing_client: Any) -> int:
        """Replace on-demand prices from the Pricing API; returns how many types were priced.

        Both queries (shared-tenancy instances, bare metal) must answer or the old
        prices stay, so a partial outage never shrinks the table.
        """
        try:
            shared = await self._get_products(caller, pricing_client, "Shared", "Compute Instance")
            metal = await self._get_products(
                caller, pricing_client, "Dedicated", "Compute Instance (bare metal)"
            )
        except Exception:
            self.metrics.pricing_refresh_failures.labels(kind="on-demand").inc()
            raise
        if not shared or not metal:
            self.metrics.pricing_refresh_failures.labels(kind="on-demand").inc()
            return 0
        self._on_demand.update(metal)
        self._on_demand.update(shared)
        self._on_demand_live.update(metal, shared)
        self._mark_updated("on-demand")
        return len(shared) + len(metal)

    async def _get_products(
        self, caller: AwsCaller, client: Any, tenancy: str, family: str
    ) -> dict[str, float]:
        filters = [
            {"Type": "TERM_MATCH", "Field": field, "Value": value}
            for field, value in (
                ("regionCode", self.region),
                ("serviceCode", "AmazonEC2"),
                ("preInstalledSw", "NA"),
                ("operatingSystem", "Linux"),
                ("capacitystatus", "Used"),
                ("marketoption", "OnDemand"),
                ("tenancy", tenancy),
                ("productFamily", family),
            )
        ]
        items = await caller.paginate(
            client, "get_products", "PriceList", ServiceCode="AmazonEC2", Filters=filters
        )
        prices: dict[str, float] = {}
        for item in items:
            parsed = parse_price_list_item(item)
            if parsed:
                prices[parsed[0]] = parsed[1]
        return prices

    async def refresh_spot(self, caller: AwsCaller, ec2_client: Any, now: datetime | None = None) -> int:
        """Latest spot price per (type, zone) from DescribeSpotPriceHistory; returns rows merged."""
        start = now or datetime.fromtimestamp(self._clock(), UTC)
        try:
            rows = await caller.paginate(
                ec2_client,
                "describe_spot_price_history",
                "SpotPriceHistory",
                StartTime=start,
                ProductDescriptions=SPOT_PRODUCT_DESCRIPTIONS,
                PaginationConfig={"PageSize": 1000},
            )
        except Exception:
            self.metrics.pricing_refresh_failures.labels(kind="spot").inc()
            raise
        latest: dict[tuple[str, str], tuple[datetime, float]] = {}
        for row in rows:
            try:
                key = (str(row["InstanceType"]), str(row["AvailabilityZone"]))
                stamp = row.get("Timestamp") or datetime.min.replace(tzinfo=UTC)
                price = float(row["SpotPrice"])
            except (KeyError, TypeError, ValueError):
                continue
            if price <= 0:
                continue
            if key not in latest or stamp > latest[key][0]:
                latest[key] = (stamp, price)
        if not latest:
            self.metrics.pricing_refresh_failures.labels(kind="spot").inc()
            return 0
        self._spot.update({key: price for key, (_, price) in latest.items()})
        self._spot_source = pricesource.LIVE_SPOT
        self._spot_refreshed = True
        self._mark_updated("spot")
        return len(latest)

    def set_spot_prices(self, prices: Mapping[tuple[str, str], float], source: str = pricesource.SPOT_ESTIMATE) -> None:
        """Install spot prices from another source (the offline simulator's documented fractions)."""
        self._spot.update(prices)
        self._spot_source = source
        self._spot_refreshed = True
        self._mark_updated("spot")


def parse_price_list_item(item: str | Mapping[str, Any]) -> tuple[str, float] | None:
    """(instance type, USD/h) from one Pricing API ``PriceList`` entry; None when it has no hourly price."""
    try:
        document = json.loads(item) if isinstance(item, str) else item
        instance_type = document["product"]["attributes"]["instanceType"]
        for term in (document.get("terms") or {}).get("OnDemand", {}).values():
            for dimension in (term.get("priceDimensions") or {}).values():
                usd = (dimension.get("pricePerUnit") or {}).get("USD")
                if usd is None:
                    continue
                price = float(usd)
                if price > 0:
                    return str(instance_type), price
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return None
