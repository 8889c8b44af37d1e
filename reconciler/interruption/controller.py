"""The interruption queue consumer: long-poll SQS, act on each message, delete it.

Each pass receives up to 10 messages (20 s long poll, 20 s visibility), handles
them concurrently and deletes every message that was handled or could not be
parsed. A message whose handling failed (e.g. the API server was unreachable)
is left in the queue and comes back after the visibility timeout. Nothing a
message contains can crash the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconciler.cloud.aws.clients import AwsCaller
from reconciler.cloud.aws.ice import UnavailableOfferings
from reconciler.cloud.aws.instances import parse_provider_id
from reconciler.cloud.aws.metrics import AWSMetrics
from reconciler.interruption.actions import REBALANCE_EVENT, Action, ActionKind, decide
from reconciler.interruption.messages import MessageParseError, parse
from reconciler.interruption.metrics import InterruptionMetrics
from reconciler.kube.api import NODECLAIM, KubeAPI, Manifest, NotFoundError
from reconciler.kube.edits import edit_node
from reconciler.model import labels as wk
from reconciler.settings import Settings

log = logging.getLogger(__name__)
MAX_MESSAGES = 10
WAIT_SECONDS = 20
VISIBILITY_SECONDS = 20


@dataclass(slots=True, frozen=True)
class InterruptionSettings:
    queue_name: str
    rebalance: str = REBALANCE_EVENT  # "event" (Karpenter) | "drain"
    wait_seconds: int = WAIT_SECONDS
    health_poll_seconds: float = 60.0

    @classmethod
    def from_settings(cls, settings: Settings) -> InterruptionSettings:
        """The queue (``INTERRUPTION_QUEUE``; empty disables) and ``REBALANCE_HANDLING`` from validated settings."""
        return cls(queue_name=settings.interruption_queue, rebalance=settings.rebalance_handling)


# Where the NodeClaims come from: the live controller's informer cache (None while it has none: then a LIST).
NodeClaimSource = Callable[[], Iterable[Manifest] | None]


async def nodeclaims_by_instance(kube: KubeAPI, cached: NodeClaimSource | None = None) -> dict[str, dict[str, Any]]:
    """NodeClaims keyed by the EC2 instance ID in their ``status.providerID``, from ``cached`` when it has them
    (as Karpenter's interruption controller reads its cache), else listed through the API."""
    claims = cached() if cached is not None else None
    if claims is None:
        claims, _ = await kube.list(NODECLAIM)
    index = {}
    for claim in claims:
        provider_id = (claim.get("status") or {}).get("providerID")
        if not provider_id:
            continue
        try:
            index[parse_provider_id(str(provider_id))[1]] = claim
        except ValueError:
            continue
    return index


async def execute(
    kube: KubeAPI, action: Action, now: datetime, unavailable: UnavailableOfferings | None = None,
    metrics: InterruptionMetrics | None = None,
) -> None:
    """Carry out one action through the Kubernetes API (idempotent: a vanished object is fine)."""
    if metrics is not None:
        metrics.actions_performed.labels(action_type=action.kind.value).inc()
    if action.unavailable_offering and unavailable is not None:
        unavailable.mark_unavailable(*action.unavailable_offering, reason=action.reason)
    if action.unavailable_reservation and unavailable is not None:
        unavailable.mark_reservation_unavailable(action.unavailable_reservation)
    if action.reason and action.nodeclaim:
        await record_event(kube, action, now)
    if action.kind is ActionKind.NO_OP:
        return
    try:
        if action.kind is ActionKind.CORDON_DRAIN and action.node:
            await _cordon(kube, action.node)
        if action.forceful:
            stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
            await kube.patch(
                NODECLAIM,
                action.nodeclaim,
                {"metadata": {"annotations": {wk.NODECLAIM_TERMINATION_TIMESTAMP: stamp}}},
            )
        await kube.delete(NODECLAIM, action.nodeclaim)
    except NotFoundError:
        return


async def _cordon(kube: KubeAPI, node_name: str) -> None:
    def edit(node: Manifest) -> Manifest:
        spec = node.setdefault("spec", {})
        taints = list(spec.get("taints") or [])
        if not any(t.get("key") == wk.DISRUPTED_TAINT_KEY for t in taints):
            taints.append({"key": wk.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"})
        spec.update(unschedulable=True, taints=taints)
        return node

    with contextlib.suppress(NotFoundError):
        await edit_node(kube, node_name, edit)


async def record_event(kube: KubeAPI, action: Action, now: datetime) -> None:
    """A Kubernetes Event on the NodeClaim (best effort: events must never block handling)."""
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{action.nodeclaim}.", "namespace": "default"},
        "involvedObject": {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": action.nodeclaim},
        "reason": action.reason,
        "message": action.message,
        "type": "Warning" if action.kind is not ActionKind.NO_OP else "Normal",
        "source": {"component": "karpenter"},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
    try:
        await kube.create(event)
    except Exception as err:
        log.debug("could not record event %s: %s", action.reason, err)


class InterruptionController:
    def __init__(
        self,
        kube: KubeAPI,
        sqs: Any,
        settings: InterruptionSettings,
        *,
        caller: AwsCaller | None = None,
        unavailable: UnavailableOfferings | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        metrics: InterruptionMetrics | None = None,
        nodeclaims: NodeClaimSource | None = None,
    ) -> None:
        self.kube = kube
        self.sqs = sqs
        self.nodeclaims = nodeclaims
        self.metrics = metrics or AWSMetrics.of(None).interruption
        self.settings = settings
        self.caller = caller or AwsCaller(max_concurrency=4)
        self.unavailable = unavailable
        self._now = now
        self._queue_url: str | None = None

    async def queue_url(self) -> str:
        if self._queue_url is None:
            answer = await self.caller.call(self.sqs.get_queue_url, QueueName=self.settings.queue_name)
            self._queue_url = str(answer["QueueUrl"])
        return self._queue_url

    async def poll_once(self) -> int:
        """Receive one batch and handle it; returns how many messages were received."""
        url = await self.queue_url()
        answer = await self.caller.call(
            self.sqs.receive_message,
            QueueUrl=url,
            MaxNumberOfMessages=MAX_MESSAGES,
            WaitTimeSeconds=self.settings.wait_seconds,
            VisibilityTimeout=VISIBILITY_SECONDS,
            MessageSystemAttributeNames=["SentTimestamp"],
            MessageAttributeNames=["All"],
        )
        received = answer.get("Messages") or []
        if not received:
            return 0
        index = await nodeclaims_by_instance(self.kube, self.nodeclaims)
        results = await asyncio.gather(*(self._handle(m, index) for m in received), return_exceptions=True)
        done = [m for m, ok in zip(received, results, strict=True) if ok is True]
        if done:
            await self._delete(url, done)
        return len(received)

    async def _handle(self, sqs_message: Mapping[str, Any], index: Mapping[str, Mapping[str, Any]]) -> bool:
        """True when the message should be deleted (handled, or unparseable)."""
        try:
            message = parse(sqs_message.get("Body") or "")
        except MessageParseError as err:  # not counted as received, as in Karpenter
            log.warning("deleting malformed interruption message %s: %s", sqs_message.get("MessageId"), err)
            return True
        self.metrics.received_messages.labels(message_type=message.metric_label).inc()
        now = self._now()
        try:
            for action in decide(message, index, self.settings.rebalance):
                await execute(self.kube, action, now, self.unavailable, self.metrics)
        except Exception as err:
            log.warning(
                "handling interruption message %s failed, will retry: %s", sqs_message.get("MessageId"), err
            )
            return False
        if message.time is not None:
            self.metrics.message_queue_duration.observe(max((self._now() - message.time).total_seconds(), 0.0))
        return True

    async def _delete(self, url: str, messages: list[Mapping[str, Any]]) -> None:
        entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
        answer = await self.caller.call(self.sqs.delete_message_batch, QueueUrl=url, Entries=entries)
        self.metrics.deleted_messages.inc(len(answer.get("Successful") or []))

    async def run(self, stop: asyncio.Event) -> None:
        """Poll until ``stop`` is set; AWS errors back off briefly and never end the loop."""
        while not stop.is_set():
            try:
                await self.poll_once()
            except Exception as err:
                log.warning("interruption queue poll failed: %s", err)
                # Not wait_for: on Python 3.11 it can swallow a cancellation arriving as it times out.
                waiter = asyncio.ensure_future(stop.wait())
                try:
                    await asyncio.wait({waiter}, timeout=5.0)
                finally:
                    waiter.cancel()
