"""IAM and resource policy documents as pure functions of plain strings.

Nothing here touches Pulumi or AWS: components resolve the Outputs (account id,
role ARNs, queue ARN) and pass the strings in, so every document is unit-tested
as data. The controller permissions follow Karpenter's split into separate
managed policies (one combined document exceeds IAM's 6,144-character limit for
long cluster names); Sids match upstream so audits can compare them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

PolicyDocument = dict[str, Any]
Statement = dict[str, Any]

# Tag keys the reconciler must set at creation; the scoped statements below rely on them.
CLUSTER_OWNERSHIP_TAG_PREFIX = "kubernetes.io/cluster/"
EKS_CLUSTER_NAME_TAG = "eks:eks-cluster-name"
NODEPOOL_TAG = "karpenter.sh/nodepool"
NODECLASS_TAG = "karpenter.k8s.aws/ec2nodeclass"
NODECLAIM_TAG = "karpenter.sh/nodeclaim"
REGION_TAG = "topology.kubernetes.io/region"

# EC2 resource types the launch path creates (and tags) in one call.
_LAUNCHED_RESOURCE_TYPES = (
    "fleet",
    "instance",
    "volume",
    "network-interface",
    "launch-template",
    "spot-instances-request",
)
_REGIONAL_READ_ACTIONS = (
    "ec2:DescribeCapacityReservations",
    "ec2:DescribeImages",
    "ec2:DescribeInstances",
    "ec2:DescribeInstanceStatus",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplates",
    "ec2:DescribePlacementGroups",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSpotPriceHistory",
    "ec2:DescribeSubnets",
)


@dataclass(slots=True, frozen=True)
class AwsScope:
    """Where the cluster lives: partition (``aws``), region, account id and DNS suffix."""

    partition: str
    region: str
    account_id: str
    dns_suffix: str = "amazonaws.com"

    def service_principal(self, service: str) -> str:
        return f"{service}.{self.dns_suffix}"


def document(*statements: Statement, policy_id: str | None = None) -> PolicyDocument:
    doc: PolicyDocument = {"Version": "2012-10-17"}
    if policy_id:
        doc["Id"] = policy_id
    doc["Statement"] = list(statements)
    return doc


# Keyword names for IAM condition operators (Python identifiers cannot contain ':').
_CONDITION_OPERATORS = {
    "string_equals": "StringEquals",
    "string_like": "StringLike",
    "string_equals_if_exists": "StringEqualsIfExists",
    "for_all_values_string_equals": "ForAllValues:StringEquals",
    "bool_": "Bool",
    "arn_like": "ArnLike",
    "arn_equals": "ArnEquals",
}


def _allow(sid: str, actions: str | list[str], resources: str | list[str], **conditions: dict[str, Any]) -> Statement:
    statement: Statement = {"Sid": sid, "Effect": "Allow", "Action": actions, "Resource": resources}
    if conditions:
        statement["Condition"] = {_CONDITION_OPERATORS[op]: body for op, body in conditions.items()}
    return statement


def _ec2_arn(scope: AwsScope, resource: str, *, account: str = "*") -> str:
    return f"arn:{scope.partition}:ec2:{scope.region}:{account}:{resource}"


def _instance_profile_arns(scope: AwsScope) -> str:
    return f"arn:{scope.partition}:iam::{scope.account_id}:instance-profile/*"


def managed_instance_profile_arns(scope: AwsScope, cluster_name: str) -> str:
    """The profiles the reconciler creates: under ``/karpenter/<region>/<cluster>/<nodeclass uid>/``."""
    return f"arn:{scope.partition}:iam::{scope.account_id}:instance-profile/karpenter/{scope.region}/{cluster_name}/*"


def _owned(cluster_name: str, kind: str) -> dict[str, str]:
    return {f"aws:{kind}/{CLUSTER_OWNERSHIP_TAG_PREFIX}{cluster_name}": "owned"}


def node_role_trust_policy(scope: AwsScope) -> PolicyDocument:
    """EC2 instances launched for NodePools assume the node role."""
    return document(
        {
            "Sid": "AllowEC2AssumeNodeRole",
            "Effect": "Allow",
            "Principal": {"Service": scope.service_principal("ec2")},
            "Action": "sts:AssumeRole",
        }
    )


def pod_identity_trust_policy() -> PolicyDocument:
    """EKS Pod Identity: the agent assumes the role (and tags the session) for the bound ServiceAccount."""
    return document(
        {
            "Sid": "AllowEksPodIdentity",
            "Effect": "Allow",
            "Principal": {"Service": "pods.eks.amazonaws.com"},
            "Action": ["sts:AssumeRole", "sts:TagSession"],
        }
    )


def irsa_trust_policy(oidc_provider_arn: str, oidc_issuer: str, namespace: str, service_account: str) -> PolicyDocument:
    """IRSA: only the reconciler's ServiceAccount token from this cluster's OIDC issuer may assume the role.

    ``oidc_issuer`` is the issuer URL without ``https://`` (``oidc.eks.<region>.amazonaws.com/id/<ID>``).
    """
    issuer = oidc_issuer.removeprefix("https://")
    return document(
        {
            "Sid": "AllowReconcilerServiceAccount",
            "Effect": "Allow",
            "Principal": {"Federated": oidc_provider_arn},
            "Action": "sts:AssumeRoleWithWebIdentity",
            "Condition": {
                "StringEquals": {
                    f"{issuer}:aud": "sts.amazonaws.com",
                    f"{issuer}:sub": f"system:serviceaccount:{namespace}:{service_account}",
                }
            },
        }
    )


def node_lifecycle_policy(scope: AwsScope, cluster_name: str) -> PolicyDocument:
    """Launch, tag and terminate only what carries this cluster's ownership tags."""
    launched = [_ec2_arn(scope, f"{kind}/*") for kind in _LAUNCHED_RESOURCE_TYPES]
    creation_request_tags = {
        **_owned(cluster_name, "RequestTag"),
        f"aws:RequestTag/{EKS_CLUSTER_NAME_TAG}": cluster_name,
    }
    nodepool_request_tag = {f"aws:RequestTag/{NODEPOOL_TAG}": "*"}
    nodepool_resource_tag = {f"aws:ResourceTag/{NODEPOOL_TAG}": "*"}
    return document(
        # Images, subnets, security groups... are only "used by" a launch, never modified.
        _allow(
            "AllowScopedEC2InstanceAccessActions",
            ["ec2:RunInstances", "ec2:CreateFleet"],
            [
                _ec2_arn(scope, "image/*", account=""),
                _ec2_arn(scope, "snapshot/*", account=""),
                _ec2_arn(scope, "security-group/*"),
                _ec2_arn(scope, "subnet/*"),
                _ec2_arn(scope, "capacity-reservation/*"),
                _ec2_arn(scope, "placement-group/*"),
            ],
        ),
        _allow(
            "AllowScopedEC2LaunchTemplateAccessActions",
            ["ec2:RunInstances", "ec2:CreateFleet"],
            _ec2_arn(scope, "launch-template/*"),
            string_equals=_owned(cluster_name, "ResourceTag"),
            string_like=nodepool_resource_tag,
        ),
        _allow(
            "AllowScopedEC2InstanceActionsWithTags",
            ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
            launched,
            string_equals=creation_request_tags,
            string_like=nodepool_request_tag,
        ),
        _allow(
            "AllowScopedResourceCreationTagging",
            "ec2:CreateTags",
            launched,
            string_equals={
                **creation_request_tags,
                "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
            },
            string_like=nodepool_request_tag,
        ),
        # After registration the reconciler may add exactly these tags to its own instances.
        _allow(
            "AllowScopedResourceTagging",
            "ec2:CreateTags",
            _ec2_arn(scope, "instance/*"),
            string_equals=_owned(cluster_name, "ResourceTag"),
            string_like=nodepool_resource_tag,
            string_equals_if_exists={f"aws:RequestTag/{EKS_CLUSTER_NAME_TAG}": cluster_name},
            for_all_values_string_equals={"aws:TagKeys": [EKS_CLUSTER_NAME_TAG, NODECLAIM_TAG, "Name"]},
        ),
        _allow(
            "AllowScopedDeletion",
            ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            [_ec2_arn(scope, "instance/*"), _ec2_arn(scope, "launch-template/*")],
            string_equals=_owned(cluster_name, "ResourceTag"),
            string_like=nodepool_resource_tag,
        ),
    )


