"""The policy evaluator behind the policy-versus-code tests: AWS's evaluation rules, one by one,
then the generated controller policies on requests shaped like the reconciler's."""

from __future__ import annotations

import pytest
from support.iam_policy import Request, UnsupportedPolicy, evaluate

from components.policies import AwsScope, controller_policies


def policy(*statements: dict) -> dict:
    return {"Version": "2012-10-17", "Statement": list(statements)}


def allow(action: str | list[str], resource: str | list[str] = "*", **extra: object) -> dict:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **extra}


def test_explicit_deny_beats_allow_and_nothing_matching_is_an_implicit_deny() -> None:
    docs = [
        policy(allow("ec2:*"), {"Sid": "NoTerminate", "Effect": "Deny", "Action": "ec2:TerminateInstances",
                                "Resource": "*"}),
    ]
    assert evaluate(docs, Request("ec2:DescribeInstances", "*")).allowed
    denied = evaluate(docs, Request("ec2:TerminateInstances", "arn:aws:ec2:us-east-1:1:instance/i-1"))
    assert (denied.outcome, denied.statements) == ("explicit-deny", ("NoTerminate",))
    assert evaluate(docs, Request("iam:PassRole", "*")).outcome == "implicit-deny"
    assert evaluate([], Request("ec2:DescribeInstances", "*")).outcome == "implicit-deny"


def test_actions_match_case_insensitively_with_wildcards_and_not_action() -> None:
    docs = [policy(allow("EC2:describe*"), allow("iam:?etRole"))]
    assert evaluate(docs, Request("ec2:DescribeSubnets", "*")).allowed
    assert evaluate(docs, Request("iam:GetRole", "*")).allowed
    assert not evaluate(docs, Request("iam:GetRolePolicy", "*")).allowed
    assert not evaluate(docs, Request("ec2:CreateFleet", "*")).allowed
    everything_but_iam = [policy({"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"})]
    assert evaluate(everything_but_iam, Request("sqs:ReceiveMessage", "*")).allowed
    assert not evaluate(everything_but_iam, Request("iam:PassRole", "*")).allowed


def test_resources_match_per_arn_segment_and_case_sensitively() -> None:
    docs = [policy(allow("ec2:RunInstances", "arn:aws:ec2:us-east-1::image/*"))]
    assert evaluate(docs, Request("ec2:RunInstances", "arn:aws:ec2:us-east-1::image/ami-1")).allowed
    # An image ARN carrying an account does not match a pattern with an empty account segment.
    assert not evaluate(docs, Request("ec2:RunInstances", "arn:aws:ec2:us-east-1:123456789012:image/ami-1")).allowed
    assert not evaluate(docs, Request("ec2:RunInstances", "arn:aws:ec2:us-east-1::IMAGE/ami-1")).allowed
    # A wildcard never spans the ':' between segments...
    spanning = [policy(allow("ec2:RunInstances", "arn:aws:ec2:us-*/*"))]
    assert not evaluate(spanning, Request("ec2:RunInstances", "arn:aws:ec2:us-east-1:1:instance/i-1")).allowed
    # ...but does span '/' inside the resource segment (instance profiles carry a path).
    profiles = [policy(allow("iam:GetInstanceProfile", "arn:aws:iam::1:instance-profile/*"))]
    assert evaluate(profiles, Request("iam:GetInstanceProfile", "arn:aws:iam::1:instance-profile/a/b/c")).allowed
    # An action without resource-level permissions is authorized against "*" only.
    assert not evaluate(profiles, Request("iam:GetInstanceProfile", "*")).allowed
    not_resource = [policy({"Effect": "Allow", "Action": "s3:*", "NotResource": "arn:aws:s3:::secret/*"})]
    assert evaluate(not_resource, Request("s3:GetObject", "arn:aws:s3:::public/x")).allowed
    assert not evaluate(not_resource, Request("s3:GetObject", "arn:aws:s3:::secret/x")).allowed


def test_condition_blocks_are_anded_and_the_values_of_one_key_ored() -> None:
    docs = [policy(allow("ec2:CreateTags", Condition={
        "StringEquals": {"aws:RequestTag/team": ["a", "b"], "ec2:CreateAction": "RunInstances"},
        "StringLike": {"aws:RequestTag/pool": "*"},
    }))]

    def check(**context: str) -> bool:
        return evaluate(docs, Request("ec2:CreateTags", "*", context)).allowed

    assert check(**{"aws:RequestTag/team": "b", "ec2:CreateAction": "RunInstances", "aws:RequestTag/pool": "x"})
    assert not check(**{"aws:RequestTag/team": "c", "ec2:CreateAction": "RunInstances", "aws:RequestTag/pool": "x"})
    assert not check(**{"aws:RequestTag/team": "a", "ec2:CreateAction": "CreateFleet", "aws:RequestTag/pool": "x"})
    assert not check(**{"aws:RequestTag/team": "a", "ec2:CreateAction": "RunInstances"})  # missing key: false
    # Condition key names are case-insensitive; values are not (for StringEquals).
    assert check(**{"AWS:REQUESTTAG/TEAM": "a", "ec2:createaction": "RunInstances", "aws:requesttag/pool": ""})
    assert not check(**{"aws:RequestTag/team": "A", "ec2:CreateAction": "RunInstances", "aws:RequestTag/pool": "x"})


