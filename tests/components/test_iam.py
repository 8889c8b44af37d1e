"""The IAM component under the whole program: node role, access entry, controller role in both identity modes."""

from __future__ import annotations

import json
from typing import Any

from pulumi_harness import ACCOUNT_ID, ProgramRun, Registration, run_stack

from components.common import SERVICE_ACCOUNT_NAME


def role(run: ProgramRun, suffix: str) -> Registration:
    """The role named ``<cluster><suffix>`` (``-node``: Adze's nodes; ``-system-node``: the system group)."""
    return run.one_named("aws:iam/role:Role", run.outputs["clusterName"] + suffix)


def policy_documents(run: ProgramRun) -> dict[str, dict[str, Any]]:
    return {
        p.name.split("-", 2)[-1]: json.loads(p.inputs["policy"]) for p in run.of_type("aws:iam/policy:Policy")
    }


def test_node_role_has_four_policies_and_an_ec2_linux_access_entry(any_stack: ProgramRun) -> None:
    node = role(any_stack, "-node")
    trust = json.loads(node.inputs["assumeRolePolicy"])
    assert trust["Statement"] == [
        {
            "Sid": "AllowEC2AssumeNodeRole",
            "Effect": "Allow",
            "Principal": {"Service": "ec2.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }
    ]
    attached = {
        a.inputs["policyArn"]
        for a in any_stack.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.inputs["role"] == node.inputs.get("name", node.id.removesuffix("-id"))
    }
    assert attached == {
        "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
        "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
        "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
        "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
    }
    entry = next(e for e in any_stack.of_type("aws:eks/accessEntry:AccessEntry") if e.name.endswith("-node"))
    assert entry.inputs["type"] == "EC2_LINUX"
    assert entry.inputs["principalArn"] == f"arn:aws:iam::{ACCOUNT_ID}:role/{node.id.removesuffix('-id')}"
    assert entry.inputs["clusterName"] == any_stack.outputs["clusterName"]


def test_controller_policies_are_separate_managed_policies_attached_to_the_controller(
    dev: ProgramRun,
) -> None:
    docs = policy_documents(dev)
    assert set(docs) == {
        "node-lifecycle",
        "iam-integration",
        "eks-integration",
        "resource-discovery",
        "interruption",
    }
    controller = role(dev, "-controller").id.removesuffix("-id")
    attachments = [
        a
        for a in dev.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if a.inputs["role"] == controller
    ]
    assert {a.inputs["policyArn"].rsplit("/", 1)[-1] for a in attachments} == {
        p.id.removesuffix("-id") for p in dev.of_type("aws:iam/policy:Policy")
    }


def test_controller_policies_reference_this_stacks_resources(dev: ProgramRun) -> None:
    docs = policy_documents(dev)
    node_role_arn = dev.outputs["nodeRoleArn"]
    passing = docs["iam-integration"]["Statement"][0]
    assert passing["Action"] == "iam:PassRole" and passing["Resource"] == node_role_arn
    queue = dev.one("aws:sqs/queue:Queue")
    assert (
        docs["interruption"]["Statement"][0]["Resource"]
        == f"arn:aws:sqs:us-west-2:{ACCOUNT_ID}:{queue.id.removesuffix('-id')}"
    )
    assert (
        docs["eks-integration"]["Statement"][0]["Resource"]
        == f"arn:aws:eks:us-west-2:{ACCOUNT_ID}:cluster/adze-dev"
    )
    lifecycle = json.dumps(docs["node-lifecycle"])
    assert '"aws:RequestTag/kubernetes.io/cluster/adze-dev": "owned"' in lifecycle
    reads = docs["resource-discovery"]["Statement"][0]
    assert reads["Condition"] == {"StringEquals": {"aws:RequestedRegion": "us-west-2"}}


def test_kms_encrypted_queue_adds_decrypt_for_the_controller(staging: ProgramRun) -> None:
    interruption = policy_documents(staging)["interruption"]
    decrypt = next(s for s in interruption["Statement"] if s["Sid"] == "AllowInterruptionQueueDecryption")
    key = staging.one("aws:kms/key:Key")
    assert decrypt["Resource"] == f"arn:aws:kms:us-west-2:{ACCOUNT_ID}:key/{key.id.removesuffix('-id')}"


def test_pod_identity_mode_trusts_the_eks_pod_identity_service(dev: ProgramRun) -> None:
    trust = json.loads(role(dev, "-controller").inputs["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert trust["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    association = dev.one("aws:eks/podIdentityAssociation:PodIdentityAssociation")
    assert association.inputs["namespace"] == "adze"
    assert association.inputs["serviceAccount"] == SERVICE_ACCOUNT_NAME
    assert association.inputs["roleArn"] == dev.outputs["controllerRoleArn"]
    assert association.inputs["clusterName"] == "adze-dev"


def test_irsa_mode_trusts_only_the_reconcilers_service_account_token(staging: ProgramRun) -> None:
    trust = json.loads(role(staging, "-controller").inputs["assumeRolePolicy"])["Statement"][0]
    issuer = "oidc.eks.us-west-2.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"
    assert trust["Principal"] == {"Federated": f"arn:aws:iam::{ACCOUNT_ID}:oidc-provider/{issuer}"}
    assert trust["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert trust["Condition"] == {
        "StringEquals": {
            f"{issuer}:aud": "sts.amazonaws.com",
            f"{issuer}:sub": f"system:serviceaccount:adze:{SERVICE_ACCOUNT_NAME}",
        }
    }
    assert not staging.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")


def test_spot_service_linked_role_is_optional(dev: ProgramRun, prod: ProgramRun) -> None:
    assert (
        dev.one("aws:iam/serviceLinkedRole:ServiceLinkedRole").inputs["awsServiceName"]
        == "spot.amazonaws.com"
    )
    assert not prod.of_type("aws:iam/serviceLinkedRole:ServiceLinkedRole")


def test_every_controller_policy_fits_iam_limits(any_stack: ProgramRun) -> None:
    for name, doc in policy_documents(any_stack).items():
        assert len(json.dumps(doc, separators=(",", ":"))) < 6144, name


def test_node_class_ssm_parameters_are_readable_by_the_controller() -> None:
    classes = [{"name": "default", "amiFamily": "AL2023", "amiSelectorTerms": [{"ssmParameter": "/team/eks/ami"}]}]
    run = run_stack("dev", **{"adze:nodeClasses": classes})
    ssm = next(s for s in policy_documents(run)["resource-discovery"]["Statement"] if s["Sid"] == "AllowSSMReadActions")
    assert ssm["Resource"] == ["arn:aws:ssm:us-west-2::parameter/aws/service/*",
                               "arn:aws:ssm:us-west-2:123456789012:parameter/team/eks/ami"]
