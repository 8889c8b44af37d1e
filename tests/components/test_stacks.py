"""Each example stack, end to end under mocks: what gets created, how much of it, and how it is parented."""

from __future__ import annotations

from collections import Counter

import pytest
from pulumi_harness import ProgramRun

# Counts that follow from each stack file; everything else is one per stack.
EXPECTED = {
    "dev": {
        "aws:ec2/subnet:Subnet": 4,  # 2 zones x (public, private)
        "aws:ec2/natGateway:NatGateway": 1,  # natGateways: single
        "aws:ec2/routeTable:RouteTable": 3,
        "aws:ec2/tag:Tag": 1,  # the cluster security group
        "aws:eks/accessEntry:AccessEntry": 1,  # nodes (no deployer role)
        "aws:iam/serviceLinkedRole:ServiceLinkedRole": 1,
        "aws:eks/podIdentityAssociation:PodIdentityAssociation": 1,
        "kubernetes:karpenter.sh/v1:NodePool": 1,
    },
    "staging": {
        "aws:ec2/subnet:Subnet": 6,  # 3 zones x (public, private)
        "aws:ec2/natGateway:NatGateway": 1,  # natGateways: single
        "aws:ec2/routeTable:RouteTable": 4,
        "aws:ec2/tag:Tag": 1,  # the cluster security group
        "aws:eks/accessEntry:AccessEntry": 1,  # nodes (CI roles are per account: docs/deploying.md)
        "aws:kms/key:Key": 1,
        "aws:eks/podIdentityAssociation:PodIdentityAssociation": 0,  # irsa
        "kubernetes:karpenter.sh/v1:NodePool": 1,
    },
    "prod": {
        "aws:ec2/subnet:Subnet": 6,
        "aws:ec2/natGateway:NatGateway": 3,  # one per zone
        "aws:ec2/routeTable:RouteTable": 4,
        "aws:eks/accessEntry:AccessEntry": 1,
        "aws:iam/serviceLinkedRole:ServiceLinkedRole": 0,
        "kubernetes:karpenter.sh/v1:NodePool": 2,
        "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass": 2,
    },
}
EVERY_STACK = {
    "eks:index:Cluster": 1,
    "eks:index:ManagedNodeGroup": 1,
    "pulumi:providers:kubernetes": 1,
    "aws:iam/role:Role": 3,  # system nodes, Adze nodes, controller
    "aws:iam/policy:Policy": 5,
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": 13,  # 4 + 4 node policies, 5 controller policies
    "aws:sqs/queue:Queue": 1,
    "aws:sqs/queuePolicy:QueuePolicy": 1,
    "aws:cloudwatch/eventRule:EventRule": 5,
    "aws:cloudwatch/eventTarget:EventTarget": 5,
    "aws:eks/addon:Addon": 2,  # pod identity agent, metrics-server
    "aws:ecr/repository:Repository": 1,
    "docker-build:index:Image": 1,
    "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition": 4,
    "kubernetes:apps/v1:Deployment": 1,
    "kubernetes:policy/v1:PodDisruptionBudget": 1,
    "kubernetes:core/v1:Service": 1,
    "kubernetes:core/v1:ServiceAccount": 1,
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole": 1,
    "kubernetes:rbac.authorization.k8s.io/v1:Role": 2,  # leader election; kube-dns lookup in kube-system
}
COMPONENTS = {
    "Network",
    "Cluster",
    "Interruption",
    "Iam",
    "Reconciler",
    "ReconcilerImage",
    "NodePools",
    "MetricsServer",
}


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_resource_counts(stack: str, request: pytest.FixtureRequest) -> None:
    run: ProgramRun = request.getfixturevalue(stack)
    counts = Counter(r.typ for r in run.registrations)
    for typ, expected in {**EVERY_STACK, **EXPECTED[stack]}.items():
        assert counts[typ] == expected, f"{stack}: {typ}"


def test_every_resource_belongs_to_a_component(any_stack: ProgramRun) -> None:
    components = {r.urn: r for r in any_stack.registrations if r.typ.startswith("adze:infra:")}
    assert {r.typ.rsplit(":", 1)[-1] for r in components.values()} == COMPONENTS
    for registration in any_stack.registrations:
        if registration.typ.startswith("adze:infra:"):
            continue
        assert registration.parent in components, (
            f"{registration.typ} {registration.name} is not in a component"
        )


def test_everything_taggable_is_tagged_with_the_stack(prod: ProgramRun) -> None:
    taggable = [r for r in prod.registrations if r.typ.startswith("aws:") and "tags" in r.inputs]
    assert len(taggable) > 20
    for registration in taggable:
        assert registration.inputs["tags"]["adze.dev/cluster"] == "adze-prod", registration.name
        assert registration.inputs["tags"]["adze.dev/stack"] == "prod", registration.name


def test_outputs(any_stack: ProgramRun) -> None:
    assert set(any_stack.outputs) == {
        "clusterName",
        "kubeconfig",
        "vpcId",
        "interruptionQueueName",
        "nodeRoleName",
        "nodeRoleArn",
        "controllerRoleArn",
        "reconcilerImage",
        "nodePoolNames",
        "nodeClassNames",
    }
