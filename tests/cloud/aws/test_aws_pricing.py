"""Pricing: bundled table, Pricing API refresh (stubbed: moto has no Pricing API), spot history, staleness."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import boto3
import pytest
from botocore.stub import Stubber

from reconciler.cloud.aws.clients import AwsCaller, pricing_region
from reconciler.cloud.aws.metrics import AWSMetrics
from reconciler.cloud.aws.pricing import PricingProvider, parse_price_list_item
from reconciler.observability import Metrics


def price_item(instance_type: str, usd: str) -> str:
    return json.dumps(
        {
            "product": {"productFamily": "Compute Instance", "attributes": {"instanceType": instance_type}},
            "terms": {
                "OnDemand": {
                    "SKU.T": {"priceDimensions": {"SKU.T.R": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}}
                }
            },
        }
    )


def stubbed_pricing(pages: list[list[str]]) -> tuple[object, Stubber]:
    client = boto3.client(
        "pricing", region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t"
    )
    stub = Stubber(client)
    for page in pages:
        stub.add_response("get_products", {"PriceList": page, "FormatVersion": "aws_v1"})
    stub.activate()
    return client, stub


def test_price_list_items_parse_and_bad_ones_are_skipped() -> None:
    assert parse_price_list_item(price_item("m5.large", "0.0960000000")) == ("m5.large", 0.096)
    assert parse_price_list_item(price_item("m5.large", "0.0000000000")) is None
    assert parse_price_list_item("{not json") is None
    assert parse_price_list_item(json.dumps({"product": {}})) is None


def test_pricing_endpoint_region_follows_partition_rules() -> None:
    assert pricing_region("eu-west-1") == "eu-central-1"
    assert pricing_region("ap-southeast-2") == "ap-south-1"
    assert pricing_region("us-west-2") == "us-east-1"


async def test_on_demand_refresh_replaces_table_prices_and_resets_staleness() -> None:
    clock = [datetime(2026, 11, 1, tzinfo=UTC).timestamp()]
    metrics = Metrics()
    prices = PricingProvider(
        "us-east-1",
        {"m5.large": 0.096, "old.type": 1.0},
        bundled_as_of=datetime(2026, 7, 20, tzinfo=UTC),
        clock=lambda: clock[0],
        metrics=AWSMetrics.of(metrics),
    )
    assert prices.staleness("on-demand") == pytest.approx(
        (datetime(2026, 11, 1) - datetime(2026, 7, 20)).total_seconds()
    )
    client, stub = stubbed_pricing(
        [[price_item("m5.large", "0.1"), price_item("c5.large", "0.085")], [price_item("m5.metal", "4.6")]]
    )
    assert await prices.refresh_on_demand(AwsCaller(2), client) == 3
    stub.assert_no_pending_responses()
    assert prices.on_demand_price("m5.large") == 0.1
    assert prices.on_demand_price("old.type") == 1.0  # merged, never dropped
    assert prices.staleness("on-demand") == 0
    clock[0] += 60
    assert metrics.sample("adze_pricing_staleness_seconds", {"kind": "on-demand"}) == pytest.approx(60)


async def test_on_demand_refresh_keeps_old_prices_when_a_query_comes_back_empty() -> None:
    metrics = Metrics()
    prices = PricingProvider("us-east-1", {"m5.large": 0.096}, metrics=AWSMetrics.of(metrics))
    client, _ = stubbed_pricing([[price_item("m5.large", "0.5")], []])
    assert await prices.refresh_on_demand(AwsCaller(2), client) == 0
    assert prices.on_demand_price("m5.large") == 0.096
    assert metrics.sample("adze_pricing_refresh_failures_total", {"kind": "on-demand"}) == 1


async def test_spot_prices_from_price_history(moto_env) -> None:
    prices = PricingProvider("us-east-1", {"m5.large": 0.096})
    assert prices.spot_price("m5.large", "us-east-1a") == 0.096  # before any refresh: on-demand
    ec2 = moto_env.client("ec2")
    merged = await prices.refresh_spot(AwsCaller(2), ec2, datetime.now(UTC))
    assert merged > 1000  # moto answers one (placeholder) price per offering
    assert prices.spot_price("m5.large", "us-east-1a") == 0.00001
    assert prices.spot_price("m5.large", "us-east-9z") is None  # after a refresh, no price = no offering
    assert prices.staleness("spot") == pytest.approx(0, abs=5)
