"""The IAM and resource policy documents, as data (no Pulumi)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.policies import (
    MANAGED_POLICY_SIZE_LIMIT,
    AwsScope,
    controller_policies,
    irsa_trust_policy,
    node_role_trust_policy,
    pod_identity_trust_policy,
    policy_size,
    queue_key_policy,
    queue_policy,
)

SCOPE = AwsScope(partition="aws", region="eu-central-1", account_id="210987654321")
CLUSTER = "prod-eu"
NODE_ROLE = "arn:aws:iam::210987654321:role/adze-prod-node-1a2b3c4"
QUEUE = "arn:aws:sqs:eu-central-1:210987654321:adze-queue-1234567"
KEY = "arn:aws:kms:eu-central-1:210987654321:key/0f1e2d3c"
LONG_CLUSTER = "c" * 100  # EKS allows cluster names of up to 100 characters


def policies(cluster: str = CLUSTER, queue: str | None = QUEUE, key: str | None = None) -> dict[str, Any]:
    return controller_policies(SCOPE, cluster, NODE_ROLE, queue, key)


def statement(doc: dict[str, Any], sid: str) -> dict[str, Any]:
    return next(s for s in doc["Statement"] if s.get("Sid") == sid)


def as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


def test_controller_permissions_are_split_into_five_policies_with_upstream_sids() -> None:
    docs = policies()
    assert set(docs) == {
        "node-lifecycle",
        "iam-integration",
        "eks-integration",
        "resource-discovery",
        "interruption",
    }
    sids = {name: [s["Sid"] for s in doc["Statement"]] for name, doc in docs.items()}
    assert sids["node-lifecycle"] == [
        "AllowScopedEC2InstanceAccessActions",
        "AllowScopedEC2LaunchTemplateAccessActions",
        "AllowScopedEC2InstanceActionsWithTags",
        "AllowScopedResourceCreationTagging",
        "AllowScopedResourceTagging",
        "AllowScopedDeletion",
    ]
    assert sids["iam-integration"] == [
        "AllowPassingInstanceRole",
        "AllowScopedInstanceProfileCreationActions",
        "AllowScopedInstanceProfileTagOnCreation",
        "AllowScopedInstanceProfileTagActions",
        "AllowScopedInstanceProfileActions",
    ]
    assert sids["eks-integration"] == ["AllowAPIServerEndpointDiscovery"]
    assert sids["interruption"] == ["AllowInterruptionQueueActions"]


def test_without_a_queue_there_is_no_interruption_policy() -> None:
    assert "interruption" not in policies(queue=None)


def test_launch_requires_ownership_request_tags_and_tagging_only_at_creation() -> None:
    lifecycle = policies()["node-lifecycle"]
    create = statement(lifecycle, "AllowScopedEC2InstanceActionsWithTags")
    assert set(create["Action"]) == {"ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"}
    assert create["Condition"]["StringEquals"] == {
        f"aws:RequestTag/kubernetes.io/cluster/{CLUSTER}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": CLUSTER,
    }
    assert create["Condition"]["StringLike"] == {"aws:RequestTag/karpenter.sh/nodepool": "*"}
    kinds = sorted(arn.split(":")[-1] for arn in create["Resource"])
    assert kinds == sorted(
        f"{k}/*"
        for k in (
            "fleet",
            "instance",
            "volume",
            "network-interface",
            "launch-template",
            "spot-instances-request",
        )
    )

    tagging = statement(lifecycle, "AllowScopedResourceCreationTagging")
    assert tagging["Action"] == "ec2:CreateTags"
    assert tagging["Condition"]["StringEquals"]["ec2:CreateAction"] == [
        "RunInstances",
        "CreateFleet",
        "CreateLaunchTemplate",
    ]

    later = statement(lifecycle, "AllowScopedResourceTagging")
    assert as_list(later["Resource"]) == ["arn:aws:ec2:eu-central-1:*:instance/*"]
    assert later["Condition"]["ForAllValues:StringEquals"]["aws:TagKeys"] == [
        "eks:eks-cluster-name",
        "karpenter.sh/nodeclaim",
        "Name",
    ]
    assert later["Condition"]["StringEquals"] == {f"aws:ResourceTag/kubernetes.io/cluster/{CLUSTER}": "owned"}


def test_launch_templates_and_deletion_are_scoped_by_resource_tags() -> None:
    lifecycle = policies()["node-lifecycle"]
    for sid in ("AllowScopedEC2LaunchTemplateAccessActions", "AllowScopedDeletion"):
        scoped = statement(lifecycle, sid)
        assert scoped["Condition"]["StringEquals"] == {
            f"aws:ResourceTag/kubernetes.io/cluster/{CLUSTER}": "owned"
        }
        assert scoped["Condition"]["StringLike"] == {"aws:ResourceTag/karpenter.sh/nodepool": "*"}
    deletion = statement(lifecycle, "AllowScopedDeletion")
    assert set(deletion["Action"]) == {"ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"}


def test_pass_role_only_for_the_node_role_and_only_to_ec2() -> None:
    passing = statement(policies()["iam-integration"], "AllowPassingInstanceRole")
    assert passing["Resource"] == NODE_ROLE
    assert passing["Condition"] == {
        "StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}
    }


def test_instance_profile_actions_are_scoped_to_this_cluster_and_region() -> None:
    doc = policies()["iam-integration"]
    create = statement(doc, "AllowScopedInstanceProfileCreationActions")
    assert (
        create["Condition"]["StringEquals"]["aws:RequestTag/topology.kubernetes.io/region"] == "eu-central-1"
    )
    assert create["Condition"]["StringLike"] == {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"}
    manage = statement(doc, "AllowScopedInstanceProfileActions")
    assert manage["Resource"] == "arn:aws:iam::210987654321:instance-profile/*"
    assert manage["Condition"]["StringEquals"] == {
        f"aws:ResourceTag/kubernetes.io/cluster/{CLUSTER}": "owned",
        "aws:ResourceTag/topology.kubernetes.io/region": "eu-central-1",
    }


def test_reads_are_region_conditioned_and_ssm_limited_to_public_parameters() -> None:
    discovery = policies()["resource-discovery"]
    reads = statement(discovery, "AllowRegionalReadActions")
    assert reads["Condition"] == {"StringEquals": {"aws:RequestedRegion": "eu-central-1"}}
    assert all(action.startswith("ec2:Describe") for action in reads["Action"])
    assert "ec2:DescribeInstanceStatus" in reads["Action"]
    assert statement(discovery, "AllowSSMReadActions")["Resource"] == (
        "arn:aws:ssm:eu-central-1::parameter/aws/service/*"
    )
    assert statement(discovery, "AllowPricingReadActions")["Action"] == "pricing:GetProducts"


def test_queue_and_cluster_statements_name_exact_resources() -> None:
    docs = policies(key=KEY)
    queue = statement(docs["interruption"], "AllowInterruptionQueueActions")
    assert queue["Resource"] == QUEUE
    assert set(queue["Action"]) == {"sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"}
    assert statement(docs["interruption"], "AllowInterruptionQueueDecryption")["Resource"] == KEY
    assert statement(docs["eks-integration"], "AllowAPIServerEndpointDiscovery")["Resource"] == (
        f"arn:aws:eks:eu-central-1:210987654321:cluster/{CLUSTER}"
    )


def test_no_wildcard_actions_and_no_iam_writes_on_every_resource() -> None:
    for name, doc in policies(key=KEY).items():
        for stmt in doc["Statement"]:
            for action in as_list(stmt["Action"]):
                assert "*" not in action, f"{name}/{stmt['Sid']}: wildcard action {action}"
                if action.startswith("iam:") and action != "iam:ListInstanceProfiles":
                    assert stmt["Resource"] != "*", f"{name}/{stmt['Sid']}: {action} on every resource"
            assert stmt["Effect"] == "Allow"


@pytest.mark.parametrize("cluster", [CLUSTER, LONG_CLUSTER])
def test_each_policy_fits_the_managed_policy_size_limit(cluster: str) -> None:
    for name, doc in policies(cluster=cluster, key=KEY).items():
        assert policy_size(doc) < MANAGED_POLICY_SIZE_LIMIT, name
    # Combined, they would not fit with a long name: the reason for the split.
    combined = {
        "Version": "2012-10-17",
        "Statement": [s for d in policies(LONG_CLUSTER).values() for s in d["Statement"]],
    }
    assert policy_size(combined) > MANAGED_POLICY_SIZE_LIMIT


def test_documents_are_iam_json() -> None:
    docs = [
        *policies(key=KEY).values(),
        node_role_trust_policy(SCOPE),
        pod_identity_trust_policy(),
        irsa_trust_policy("arn:aws:iam::1:oidc-provider/x", "https://oidc.example/id/1", "adze", "adze"),
        queue_policy(SCOPE, QUEUE, ["arn:aws:events:eu-central-1:210987654321:rule/r"]),
        queue_key_policy(SCOPE),
    ]
    for doc in docs:
        assert json.loads(json.dumps(doc)) == doc
        assert doc["Version"] == "2012-10-17"
        sids = [s.get("Sid") for s in doc["Statement"]]
        assert len(sids) == len(set(sids))
        for stmt in doc["Statement"]:
            assert stmt["Effect"] in ("Allow", "Deny")
            assert set(stmt) <= {"Sid", "Effect", "Principal", "Action", "Resource", "Condition"}


def test_trust_policies() -> None:
    node = node_role_trust_policy(AwsScope("aws-cn", "cn-north-1", "1", "amazonaws.com.cn"))
    assert node["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com.cn"}
    pods = pod_identity_trust_policy()["Statement"][0]
    assert pods["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert pods["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    irsa = irsa_trust_policy(
        "arn:aws:iam::1:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/ABC",
        "https://oidc.eks.us-west-2.amazonaws.com/id/ABC",
        "adze",
        "adze",
    )["Statement"][0]
    assert irsa["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert irsa["Condition"]["StringEquals"] == {
        "oidc.eks.us-west-2.amazonaws.com/id/ABC:aud": "sts.amazonaws.com",
        "oidc.eks.us-west-2.amazonaws.com/id/ABC:sub": "system:serviceaccount:adze:adze",
    }


def test_queue_policy_accepts_only_the_rules_and_denies_plain_http() -> None:
    rules = [f"arn:aws:events:eu-central-1:210987654321:rule/r{i}" for i in range(5)]
    doc = queue_policy(SCOPE, QUEUE, rules)
    allow, deny = doc["Statement"]
    assert allow["Principal"] == {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]}
    assert allow["Action"] == "sqs:SendMessage" and allow["Resource"] == QUEUE
    assert allow["Condition"] == {"ArnEquals": {"aws:SourceArn": sorted(rules)}}
    assert deny["Effect"] == "Deny" and deny["Sid"] == "DenyHTTP"
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_key_policy_lets_eventbridge_encrypt() -> None:
    statements = queue_key_policy(SCOPE)["Statement"]
    events = next(s for s in statements if s["Principal"] == {"Service": "events.amazonaws.com"})
    assert set(events["Action"]) == {"kms:GenerateDataKey", "kms:Decrypt"}
    assert events["Condition"] == {"StringEquals": {"aws:SourceAccount": "210987654321"}}


# --- parliament (an IAM linter) -------------------------------------------------------------

# Findings parliament reports on correct documents, and why they are acceptable.
_PARLIAMENT_EXPECTED = {
    # The launch permissions are split by resource type (each with its own conditions), so no
    # single statement covers every resource RunInstances needs; the union is checked below.
    ("node-lifecycle", "RESOURCE_MISMATCH"),
    # Public SSM parameters have no account in their ARN; parliament's pattern wants one.
    ("resource-discovery", "RESOURCE_MISMATCH"),
}


def test_parliament_finds_nothing_unexpected() -> None:
    parliament = pytest.importorskip("parliament")
    for name, doc in policies(key=KEY).items():
        findings = parliament.analyze_policy_string(json.dumps(doc)).findings
        unexpected = [(f.issue, f.detail) for f in findings if (name, f.issue) not in _PARLIAMENT_EXPECTED]
        assert not unexpected, f"{name}: {unexpected}"
    queue = parliament.analyze_policy_string(
        json.dumps(queue_policy(SCOPE, QUEUE, ["arn:aws:events:x:1:rule/r"]))
    )
    assert not queue.findings


def test_launch_statements_together_cover_every_resource_runinstances_needs() -> None:
    lifecycle = policies()["node-lifecycle"]
    covered = {
        arn.split(":")[-1].split("/")[0]
        for stmt in lifecycle["Statement"]
        if "ec2:RunInstances" in as_list(stmt["Action"])
        for arn in as_list(stmt["Resource"])
    }
    needed = {
        "image",
        "instance",
        "network-interface",
        "security-group",
        "subnet",
        "volume",
        "launch-template",
    }
    assert needed <= covered