def test_missing_keys_negated_operators_if_exists_and_null() -> None:
    def holds(condition: dict, **context: str | list[str]) -> bool:
        return evaluate([policy(allow("x:Y", Condition=condition))], Request("x:Y", "*", context)).allowed

    assert holds({"StringNotEquals": {"aws:RequestTag/env": "prod"}})  # absent: a negated operator holds
    assert not holds({"StringNotEquals": {"aws:RequestTag/env": "prod"}}, **{"aws:RequestTag/env": "prod"})
    assert holds({"StringEqualsIfExists": {"aws:RequestTag/env": "dev"}})
    assert not holds({"StringEqualsIfExists": {"aws:RequestTag/env": "dev"}}, **{"aws:RequestTag/env": "prod"})
    assert holds({"Null": {"aws:RequestTag/env": "true"}})
    assert not holds({"Null": {"aws:RequestTag/env": "false"}})
    assert holds({"Null": {"aws:RequestTag/env": "false"}}, **{"aws:RequestTag/env": "x"})
    assert holds({"Bool": {"aws:SecureTransport": "false"}}, **{"aws:SecureTransport": "FALSE"})
    assert holds({"StringLike": {"k": "a?c*"}}, k="abcdef") and not holds({"StringLike": {"k": "a?c*"}}, k="acdef")
    assert holds({"ArnLike": {"aws:SourceArn": "arn:aws:events:*:1:rule/*"}},
                 **{"aws:SourceArn": "arn:aws:events:us-east-1:1:rule/x"})


def test_set_operators_over_multivalued_keys() -> None:
    allowed_keys = {"ForAllValues:StringEquals": {"aws:TagKeys": ["Name", "team"]}}
    any_owner = {"ForAnyValue:StringLike": {"aws:TagKeys": ["owner*"]}}

    def holds(condition: dict, keys: list[str] | None) -> bool:
        context = {} if keys is None else {"aws:TagKeys": keys}
        return evaluate([policy(allow("x:Y", Condition=condition))], Request("x:Y", "*", context)).allowed

    assert holds(allowed_keys, ["Name"]) and holds(allowed_keys, ["Name", "team"])
    assert not holds(allowed_keys, ["Name", "cost-center"])
    assert holds(allowed_keys, None) and holds(allowed_keys, [])  # vacuously true, as in AWS
    assert holds(any_owner, ["a", "owner-x"]) and not holds(any_owner, ["a"]) and not holds(any_owner, None)


def test_syntax_outside_the_subset_is_refused_not_guessed() -> None:
    with pytest.raises(UnsupportedPolicy):
        evaluate([policy(allow("x:Y", Condition={"NumericLessThan": {"k": "1"}}))], Request("x:Y", "*", {"k": "0"}))
    with pytest.raises(UnsupportedPolicy):
        evaluate([policy(allow("x:Y", "arn:aws:s3:::${aws:username}/*"))], Request("x:Y", "arn:aws:s3:::u/a"))
    with pytest.raises(UnsupportedPolicy):
        evaluate([policy({"Effect": "Allow", "Action": "x:Y", "Resource": "*", "Principal": "*"})],
                 Request("x:Y", "*"))


# --- the generated policies --------------------------------------------------------------------------

SCOPE = AwsScope(partition="aws", region="us-east-1", account_id="123456789012")
NODE_ROLE = "arn:aws:iam::123456789012:role/dev-node"
POLICIES = list(controller_policies(SCOPE, "dev", NODE_ROLE, "arn:aws:sqs:us-east-1:123456789012:dev-q").values())
OWNED = {"aws:RequestTag/kubernetes.io/cluster/dev": "owned", "aws:RequestTag/eks:eks-cluster-name": "dev",
         "aws:RequestTag/karpenter.sh/nodepool": "general"}


def test_generated_policies_scope_launches_by_request_tags() -> None:
    instance = "arn:aws:ec2:us-east-1:123456789012:instance/*"
    assert evaluate(POLICIES, Request("ec2:CreateFleet", instance, OWNED)).allowed
    other_cluster = {**OWNED, "aws:RequestTag/eks:eks-cluster-name": "prod"}
    assert not evaluate(POLICIES, Request("ec2:CreateFleet", instance, other_cluster)).allowed
    no_pool = {k: v for k, v in OWNED.items() if "nodepool" not in k}
    assert not evaluate(POLICIES, Request("ec2:CreateFleet", instance, no_pool)).allowed
    tagging = {**OWNED, "ec2:CreateAction": "CreateFleet"}
    assert evaluate(POLICIES, Request("ec2:CreateTags", instance, tagging)).allowed
    assert not evaluate(POLICIES, Request("ec2:CreateTags", instance, {**OWNED, "ec2:CreateAction": "CopyImage"})
                        ).allowed


def test_generated_policies_scope_reads_to_the_region_and_pass_role_to_the_node_role() -> None:
    assert evaluate(POLICIES, Request("ec2:DescribeSubnets", "*", {"aws:RequestedRegion": "us-east-1"})).allowed
    assert not evaluate(POLICIES, Request("ec2:DescribeSubnets", "*", {"aws:RequestedRegion": "eu-west-1"})).allowed
    passed = {"iam:PassedToService": "ec2.amazonaws.com"}
    assert evaluate(POLICIES, Request("iam:PassRole", NODE_ROLE, passed)).allowed
    assert not evaluate(POLICIES, Request("iam:PassRole", "arn:aws:iam::123456789012:role/admin", passed)).allowed
    assert not evaluate(POLICIES, Request("iam:PassRole", NODE_ROLE, {"iam:PassedToService": "lambda.amazonaws.com"})
                        ).allowed
