"""IAM: the role of Adze-launched nodes (with its EC2_LINUX access entry) and the reconciler's role.

The controller role is trusted through EKS Pod Identity (default) or IRSA, and
carries one managed policy per concern, built by ``components.policies``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pulumi
import pulumi_aws as aws

from components.cluster import attach_node_policies
from components.common import type_token
from components.policies import (
    AwsScope,
    controller_policies,
    irsa_trust_policy,
    node_role_trust_policy,
    pod_identity_trust_policy,
)

POLICY_DESCRIPTIONS = {
    "node-lifecycle": "Launch, tag and terminate the cluster's own instances and launch templates",
    "iam-integration": "Pass the node role to EC2 and manage the cluster's instance profiles",
    "eks-integration": "Discover the cluster's API server endpoint",
    "resource-discovery": "Read instance types, prices, AMIs, subnets and security groups in the region",
    "interruption": "Consume the interruption queue",
}


@dataclass(slots=True)
class IamArgs:
    cluster_name: str
    # An Output of the cluster, so the access entry and association wait for it.
    eks_cluster_name: pulumi.Input[str]
    scope: pulumi.Output[AwsScope]
    identity_mode: Literal["pod-identity", "irsa"]
    namespace: str
    service_account: str
    queue_arn: pulumi.Output[str] | None = None
    queue_kms_key_arn: pulumi.Output[str] | None = None
    oidc_provider_arn: pulumi.Input[str] | None = None
    oidc_issuer: pulumi.Input[str] | None = None
    create_spot_service_linked_role: bool = False
    # amiSelectorTerms[].ssmParameter of the node classes: the reconciler reads them to resolve AMIs.
    ssm_parameters: tuple[str, ...] = ()
    tags: dict[str, str] = field(default_factory=dict)


class Iam(pulumi.ComponentResource):
    node_role_name: pulumi.Output[str]
    node_role_arn: pulumi.Output[str]
    controller_role_arn: pulumi.Output[str]
    policy_arns: dict[str, pulumi.Output[str]]

    def __init__(self, name: str, args: IamArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_token("Iam"), name, {}, opts)
        child = pulumi.ResourceOptions(parent=self)

        node_role = aws.iam.Role(
            f"{name}-node",
            assume_role_policy=args.scope.apply(lambda s: json.dumps(node_role_trust_policy(s))),
            description=f"Nodes that Adze launches for EKS cluster {args.cluster_name}",
            tags=args.tags,
            opts=child,
        )
        attachments = attach_node_policies(f"{name}-node", node_role, args.scope, self)
        # Nodes join through an access entry of type EC2_LINUX (a STANDARD entry cannot bootstrap nodes).
        self.node_access_entry = aws.eks.AccessEntry(
            f"{name}-node",
            cluster_name=args.eks_cluster_name,
            principal_arn=node_role.arn,
            type="EC2_LINUX",
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=attachments),
        )
        self.node_role_name = node_role.name
        self.node_role_arn = node_role.arn

        controller_role = aws.iam.Role(
            f"{name}-controller",
            assume_role_policy=self._trust_policy(args),
            description=f"Adze reconciler of EKS cluster {args.cluster_name}",
            tags=args.tags,
            opts=child,
        )
        self.controller_role_arn = controller_role.arn
        self.policy_arns = {}
        policy_attachments: list[pulumi.Resource] = []
        for short_name in self._policy_names(args):
            document = pulumi.Output.all(args.scope, node_role.arn, args.queue_arn, args.queue_kms_key_arn).apply(
                functools.partial(_policy_document, args.cluster_name, short_name, args.ssm_parameters)
            )
            policy = aws.iam.Policy(
                f"{name}-{short_name}",
                policy=document,
                description=f"Adze ({args.cluster_name}): {POLICY_DESCRIPTIONS[short_name]}",
                tags=args.tags,
                opts=child,
            )
            self.policy_arns[short_name] = policy.arn
            policy_attachments.append(
                aws.iam.RolePolicyAttachment(
                    f"{name}-{short_name}", role=controller_role.name, policy_arn=policy.arn, opts=child
                )
            )
        # What the reconciler Deployment waits for: credentials that already carry every permission.
        self.controller_ready: list[pulumi.Resource] = [
            controller_role,
            *policy_attachments,
            self.node_access_entry,
        ]
        if args.identity_mode == "pod-identity":
            self.controller_ready.append(
                aws.eks.PodIdentityAssociation(
                    f"{name}-controller",
                    cluster_name=args.eks_cluster_name,
                    namespace=args.namespace,
                    service_account=args.service_account,
                    role_arn=controller_role.arn,
                    tags=args.tags,
                    opts=child,
                )
            )
        if args.create_spot_service_linked_role:
            # One per account: enable it on exactly one stack per account.
            aws.iam.ServiceLinkedRole(f"{name}-spot", aws_service_name="spot.amazonaws.com", opts=child)
        self.register_outputs(
            {
                "node_role_name": self.node_role_name,
                "node_role_arn": self.node_role_arn,
                "controller_role_arn": self.controller_role_arn,
            }
        )

    @staticmethod
    def _policy_names(args: IamArgs) -> list[str]:
        names = ["node-lifecycle", "iam-integration", "eks-integration", "resource-discovery"]
        return [*names, "interruption"] if args.queue_arn is not None else names

    @staticmethod
    def _trust_policy(args: IamArgs) -> pulumi.Output[str]:
        if args.identity_mode == "pod-identity":
            return pulumi.Output.from_input(json.dumps(pod_identity_trust_policy()))
        if args.oidc_provider_arn is None or args.oidc_issuer is None:
            raise ValueError("identity mode irsa needs the cluster's OIDC provider")
        return pulumi.Output.all(args.oidc_provider_arn, args.oidc_issuer).apply(
            lambda values: json.dumps(irsa_trust_policy(values[0], values[1], args.namespace, args.service_account))
        )


def _policy_document(cluster_name: str, short_name: str, ssm_parameters: Sequence[str], values: list[Any]) -> str:
    """One controller policy as JSON, from the resolved (scope, node role, queue, queue key) outputs."""
    scope, node_role_arn, queue_arn, queue_kms_key_arn = values
    policies = controller_policies(scope, cluster_name, node_role_arn, queue_arn, queue_kms_key_arn, ssm_parameters)
    return json.dumps(policies[short_name])
