"""Interruption metrics under Karpenter's names."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

received_messages = Counter(
    "karpenter_interruption_received_messages_total",
    "Messages received from the interruption queue, by kind (malformed bodies count as 'malformed').",
    ["message_type"],
)
deleted_messages = Counter(
    "karpenter_interruption_deleted_messages_total",
    "Messages deleted from the interruption queue.",
)
message_queue_duration = Histogram(
    "karpenter_interruption_message_queue_duration_seconds",
    "Time from the event to its handling.",
    buckets=(1, 5, 10, 20, 30, 60, 120, 300),
)
actions_performed = Counter(
    "karpenter_interruption_actions_performed_total",
    "Actions taken on interruption messages.",
    ["action_type"],
)
instance_status_unhealthy = Counter(
    "karpenter_interruption_instance_status_unhealthy_total",
    "Unhealthy instances found by the DescribeInstanceStatus poller, by category.",
    ["category"],
)
