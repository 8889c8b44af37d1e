"""The interruption queue consumer: long-poll SQS, act on each message, delete it.

Each pass receives up to 10 messages (20 s long poll, 20 s visibility), handles
them concurrently and deletes every message that was handled or could not be
parsed. A message whose handling failed (e.g. the API server was unreachable)
is left in the queue and comes back after the visibility timeout. Nothing a
message contains can crash the loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconciler.cloud.aws.clients import AwsCaller
from reconciler.cloud.aws.ice import UnavailableOfferings
from reconciler.cloud.aws.interruption_metrics import InterruptionMetrics
from reconciler.cloud.aws.metrics import AWSMetrics
from reconciler.interruption.actions import REBALANCE_EVENT, decide
from reconciler.interruption.execution import NodeClaimSource, execute, nodeclaims_by_instance
from reconciler.interruption.messages import MessageParseError, parse
from reconciler.kube.api import KubeAPI
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


class InterruptionQueueConsumer:
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
