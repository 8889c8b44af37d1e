"""The AWS provider's metrics against moto: launch and termination failures with Karpenter's labels and
reasons, and the SDK request metrics of every call (service, action, HTTP status code)."""

from __future__ import annotations

import pytest
from aws_harness import FaultPlan
from test_aws_provider_moto import request

from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.cloud.aws.provider import AWSCloudProvider


def sample(provider: AWSCloudProvider, name: str, **labels: str) -> float | None:
    return provider.metrics.registry.get_sample_value(name, labels)


def zone_ids(aws: OfflineAWS) -> dict[str, str]:
    subnets = aws.client("ec2").describe_subnets(SubnetIds=list(aws.subnet_ids.values()))["Subnets"]
    return {s["AvailabilityZone"]: s.get("AvailabilityZoneId", "") for s in subnets}


async def test_fleet_errors_count_launch_failures_by_zone_and_karpenters_reason(
        aws: OfflineAWS, provider: AWSCloudProvider, faults: FaultPlan) -> None:
    faults.fleet_errors[("spot", "c5.large", "us-east-1b")] = "InsufficientFreeAddressesInSubnet"
    faults.fleet_errors[("spot", "m5.large", "us-east-1a")] = "MaxSpotInstanceCountExceeded"
    faults.fleet_errors[("spot", "m6i.large", "us-east-1c")] = "InsufficientInstanceCapacity"
    assert (await provider.create(request(), aws.nodeclass())).provider_id
    ids = zone_ids(aws)
    name = "karpenter_cloudprovider_instance_launch_failures_total"
    for zone, reason in (("us-east-1b", "InsufficientFreeAddressesInSubnet"), ("us-east-1a", "SpotQuotaExceeded"),
                         ("us-east-1c", "LaunchFailed")):  # Karpenter has no reason of its own for plain ICE
        assert sample(provider, name, zone=zone, zone_id=ids[zone], capacity_type="spot", reason=reason) == 1, zone


async def test_a_refused_termination_counts_by_zone(
        aws: OfflineAWS, provider: AWSCloudProvider, faults: FaultPlan) -> None:
    instance = await provider.create(request(), aws.nodeclass())
    record = (await provider.list_records())[0]
    faults.whole_call_errors["TerminateInstances"] = "UnauthorizedOperation"
    with pytest.raises(Exception, match="UnauthorizedOperation"):
        await provider.delete(instance.provider_id)
    assert sample(provider, "karpenter_cloudprovider_instance_termination_failures_total",
                  zone=instance.zone, zone_id=record.zone_id) == 1


async def test_every_sdk_call_is_counted_and_timed_with_its_retries(
        aws: OfflineAWS, provider: AWSCloudProvider, faults: FaultPlan) -> None:
    await provider.create(request(), aws.nodeclass())
    ok = {"service": "EC2", "action": "CreateFleet", "code": "200"}
    assert sample(provider, "aws_sdk_go_request_total", **ok) == 1
    assert sample(provider, "aws_sdk_go_request_attempt_total", **ok) == 1
    assert sample(provider, "aws_sdk_go_request_duration_seconds_count", **ok) == 1
    assert sample(provider, "aws_sdk_go_request_retry_count_sum", **ok) == 0
    faults.whole_call_errors["DescribeInstances"] = "RequestLimitExceeded"  # throttled on every attempt
    with pytest.raises(Exception, match="RequestLimitExceeded"):
        await provider.list_records()
    throttled = {"service": "EC2", "action": "DescribeInstances", "code": "400"}
    attempts = sample(provider, "aws_sdk_go_request_attempt_total", **throttled)
    assert sample(provider, "aws_sdk_go_request_total", **throttled) == 1
    assert attempts == provider.config.max_attempts + 1  # botocore's max_attempts counts the retries
    assert sample(provider, "aws_sdk_go_request_retry_count_sum", **throttled) == attempts - 1
