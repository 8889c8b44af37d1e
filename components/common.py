"""Names, tags and lookups shared by the components."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components.karpenter_config import DISCOVERY_TAG
from components.policies import AwsScope

TYPE_PREFIX = "adze:infra"
# The system node group's label; the reconciler is pinned to it.
SYSTEM_NODE_LABEL = "adze.dev/node-role"
SYSTEM_NODE_LABEL_VALUE = "system"
CRITICAL_ADDONS_TAINT = "CriticalAddonsOnly"
SERVICE_ACCOUNT_NAME = "adze"
# Karpenter's Lease name: Adze and a Karpenter in the same namespace take turns, never act together.
LEADER_ELECTION_LEASE = "karpenter-leader-election"


def type_token(component: str) -> str:
    """Component type tokens (part of every child URN: renaming one needs an alias)."""
    return f"{TYPE_PREFIX}:{component}"


def discovery_tags(cluster_name: str) -> dict[str, str]:
    return {DISCOVERY_TAG: cluster_name}


def stack_tags(cluster_name: str) -> dict[str, str]:
    """Tags on everything the stack creates, so the account owner can tell stacks apart."""
    return {
        "adze.dev/cluster": cluster_name,
        "adze.dev/stack": pulumi.get_stack(),
        "adze.dev/project": pulumi.get_project(),
    }


def current_aws_scope(opts: pulumi.InvokeOptions | None = None) -> pulumi.Output[AwsScope]:
    """Partition, region, account and DNS suffix of the credentials running the stack."""
    partition = aws.get_partition_output(opts=opts)
    region = aws.get_region_output(opts=opts)
    identity = aws.get_caller_identity_output(opts=opts)
    return pulumi.Output.all(partition.partition, region.region, identity.account_id, partition.dns_suffix).apply(
        lambda values: AwsScope(partition=values[0], region=values[1], account_id=values[2], dns_suffix=values[3])
    )
