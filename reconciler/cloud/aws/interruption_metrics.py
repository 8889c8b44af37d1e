"""Interruption metrics under Karpenter's names (part of the AWS provider's group, ``AWSMetrics.interruption``,
so they live with it: the interruption controllers use the provider, not the other way round)."""

from __future__ import annotations

from reconciler.observability.metric_types import DURATION_BUCKETS, MetricFactory


class InterruptionMetrics:
    def __init__(self, f: MetricFactory) -> None:
        self.received_messages = f.counter(
            "karpenter_interruption_received_messages_total", "Count of messages received from the SQS queue. Broken "
            "down by message type and whether the message was actionable.", ["message_type"])
        self.deleted_messages = f.counter("karpenter_interruption_deleted_messages_total",
                                          "Count of messages deleted from the SQS queue.")
        self.message_queue_duration = f.histogram(
            "karpenter_interruption_message_queue_duration_seconds",
            "Amount of time an interruption message is on the queue before it is processed by karpenter.",
            buckets=DURATION_BUCKETS)
        self.instance_status_unhealthy = f.counter(
            "karpenter_interruption_instance_status_unhealthy_total", "Count of unique unhealthy instance statuses "
            "detected from EC2 DescribeInstanceStatus. Broken down by status check category.", ["category"])
        self.actions_performed = f.counter("adze_interruption_actions_performed_total",
                                           "Actions taken on interruption messages.", ["action_type"])
