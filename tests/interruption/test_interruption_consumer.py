"""The SQS consumer against moto SQS/EventBridge and the in-memory API server."""

from __future__ import annotations

import json
import random
import string
from datetime import UTC, datetime
from typing import Any

import pytest
from support.timescale import scaled

from reconciler.cloud.aws.clients import AwsCaller
from reconciler.cloud.aws.ice import UnavailableOfferings
from reconciler.cloud.aws.metrics import AWSMetrics
from reconciler.interruption.messages import MessageParseError, parse
from reconciler.interruption.queue_consumer import InterruptionQueueConsumer, InterruptionSettings
from reconciler.kube.api import NODE, NODECLAIM, ApiError
from reconciler.kube.memory import MemoryKube
from reconciler.observability import Metrics
from reconciler.settings import Settings, SettingsError

INSTANCE = "i-0123456789abcdef0"


def nodeclaim(name: str = "default-abc", instance: str = INSTANCE) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "finalizers": ["karpenter.sh/termination"],
            "labels": {
                "karpenter.sh/nodepool": "default",
                "node.kubernetes.io/instance-type": "m5.large",
                "topology.kubernetes.io/zone": "us-east-1a",
                "karpenter.sh/capacity-type": "spot",
            },
        },
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
        "status": {"providerID": f"aws:///us-east-1a/{instance}", "nodeName": f"node-{name}"},
    }


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}}


def event(detail_type: str, detail: dict[str, Any], source: str = "aws.ec2") -> str:
    return json.dumps(
        {
            "version": "0",
            "id": "e-1",
            "detail-type": detail_type,
            "source": source,
            "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "detail": detail,
        }
    )


def controller(kube: MemoryKube, sqs: Any, queue: str, **settings: Any) -> InterruptionQueueConsumer:
    return InterruptionQueueConsumer(
        kube,
        sqs,
        InterruptionSettings(queue_name=queue, wait_seconds=0, **settings),
        caller=AwsCaller(4),
        unavailable=UnavailableOfferings(),
        metrics=AWSMetrics.of(METRICS).interruption,
    )


