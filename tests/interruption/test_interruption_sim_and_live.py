"""One interruption, two paths: the simulator's ``interrupt`` step and the live SQS consumer act alike.

The same node (launched by the simulator) meets the same EventBridge message:
once through ``interrupt`` in a scenario, once as an SQS message the live
``InterruptionQueueConsumer`` receives from (moto) SQS. Both must reach the same
``execute`` with the same action, and leave the same effects behind it: the
offering marked unavailable, the node cordoned (rebalance under ``drain``), the
NodeClaim deleting.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from reconciler.cloud.aws.clients import AwsCaller
from reconciler.cloud.aws.ice import UnavailableOfferings
from reconciler.cloud.aws.instances import parse_provider_id
from reconciler.interruption import execution
from reconciler.interruption import queue_consumer as live_controller
from reconciler.interruption.actions import Action
from reconciler.interruption.messages import Kind, eventbridge_event
from reconciler.interruption.queue_consumer import InterruptionQueueConsumer, InterruptionSettings
from reconciler.kube.api import NODE, NODECLAIM
from reconciler.kube.memory import MemoryKube
from reconciler.model import labels as wk
from reconciler.sim import disruption_steps
from reconciler.sim.runner import Simulation
from reconciler.sim.scenario import parse_scenario

CLOCK = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Effect:
    action: Action
    marked: tuple[tuple[str, ...], ...]  # offerings / reservations marked unavailable while executing
    cordoned: bool
    tainted: bool
    claim_deleting: bool


class RecordingMarks:
    """Forwards marks to the provider's cache and remembers them."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.marked: list[tuple[str, ...]] = []

    def mark_unavailable(self, capacity_type: str, instance_type: str, zone: str, reason: str = "") -> None:
        self.marked.append(("offering", capacity_type, instance_type, zone))
        self.inner.mark_unavailable(capacity_type, instance_type, zone, reason)

    def mark_reservation_unavailable(self, reservation_id: str) -> None:
        self.marked.append(("reservation", reservation_id))
        self.inner.mark_reservation_unavailable(reservation_id)


class RecordingExecute:
    """Wraps the shared ``execution.execute`` and records what each call did."""

    def __init__(self) -> None:
        self.effects: list[Effect] = []

    async def __call__(self, kube: MemoryKube, action: Action, now: datetime, unavailable: Any = None,
                       metrics: Any = None) -> None:
        marks = RecordingMarks(unavailable) if unavailable is not None else None
        await execution.execute(kube, action, now, marks, metrics)
        node = kube.peek(NODE, action.node) if action.node else None
        claim = kube.peek(NODECLAIM, action.nodeclaim) if action.nodeclaim else None
        taints = ((node or {}).get("spec") or {}).get("taints") or []
        self.effects.append(
            Effect(
                action,
                tuple(marks.marked) if marks else (),
                bool(((node or {}).get("spec") or {}).get("unschedulable")),
                any(t.get("key") == wk.DISRUPTED_TAINT_KEY for t in taints),
                claim is None or bool(claim["metadata"].get("deletionTimestamp")),
            )
        )


def scenario(rebalance: str) -> dict[str, Any]:
    offerings = [{"capacityType": "spot", "zone": z, "price": 0.04} for z in ("us-east-1a", "us-east-1b")]
    return {
        "name": "interruption-paths",
        "settings": {"clock": "2026-01-01T00:00:00Z", "rebalanceHandling": rebalance},
        "catalog": {
            "zones": ["us-east-1a", "us-east-1b"],
            "instanceTypes": [{"name": "m5.large", "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                               "offerings": offerings}],
        },
        "objects": [
            {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
             "spec": {"template": {"spec": {
                 "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]}}}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
             "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m"}}}]}},
        ],
        "steps": [{"provision": {}}],
    }


async def through_the_simulator(kind: str, rebalance: str, monkeypatch: pytest.MonkeyPatch) -> tuple[
    list[Effect], list[dict[str, Any]], dict[str, Any]
]:
    """Interrupt the simulator's only node; returns the effects, the node and claim as they were before, and
    the step's result record."""
    sim = Simulation(parse_scenario(scenario(rebalance)))
    await sim.run()  # the provision step launches the node
    [claim] = sim.kube.objects(NODECLAIM)
    node = sim.kube.peek(NODE, claim["status"]["nodeName"])
    before = [copy.deepcopy(claim), copy.deepcopy(node)]
    recorder = RecordingExecute()
    monkeypatch.setattr(disruption_steps, "execute", recorder)
    record = _record()
    await disruption_steps.interrupt(sim.cluster, node["metadata"]["name"], kind, record, path="steps[1]")
    return recorder.effects, before, record


async def through_the_live_consumer(
    kind: str, rebalance: str, objects: list[dict[str, Any]], sqs: Any, queue: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> list[Effect]:
    name, url = queue
    kube = MemoryKube(clock=lambda: CLOCK)
    kube.load(objects)
    recorder = RecordingExecute()
    monkeypatch.setattr(live_controller, "execute", recorder)
    consumer = InterruptionQueueConsumer(
        kube, sqs, InterruptionSettings(queue_name=name, rebalance=rebalance, wait_seconds=0),
        caller=AwsCaller(4), unavailable=UnavailableOfferings(), now=lambda: CLOCK,
    )
    _, instance_id = parse_provider_id(objects[0]["status"]["providerID"])
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(eventbridge_event(Kind(kind), instance_id, CLOCK)))
    assert await consumer.poll_once() == 1
    return recorder.effects


def _record() -> dict[str, Any]:
    return {"launched": [], "bound": {}, "pending": {}, "disrupted": [], "events": []}


def test_both_paths_call_the_one_execute() -> None:
    assert disruption_steps.execute is execution.execute
    assert live_controller.execute is execution.execute


@pytest.mark.parametrize(
    ("kind", "rebalance", "expected"),
    [
        ("spot_interrupted", "event", "delete-nodeclaim"),
        ("rebalance_recommendation", "event", "no-op"),
        ("rebalance_recommendation", "drain", "cordon-drain"),
        ("instance_stopped", "event", "delete-nodeclaim"),
        ("instance_terminated", "event", "delete-nodeclaim"),
        ("scheduled_change", "event", "delete-nodeclaim"),
    ],
)
async def test_the_simulator_and_the_live_consumer_act_alike(
    kind: str, rebalance: str, expected: str, sqs: Any, queue: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    simulated, objects, record = await through_the_simulator(kind, rebalance, monkeypatch)
    live = await through_the_live_consumer(kind, rebalance, objects, sqs, queue, monkeypatch)
    assert [e.action.kind.value for e in simulated] == [expected]
    assert simulated == live
    [effect] = simulated
    assert effect.claim_deleting == (expected != "no-op")
    assert effect.cordoned == effect.tainted == (expected == "cordon-drain")
    if kind == "spot_interrupted":
        labels = objects[0]["metadata"]["labels"]
        assert effect.marked == (("offering", "spot", labels[wk.INSTANCE_TYPE], labels[wk.ZONE]),)
    else:
        assert effect.marked == ()
    # The result document keeps the format's reason; Karpenter's reason is the event.
    assert [e["reason"] for e in record["events"]][:1] == [effect.action.reason]
    assert [d["reason"] for d in record["disrupted"]] == (["Interrupted"] if expected != "no-op" else [])
