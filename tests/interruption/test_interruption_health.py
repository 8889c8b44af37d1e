"""The DescribeInstanceStatus poller: pure classification and the poll against a stubbed EC2."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import boto3
from botocore.stub import Stubber

from reconciler.cloud.aws.clients import AwsCaller
from reconciler.cloud.aws.metrics import AWSMetrics
from reconciler.interruption.actions import ActionKind
from reconciler.interruption.health import HealthPoller, ImpairmentTracker, Unhealthy, classify
from reconciler.kube.api import NODECLAIM
from reconciler.kube.memory import MemoryKube
from reconciler.observability import Metrics

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def status(instance_id: str, instance: str = "ok", system: str = "ok", events: tuple[str, ...] = ()) -> dict:
    return {
        "InstanceId": instance_id,
        "AvailabilityZone": "us-east-1a",
        "InstanceState": {"Code": 16, "Name": "running"},
        "InstanceStatus": {"Status": instance},
        "SystemStatus": {"Status": system},
        "Events": [{"Code": code, "Description": code} for code in events],
    }


def test_impairment_must_last_two_minutes_and_resets_when_healthy() -> None:
    tracker = ImpairmentTracker()
    impaired = [status("i-0000000000000000a", instance="impaired")]
    assert classify(impaired, tracker, T0) == []
    assert classify(impaired, tracker, T0 + timedelta(seconds=119)) == []
    assert classify(impaired, tracker, T0 + timedelta(seconds=120)) == [
        Unhealthy("i-0000000000000000a", "instance_status", True)
    ]
    assert classify([], tracker, T0 + timedelta(seconds=121)) == []
    assert tracker.first_seen == {}
    system = [status("i-0000000000000000b", system="impaired")]
    classify(system, tracker, T0)
    assert classify(system, tracker, T0 + timedelta(minutes=3))[0].category == "system_status"


def test_scheduled_events_act_at_once_and_gracefully() -> None:
    result = classify(
        [
            status("i-0000000000000000c", events=("instance-retirement",)),
            status("i-0000000000000000d", events=("other",)),
        ],
        ImpairmentTracker(),
        T0,
    )
    assert result == [Unhealthy("i-0000000000000000c", "event_status", False)]


def claim(name: str, instance_id: str) -> dict:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "finalizers": ["karpenter.sh/termination"]},
        "spec": {},
        "status": {"providerID": f"aws:///us-east-1a/{instance_id}"},
    }


async def test_poll_deletes_forcefully_for_impaired_and_gracefully_for_events() -> None:
    ec2 = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t")
    stub = Stubber(ec2)
    impaired, retiring = "i-0000000000000000e", "i-0000000000000000f"
    for _ in range(2):  # two polls, three filter sets each
        stub.add_response(
            "describe_instance_status", {"InstanceStatuses": [status(impaired, instance="impaired")]}
        )
        stub.add_response("describe_instance_status", {"InstanceStatuses": []})
        stub.add_response(
            "describe_instance_status",
            {"InstanceStatuses": [status(retiring, events=("system-maintenance",))]},
        )
    stub.activate()
    kube = MemoryKube()
    kube.load([claim("impaired", impaired), claim("retiring", retiring)])
    now = [T0]
    metrics = Metrics()
    poller = HealthPoller(kube, ec2, AwsCaller(2), now=lambda: now[0], metrics=AWSMetrics.of(metrics).interruption)
    first = await poller.poll_once()
    assert [(a.nodeclaim, a.kind) for a in first] == [("retiring", ActionKind.CORDON_DRAIN)]
    assert (await kube.get(NODECLAIM, "retiring"))["metadata"].get("deletionTimestamp")
    now[0] = T0 + timedelta(minutes=3)
    second = await poller.poll_once()
    assert [(a.nodeclaim, a.forceful) for a in second] == [("impaired", True)]
    # Karpenter's counter by status-check category; Adze's own count of what was done about them.
    unhealthy = "karpenter_interruption_instance_status_unhealthy_total"
    assert metrics.sample(unhealthy, {"category": "instance_status"}) == 1
    assert metrics.sample(unhealthy, {"category": "event_status"}) == 2
    assert metrics.sample("adze_interruption_actions_performed_total", {"action_type": "cordon-drain"}) == 1
    assert metrics.sample("adze_interruption_actions_performed_total", {"action_type": "delete-nodeclaim"}) == 1
    impaired_claim = await kube.get(NODECLAIM, "impaired")
    assert (
        impaired_claim["metadata"]["annotations"]["karpenter.sh/nodeclaim-termination-timestamp"]
        == "2026-01-01T00:03:00Z"
    )
    assert impaired_claim["metadata"].get("deletionTimestamp")
    stub.assert_no_pending_responses()