def queue_depth(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


METRICS = Metrics()  # the consumers of this module report here


def metric(name: str, **labels: str) -> float:
    return METRICS.sample(name, labels) or 0.0


async def drain_queue(consumer: InterruptionQueueConsumer) -> int:
    total = 0
    while received := await consumer.poll_once():
        total += received
    return total


async def test_spot_interruption_deletes_the_nodeclaim_and_marks_the_offering(sqs, queue) -> None:
    name, url = queue
    kube = MemoryKube()
    kube.load([nodeclaim(), nodeclaim("other", "i-0fedcba9876543210")])
    sqs.send_message(
        QueueUrl=url,
        MessageBody=event(
            "EC2 Spot Instance Interruption Warning",
            {"instance-id": INSTANCE, "instance-action": "terminate"},
        ),
    )
    consumer = controller(kube, sqs, name)
    assert await drain_queue(consumer) == 1
    claim = await kube.get(NODECLAIM, "default-abc")
    assert claim["metadata"].get("deletionTimestamp")  # finalizer keeps it until termination completes
    assert not (await kube.get(NODECLAIM, "other"))["metadata"].get("deletionTimestamp")
    assert consumer.unavailable.is_unavailable("spot", "m5.large", "us-east-1a")
    assert queue_depth(sqs, url) == 0


async def test_rebalance_drain_mode_cordons_then_deletes(sqs, queue) -> None:
    name, url = queue
    kube = MemoryKube()
    kube.load([nodeclaim(), node("node-default-abc")])
    sqs.send_message(
        QueueUrl=url, MessageBody=event("EC2 Instance Rebalance Recommendation", {"instance-id": INSTANCE})
    )
    # As a user configures it: environment -> validated Settings -> the consumer's settings.
    settings = InterruptionSettings.from_settings(
        Settings.from_env({"INTERRUPTION_QUEUE": name, "REBALANCE_HANDLING": "drain"})
    )
    assert (settings.queue_name, settings.rebalance) == (name, "drain")
    await drain_queue(controller(kube, sqs, name, rebalance=settings.rebalance))
    cordoned = await kube.get(NODE, "node-default-abc")
    assert cordoned["spec"]["unschedulable"] is True
    assert {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"} in cordoned["spec"]["taints"]
    assert (await kube.get(NODECLAIM, "default-abc"))["metadata"].get("deletionTimestamp")


async def test_rebalance_event_mode_leaves_the_node_alone(sqs, queue) -> None:
    name, url = queue
    kube = MemoryKube()
    kube.load([nodeclaim(), node("node-default-abc")])
    sqs.send_message(
        QueueUrl=url, MessageBody=event("EC2 Instance Rebalance Recommendation", {"instance-id": INSTANCE})
    )
    await drain_queue(controller(kube, sqs, name))
    assert not (await kube.get(NODE, "node-default-abc"))["spec"].get("unschedulable")
    assert not (await kube.get(NODECLAIM, "default-abc"))["metadata"].get("deletionTimestamp")
    assert queue_depth(sqs, url) == 0


def test_bad_rebalance_handling_is_refused_naming_the_variable() -> None:
    with pytest.raises(SettingsError, match=r"^REBALANCE_HANDLING: 'ignore' must be one of event, drain"):
        Settings.from_env({"INTERRUPTION_QUEUE": "q", "REBALANCE_HANDLING": "ignore"})
    assert InterruptionSettings.from_settings(Settings.from_env({"INTERRUPTION_QUEUE": "q"})).rebalance == "event"


async def test_run_loop_consumes_until_stopped(sqs, queue) -> None:
    import asyncio

    name, url = queue
    kube = MemoryKube()
    kube.load([nodeclaim()])
    consumer = controller(kube, sqs, name)
    consumer.settings = InterruptionSettings(queue_name=name, wait_seconds=1)
    stop = asyncio.Event()
    task = asyncio.create_task(consumer.run(stop))
    sqs.send_message(
        QueueUrl=url,
        MessageBody=event(
            "EC2 Instance State-change Notification", {"instance-id": INSTANCE, "state": "terminated"}
        ),
    )
    for _ in range(100):
        if (await kube.get(NODECLAIM, "default-abc"))["metadata"].get("deletionTimestamp"):
            break
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(task, timeout=scaled(10))
    assert (await kube.get(NODECLAIM, "default-abc"))["metadata"].get("deletionTimestamp")


async def test_failed_handling_keeps_the_message_for_a_retry(sqs, queue) -> None:
    name, url = queue
    kube = MemoryKube()
    kube.load([nodeclaim()])
    sqs.send_message(
        QueueUrl=url,
        MessageBody=event(
            "EC2 Instance State-change Notification", {"instance-id": INSTANCE, "state": "stopping"}
        ),
    )
    kube.inject_fault("delete", ApiError(503, "ServiceUnavailable", "etcd is sad"), kind=NODECLAIM)
    consumer = controller(kube, sqs, name)
    assert await consumer.poll_once() == 1
    assert queue_depth(sqs, url) == 1  # still there, invisible until the visibility timeout
    assert not (await kube.get(NODECLAIM, "default-abc"))["metadata"].get("deletionTimestamp")


async def test_eventbridge_rule_delivers_scheduled_change_end_to_end(moto_url, sqs, queue) -> None:
    import boto3

    name, url = queue
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events = boto3.client(
        "events",
        region_name="us-east-1",
        endpoint_url=moto_url,
        aws_access_key_id="t",
        aws_secret_access_key="t",
    )
    rule = f"health-{name}"
    events.put_rule(
        Name=rule, EventPattern=json.dumps({"source": ["aws.health"], "detail-type": ["AWS Health Event"]})
    )
    events.put_targets(Rule=rule, Targets=[{"Id": "KarpenterInterruptionQueueTarget", "Arn": arn}])
    detail = {
        "service": "EC2",
        "eventTypeCategory": "scheduledChange",
        "affectedEntities": [{"entityValue": INSTANCE}],
    }
    events.put_events(
        Entries=[{"Source": "aws.health", "DetailType": "AWS Health Event", "Detail": json.dumps(detail)}]
    )
    kube = MemoryKube()
    kube.load([nodeclaim()])
    assert await drain_queue(controller(kube, sqs, name)) == 1
    assert (await kube.get(NODECLAIM, "default-abc"))["metadata"].get("deletionTimestamp")
    events.remove_targets(Rule=rule, Ids=["KarpenterInterruptionQueueTarget"])
    events.delete_rule(Name=rule)


def fuzzed_bodies(count: int, seed: int = 1) -> list[str]:
    """Malformed and adversarial bodies: truncated/mutated real events, wrong types, junk, huge nesting."""
    rng = random.Random(seed)
    valid = [
        event(
            "EC2 Spot Instance Interruption Warning",
            {"instance-id": INSTANCE, "instance-action": "terminate"},
        ),
        event("EC2 Instance State-change Notification", {"instance-id": INSTANCE, "state": "terminated"}),
        event(
            "AWS Health Event",
            {"service": "EC2", "eventTypeCategory": "scheduledChange", "affectedEntities": [{}]},
            "aws.health",
        ),
        event("EC2 Instance Rebalance Recommendation", {"instance-id": INSTANCE}),
    ]
    alphabet = string.printable + "éλ中🙂\u00a0"
    bodies = []
    for i in range(count):
        choice = i % 8
        base = rng.choice(valid)
        if choice == 0:
            body = base[: rng.randrange(1, len(base))]
        elif choice == 1:
            position = rng.randrange(len(base))
            body = base[:position] + rng.choice(alphabet) + base[position + 1 :]
        elif choice == 2:
            body = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 300)))
        elif choice == 3:
            document = json.loads(base)
            document["detail"] = rng.choice([None, 5, "x", [], {"instance-id": rng.random()}, {"state": 3}])
            body = json.dumps(document)
        elif choice == 4:
            body = json.dumps(rng.choice([[], 0, "s", None, True, [{"version": "0"}]]))
        elif choice == 5:
            depth = rng.randrange(10, 2000)
            body = "[" * depth + "]" * depth
        elif choice == 6:
            document = json.loads(base)
            document[rng.choice(["version", "source", "detail-type", "time"])] = rng.choice(
                [None, 0, {}, "0", ""]
            )
            body = json.dumps(document)
        else:
            body = json.dumps({"detail": {"instance-id": "i-" + "f" * rng.randrange(1, 40)}, "version": "0"})
        bodies.append(body)
    return bodies


