"""The AWS provider's metric families, under Karpenter's names where Karpenter (aws/karpenter-provider-aws)
has the same metric, ``adze_`` otherwise.

They live on the registry of the reconciler's ``Metrics`` the provider is given (``AWSMetrics.of``), so
``/metrics`` serves them with everything else; a provider built without one gets a private registry.
"""

from __future__ import annotations

from reconciler.cloud.aws.interruption_metrics import InterruptionMetrics
from reconciler.observability import Metrics
from reconciler.observability.metric_types import DURATION_BUCKETS, MetricFactory

SDK = ["service", "action", "code"]


class AWSMetrics:
    def __init__(self, f: MetricFactory) -> None:
        self.registry = f.registry
        self.instance_type_cpu = f.gauge("karpenter_cloudprovider_instance_type_cpu_cores",
                                         "VCPUs cores for a given instance type.", ["instance_type"])
        self.instance_type_memory = f.gauge("karpenter_cloudprovider_instance_type_memory_bytes",
                                            "Memory, in bytes, for a given instance type.", ["instance_type"])
        self.instance_launch_failures = f.counter(
            "karpenter_cloudprovider_instance_launch_failures_total", "Number of instance launch (CreateFleet "
            "offering) failures, dimensioned by availability zone, zone ID, capacity type, and launch failure reason.",
            ["zone", "zone_id", "capacity_type", "reason"])
        self.instance_termination_failures = f.counter(
            "karpenter_cloudprovider_instance_termination_failures_total", "Number of instance termination "
            "(TerminateInstances) failures, dimensioned by availability zone and zone ID.", ["zone", "zone_id"])
        # What Karpenter's AWS SDK instrumentation (aws-sdk-go-prometheus) measures, for boto3's calls.
        self.sdk_requests = f.counter("aws_sdk_go_request_total", "The total number of AWS SDK Go requests", SDK)
        self.sdk_attempts = f.counter("aws_sdk_go_request_attempt_total",
                                      "The total number of AWS SDK Go request attempts", SDK)
        self.sdk_duration = f.histogram("aws_sdk_go_request_duration_seconds", "Latency of AWS SDK Go requests", SDK,
                                        buckets=DURATION_BUCKETS)
        self.sdk_attempt_duration = f.histogram("aws_sdk_go_request_attempt_duration_seconds",
                                                "Latency of AWS SDK Go request attempts", SDK, buckets=DURATION_BUCKETS)
        self.sdk_retries = f.histogram("aws_sdk_go_request_retry_count",
                                       "The total number of AWS SDK Go retry attempts per request", SDK,
                                       buckets=tuple(range(11)))
        self.interruption = InterruptionMetrics(f)
        # -- Adze's own ----------------------------------------------------------------------------------
        self.pricing_last_update = f.gauge(
            "adze_pricing_last_update_timestamp_seconds",
            "Unix time prices of this kind were last refreshed from AWS (0 = bundled table only).", ["kind"])
        self.pricing_staleness = f.gauge(
            "adze_pricing_staleness_seconds",
            "Seconds since prices of this kind were last refreshed (or since the bundled table was generated).",
            ["kind"])
        self.pricing_refresh_failures = f.counter("adze_pricing_refresh_failures_total", "Failed price refreshes.",
                                                  ["kind"])
        self.unavailable_offerings = f.gauge("adze_cloudprovider_unavailable_offerings",
                                             "Offerings currently in the insufficient-capacity cache.")
        self.garbage_collected_instances = f.counter(
            "adze_cloudprovider_garbage_collected_instances_total",
            "Instances terminated because no NodeClaim references them.")

    @classmethod
    def of(cls, metrics: Metrics | None) -> AWSMetrics:
        """The AWS group of ``metrics`` (one per registry), or of a private ``Metrics`` when None."""
        return (metrics or Metrics()).group("aws", cls)
