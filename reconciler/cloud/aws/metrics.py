"""Prometheus metrics of the AWS provider, under Karpenter's metric names.

Registered once at import in the default registry, which the reconciler's
metrics endpoint serves.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

_NS = "karpenter"

instance_launch_failures = Counter(
    f"{_NS}_cloudprovider_instance_launch_failures_total",
    "Fleet errors per offering when launching instances.",
    ["instance_type", "capacity_type", "zone", "error"],
)
instance_termination_failures = Counter(
    f"{_NS}_cloudprovider_instance_termination_failures_total",
    "Failed TerminateInstances calls.",
    ["error"],
)
errors = Counter(
    f"{_NS}_cloudprovider_errors_total",
    "AWS API errors by operation and error code.",
    ["operation", "error"],
)
api_duration = Histogram(
    f"{_NS}_cloudprovider_duration_seconds",
    "Duration of AWS API calls, retries included.",
    ["operation"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
offering_price_estimate = Gauge(
    f"{_NS}_cloudprovider_instance_type_offering_price_estimate",
    "Estimated hourly price of an offering (list price; discounts are not known).",
    ["instance_type", "capacity_type", "zone"],
)
offering_available = Gauge(
    f"{_NS}_cloudprovider_instance_type_offering_available",
    "1 when the offering can be launched, 0 when it is unavailable (e.g. insufficient capacity).",
    ["instance_type", "capacity_type", "zone"],
)
pricing_last_update = Gauge(
    f"{_NS}_pricing_last_update_timestamp_seconds",
    "Unix time prices of this kind were last refreshed from AWS (0 = bundled table only).",
    ["kind"],
)
pricing_staleness = Gauge(
    f"{_NS}_pricing_staleness_seconds",
    "Seconds since prices of this kind were last refreshed (or since the bundled table was generated).",
    ["kind"],
)
pricing_refresh_failures = Counter(
    f"{_NS}_pricing_refresh_failures_total",
    "Failed price refreshes.",
    ["kind"],
)
unavailable_offerings = Gauge(
    f"{_NS}_cloudprovider_unavailable_offerings",
    "Offerings currently in the insufficient-capacity cache.",
)
garbage_collected_instances = Counter(
    f"{_NS}_nodeclaims_garbage_collected_instances_total",
    "Instances terminated because no NodeClaim references them.",
)