# The fast set sends 200 bodies (each of the eight fuzz shapes 25 times), the full suite 1,000.
@pytest.mark.parametrize("count", [200, pytest.param(1000, marks=pytest.mark.slow)])
async def test_fuzzed_bodies_are_all_deleted_and_counted(sqs, queue, count: int) -> None:
    name, url = queue
    kube = MemoryKube()
    kube.load([nodeclaim()])
    bodies = fuzzed_bodies(count)
    kinds = [
        "no_op",
        "spot_interrupted",
        "instance_terminated",
        "scheduled_change",
        "rebalance_recommendation",
    ]
    before_received = sum(
        metric("karpenter_interruption_received_messages_total", message_type=k) for k in kinds
    )
    before_deleted = metric("karpenter_interruption_deleted_messages_total")
    malformed = sum(1 for body in bodies if _malformed(body))
    consumer = controller(kube, sqs, name)
    handled = 0
    # moto's SQS slows down with queue depth, so the bodies arrive in waves of 50.
    for wave in range(0, len(bodies), 50):
        for start in range(wave, wave + 50, 10):
            batch = [{"Id": str(i), "MessageBody": body} for i, body in enumerate(bodies[start : start + 10])]
            answer = sqs.send_message_batch(QueueUrl=url, Entries=batch)
            assert not answer.get("Failed")
        handled += await drain_queue(consumer)
    assert handled == count
    assert queue_depth(sqs, url) == 0
    received = sum(metric("karpenter_interruption_received_messages_total", message_type=k) for k in kinds)
    # As in Karpenter, an unparseable body is deleted but not counted as received.
    assert malformed > count // 2
    assert received - before_received == count - malformed
    assert metric("karpenter_interruption_deleted_messages_total") - before_deleted == count


def _malformed(body: str) -> bool:
    try:
        parse(body)
    except MessageParseError:
        return True
    return False


async def test_the_consumer_finds_nodeclaims_in_the_informer_cache_without_listing(sqs, queue) -> None:
    """Issue 16 (API-server load): with the live controller's cache, a message batch costs no LIST."""
    from reconciler.state.store import StateStore

    name, url = queue
    kube = MemoryKube()
    kube.load([nodeclaim(), nodeclaim("other", "i-0fedcba9876543210")])
    cache = StateStore()
    for claim in kube.objects(NODECLAIM):
        cache.upsert(claim)
    lists: list[str] = []
    listing = kube.list

    async def counted(kind: Any, *args: Any, **kwargs: Any) -> Any:
        lists.append(kind.kind)
        return await listing(kind, *args, **kwargs)

    kube.list = counted  # type: ignore[method-assign]
    sqs.send_message(QueueUrl=url, MessageBody=event(
        "EC2 Spot Instance Interruption Warning", {"instance-id": INSTANCE, "instance-action": "terminate"}))
    consumer = InterruptionQueueConsumer(kube, sqs, InterruptionSettings(queue_name=name, wait_seconds=0),
                                         caller=AwsCaller(4), nodeclaims=cache.nodeclaims)
    assert await drain_queue(consumer) == 1
    assert (await kube.get(NODECLAIM, "default-abc"))["metadata"].get("deletionTimestamp")
    assert lists == []
