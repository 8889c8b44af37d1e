"""The interruption queue: SQS fed by EventBridge rules for spot, rebalance, health and state-change events.

Rules are auto-named, so several clusters in one account and region never collide;
the queue policy accepts messages only from this stack's rules, and only over TLS.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components.common import type_token
from components.config import InterruptionConfig
from components.policies import AwsScope, queue_key_policy, queue_policy

QUEUE_RETENTION_SECONDS = 300
TARGET_ID = "AdzeInterruptionQueueTarget"


@dataclass(slots=True, frozen=True)
class InterruptionRule:
    key: str
    source: str
    detail_type: str
    description: str

    def event_pattern(self) -> dict[str, list[str]]:
        return {"source": [self.source], "detail-type": [self.detail_type]}


INTERRUPTION_RULES = (
    InterruptionRule("health", "aws.health", "AWS Health Event", "Scheduled EC2 maintenance (AWS Health)"),
    InterruptionRule(
        "spot-interruption",
        "aws.ec2",
        "EC2 Spot Instance Interruption Warning",
        "Two-minute spot interruption",
    ),
    InterruptionRule("rebalance", "aws.ec2", "EC2 Instance Rebalance Recommendation", "Spot rebalance recommendation"),
    InterruptionRule(
        "state-change",
        "aws.ec2",
        "EC2 Instance State-change Notification",
        "Instance stopping or terminating",
    ),
    InterruptionRule(
        "capacity-reservation",
        "aws.ec2",
        "EC2 Capacity Reservation Instance Interruption Warning",
        "Capacity reservation interruption",
    ),
)


def rules_for(config: InterruptionConfig) -> tuple[InterruptionRule, ...]:
    return tuple(rule for rule in INTERRUPTION_RULES if rule.key != "rebalance" or config.rebalance_rule)


@dataclass(slots=True)
class InterruptionArgs:
    cluster_name: str
    config: InterruptionConfig
    scope: pulumi.Output[AwsScope]
    tags: dict[str, str] = field(default_factory=dict)


class Interruption(pulumi.ComponentResource):
    queue_name: pulumi.Output[str]
    queue_arn: pulumi.Output[str]
    queue_url: pulumi.Output[str]
    kms_key_arn: pulumi.Output[str] | None
    rule_arns: list[pulumi.Output[str]]

    def __init__(self, name: str, args: InterruptionArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_token("Interruption"), name, {}, opts)
        child = pulumi.ResourceOptions(parent=self)
        config = args.config

        self.kms_key_arn = None
        if config.encryption == "kms":
            if config.kms_key_arn:
                self.kms_key_arn = pulumi.Output.from_input(config.kms_key_arn)
            else:
                key = aws.kms.Key(
                    f"{name}-queue-key",
                    description=f"Adze interruption queue of EKS cluster {args.cluster_name}",
                    enable_key_rotation=True,
                    deletion_window_in_days=7,
                    policy=args.scope.apply(lambda s: json.dumps(queue_key_policy(s))),
                    tags=args.tags,
                    opts=child,
                )
                self.kms_key_arn = key.arn
        queue = aws.sqs.Queue(
            f"{name}-queue",
            message_retention_seconds=QUEUE_RETENTION_SECONDS,
            sqs_managed_sse_enabled=config.encryption == "sqs-managed",
            kms_master_key_id=self.kms_key_arn,
            kms_data_key_reuse_period_seconds=300 if self.kms_key_arn is not None else None,
            tags=args.tags,
            opts=child,
        )
        self.queue_name = queue.name
        self.queue_arn = queue.arn
        self.queue_url = queue.url

        self.rule_arns = []
        for rule in rules_for(config):
            event_rule = aws.cloudwatch.EventRule(
                f"{name}-{rule.key}",
                description=f"Adze ({args.cluster_name}): {rule.description}",
                event_pattern=json.dumps(rule.event_pattern()),
                tags=args.tags,
                opts=child,
            )
            aws.cloudwatch.EventTarget(
                f"{name}-{rule.key}",
                rule=event_rule.name,
                arn=queue.arn,
                target_id=TARGET_ID,
                opts=child,
            )
            self.rule_arns.append(event_rule.arn)
        aws.sqs.QueuePolicy(
            f"{name}-queue-policy",
            queue_url=queue.url,
            policy=pulumi.Output.all(args.scope, queue.arn, *self.rule_arns).apply(
                lambda values: json.dumps(queue_policy(values[0], values[1], list(values[2:])))
            ),
            opts=child,
        )
        self.register_outputs({"queue_name": self.queue_name, "queue_arn": self.queue_arn})
