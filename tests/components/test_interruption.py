"""The interruption queue, its policy, and the EventBridge rules that feed it."""

from __future__ import annotations

import json

from pulumi_harness import ACCOUNT_ID, ProgramRun, run_stack

from components.interruption import TARGET_ID

EXPECTED_PATTERNS = [
    {"source": ["aws.health"], "detail-type": ["AWS Health Event"]},
    {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"]},
    {"source": ["aws.ec2"], "detail-type": ["EC2 Capacity Reservation Instance Interruption Warning"]},
]


def test_queue_keeps_messages_five_minutes_with_sqs_managed_encryption(dev: ProgramRun) -> None:
    queue = dev.one("aws:sqs/queue:Queue").inputs
    assert queue["messageRetentionSeconds"] == 300
    assert queue["sqsManagedSseEnabled"] is True
    assert "kmsMasterKeyId" not in queue
    assert "name" not in queue  # auto-named: clusters in one account never collide


def test_kms_encryption_creates_a_key_eventbridge_may_use(staging: ProgramRun) -> None:
    key = staging.one("aws:kms/key:Key")
    assert key.inputs["enableKeyRotation"] is True
    policy = json.loads(key.inputs["policy"])
    events = next(s for s in policy["Statement"] if s.get("Principal") == {"Service": "events.amazonaws.com"})
    assert set(events["Action"]) == {"kms:GenerateDataKey", "kms:Decrypt"}
    queue = staging.one("aws:sqs/queue:Queue").inputs
    assert queue["kmsMasterKeyId"] == f"arn:aws:kms:us-west-2:{ACCOUNT_ID}:key/{key.id.removesuffix('-id')}"
    assert queue["sqsManagedSseEnabled"] is False


def test_a_given_kms_key_is_used_as_is() -> None:
    key_arn = "arn:aws:kms:us-west-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    run = run_stack("dev", **{"adze:interruption": {"encryption": "kms", "kmsKeyArn": key_arn}})
    assert not run.of_type("aws:kms/key:Key")
    assert run.one("aws:sqs/queue:Queue").inputs["kmsMasterKeyId"] == key_arn


def test_five_rules_with_exact_patterns_each_targeting_the_queue(any_stack: ProgramRun) -> None:
    rules = any_stack.of_type("aws:cloudwatch/eventRule:EventRule")
    assert sorted((json.loads(r.inputs["eventPattern"]) for r in rules), key=json.dumps) == sorted(
        EXPECTED_PATTERNS, key=json.dumps
    )
    assert all("name" not in r.inputs for r in rules)  # auto-named
    queue = any_stack.one("aws:sqs/queue:Queue")
    queue_arn = f"arn:aws:sqs:{any_stack.region}:{ACCOUNT_ID}:{queue.id.removesuffix('-id')}"
    targets = any_stack.of_type("aws:cloudwatch/eventTarget:EventTarget")
    assert {t.inputs["rule"] for t in targets} == {r.id.removesuffix("-id") for r in rules}
    assert all(t.inputs["arn"] == queue_arn and t.inputs["targetId"] == TARGET_ID for t in targets)


def test_rebalance_rule_can_be_left_out() -> None:
    run = run_stack("dev", **{"adze:interruption": {"rebalanceRule": False}})
    patterns = [
        json.loads(r.inputs["eventPattern"]) for r in run.of_type("aws:cloudwatch/eventRule:EventRule")
    ]
    assert len(patterns) == 4
    assert {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]} not in patterns


def test_queue_policy_allows_only_this_stacks_rules_and_denies_http(dev: ProgramRun) -> None:
    policy = json.loads(dev.one("aws:sqs/queuePolicy:QueuePolicy").inputs["policy"])
    allow = next(s for s in policy["Statement"] if s["Effect"] == "Allow")
    rule_arns = sorted(
        f"arn:aws:events:us-west-2:{ACCOUNT_ID}:rule/{r.id.removesuffix('-id')}"
        for r in dev.of_type("aws:cloudwatch/eventRule:EventRule")
    )
    assert allow["Condition"] == {"ArnEquals": {"aws:SourceArn": rule_arns}}
    assert allow["Principal"] == {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]}
    deny = next(s for s in policy["Statement"] if s["Effect"] == "Deny")
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_disabled_interruption_means_no_queue_no_policy_no_env() -> None:
    run = run_stack("dev", **{"adze:interruption": {"enabled": False}})
    assert not run.of_type("aws:sqs/queue:Queue")
    assert not run.of_type("aws:cloudwatch/eventRule:EventRule")
    assert not [p for p in run.of_type("aws:iam/policy:Policy") if p.name.endswith("-interruption")]
    deployment = next(run.k8s_objects("Deployment"))
    env = deployment.inputs["spec"]["template"]["spec"]["containers"][0]["env"]
    assert "INTERRUPTION_QUEUE" not in {e["name"] for e in env}
    assert run.outputs["interruptionQueueName"] is None