def iam_integration_policy(scope: AwsScope, cluster_name: str, node_role_arn: str) -> PolicyDocument:
    """Pass only the node role to EC2 and manage only this cluster's instance profiles in this region."""
    profiles = _instance_profile_arns(scope)
    creation_tags = {
        **_owned(cluster_name, "RequestTag"),
        f"aws:RequestTag/{EKS_CLUSTER_NAME_TAG}": cluster_name,
        f"aws:RequestTag/{REGION_TAG}": scope.region,
    }
    owned_here = {**_owned(cluster_name, "ResourceTag"), f"aws:ResourceTag/{REGION_TAG}": scope.region}
    return document(
        _allow(
            "AllowPassingInstanceRole",
            "iam:PassRole",
            node_role_arn,
            string_equals={"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]},
        ),
        _allow(
            "AllowScopedInstanceProfileCreationActions",
            "iam:CreateInstanceProfile",
            profiles,
            string_equals=creation_tags,
            string_like={f"aws:RequestTag/{NODECLASS_TAG}": "*"},
        ),
        # Creating a profile with Tags is also authorized as iam:TagInstanceProfile on the new profile, which
        # has no resource tags yet; scoped to the reconciler's own path so it cannot claim anyone else's.
        _allow(
            "AllowScopedInstanceProfileTagOnCreation",
            "iam:TagInstanceProfile",
            managed_instance_profile_arns(scope, cluster_name),
            string_equals=creation_tags,
            string_like={f"aws:RequestTag/{NODECLASS_TAG}": "*"},
        ),
        _allow(
            "AllowScopedInstanceProfileTagActions",
            "iam:TagInstanceProfile",
            profiles,
            string_equals={**owned_here, **creation_tags},
            string_like={f"aws:ResourceTag/{NODECLASS_TAG}": "*", f"aws:RequestTag/{NODECLASS_TAG}": "*"},
        ),
        _allow(
            "AllowScopedInstanceProfileActions",
            [
                "iam:AddRoleToInstanceProfile",
                "iam:RemoveRoleFromInstanceProfile",
                "iam:DeleteInstanceProfile",
            ],
            profiles,
            string_equals=owned_here,
            string_like={f"aws:ResourceTag/{NODECLASS_TAG}": "*"},
        ),
    )


def eks_integration_policy(scope: AwsScope, cluster_name: str) -> PolicyDocument:
    return document(
        _allow(
            "AllowAPIServerEndpointDiscovery",
            "eks:DescribeCluster",
            f"arn:{scope.partition}:eks:{scope.region}:{scope.account_id}:cluster/{cluster_name}",
        )
    )


def interruption_policy(queue_arn: str, kms_key_arn: str | None = None) -> PolicyDocument:
    """Consume the interruption queue (and decrypt it when a customer KMS key encrypts it)."""
    statements = [
        _allow(
            "AllowInterruptionQueueActions",
            ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
            queue_arn,
        )
    ]
    if kms_key_arn:
        statements.append(_allow("AllowInterruptionQueueDecryption", "kms:Decrypt", kms_key_arn))
    return document(*statements)


def ssm_parameter_arn(scope: AwsScope, name: str) -> str:
    """A parameter's ARN as SSM authorizes it: AWS's public ``/aws/service/...`` ones carry no account."""
    if name.startswith("arn:"):
        return name
    account = "" if name.startswith("/aws/service/") else scope.account_id
    return f"arn:{scope.partition}:ssm:{scope.region}:{account}:parameter/{name.lstrip('/')}"


def resource_discovery_policy(scope: AwsScope, ssm_parameters: Sequence[str] = ()) -> PolicyDocument:
    """Read-only discovery; Describe* cannot be resource-scoped, so it is pinned to the region instead.

    ``ssm_parameters``: the ``amiSelectorTerms[].ssmParameter`` names of the stack's node classes, which the
    reconciler reads besides AWS's public EKS AMI parameters."""
    public = f"arn:{scope.partition}:ssm:{scope.region}::parameter/aws/service/*"
    extra = sorted({ssm_parameter_arn(scope, name) for name in ssm_parameters} - {public})
    return document(
        _allow(
            "AllowRegionalReadActions",
            list(_REGIONAL_READ_ACTIONS),
            "*",
            string_equals={"aws:RequestedRegion": scope.region},
        ),
        _allow("AllowSSMReadActions", "ssm:GetParameter", [public, *extra] if extra else public),
        _allow("AllowPricingReadActions", "pricing:GetProducts", "*"),
        _allow("AllowUnscopedInstanceProfileListAction", "iam:ListInstanceProfiles", "*"),
        _allow("AllowInstanceProfileReadActions", "iam:GetInstanceProfile", _instance_profile_arns(scope)),
    )


def controller_policies(
    scope: AwsScope,
    cluster_name: str,
    node_role_arn: str,
    queue_arn: str | None,
    queue_kms_key_arn: str | None = None,
    ssm_parameters: Sequence[str] = (),
) -> dict[str, PolicyDocument]:
    """Every controller policy by short name; the interruption policy only exists with a queue."""
    policies = {
        "node-lifecycle": node_lifecycle_policy(scope, cluster_name),
        "iam-integration": iam_integration_policy(scope, cluster_name, node_role_arn),
        "eks-integration": eks_integration_policy(scope, cluster_name),
        "resource-discovery": resource_discovery_policy(scope, ssm_parameters),
    }
    if queue_arn:
        policies["interruption"] = interruption_policy(queue_arn, queue_kms_key_arn)
    return policies


CONTROLLER_POLICY_NAMES = (
    "node-lifecycle",
    "iam-integration",
    "eks-integration",
    "resource-discovery",
    "interruption",
)


def queue_policy(scope: AwsScope, queue_arn: str, rule_arns: list[str]) -> PolicyDocument:
    """Only this stack's EventBridge rules may send to the queue, and only over TLS."""
    return document(
        {
            "Sid": "AllowInterruptionEvents",
            "Effect": "Allow",
            "Principal": {"Service": [scope.service_principal("events"), scope.service_principal("sqs")]},
            "Action": "sqs:SendMessage",
            "Resource": queue_arn,
            "Condition": {"ArnEquals": {"aws:SourceArn": sorted(rule_arns)}},
        },
        {
            "Sid": "DenyHTTP",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "sqs:*",
            "Resource": queue_arn,
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        },
        policy_id="EC2InterruptionPolicy",
    )


def queue_key_policy(scope: AwsScope) -> PolicyDocument:
    """Key policy for a queue key the stack creates: the account administers it, EventBridge encrypts.

    The reconciler's decrypt permission comes from its IAM policy, which the account statement enables.
    """
    return document(
        {
            "Sid": "AllowAccountAdministration",
            "Effect": "Allow",
            "Principal": {"AWS": f"arn:{scope.partition}:iam::{scope.account_id}:root"},
            "Action": "kms:*",
            "Resource": "*",
        },
        {
            "Sid": "AllowEventBridgeToEncryptQueueMessages",
            "Effect": "Allow",
            "Principal": {"Service": scope.service_principal("events")},
            "Action": ["kms:GenerateDataKey", "kms:Decrypt"],
            "Resource": "*",
            "Condition": {"StringEquals": {"aws:SourceAccount": scope.account_id}},
        },
    )


def policy_size(doc: PolicyDocument) -> int:
    """IAM counts a managed policy's size without whitespace."""
    return len(json.dumps(doc, separators=(",", ":")))


MANAGED_POLICY_SIZE_LIMIT = 6144
