"""The cluster component: pulumi_eks inputs, system node group, add-ons, access entries, k8s provider."""

from __future__ import annotations

import json

from pulumi.runtime import rpc
from pulumi_harness import DEPLOYER_ROLE, ProgramRun, run_stack

from components.common import CRITICAL_ADDONS_TAINT, SYSTEM_NODE_LABEL


def test_cluster_uses_api_auth_private_nodes_and_no_default_node_group(any_stack: ProgramRun) -> None:
    cluster = any_stack.one("eks:index:Cluster").inputs
    assert cluster["authenticationMode"] == "API"
    assert cluster["skipDefaultNodeGroup"] is True
    assert cluster["skipDefaultSecurityGroups"] is True
    assert cluster["nodeAssociatePublicIpAddress"] is False
    assert cluster["endpointPrivateAccess"] is True
    assert cluster["privateSubnetIds"]


def test_cluster_settings_come_from_stack_config(prod: ProgramRun, dev: ProgramRun,
                                                 prod_with_ci_roles: ProgramRun) -> None:
    cluster = prod.one("eks:index:Cluster")
    assert cluster.inputs["name"] == "adze-prod"
    assert cluster.inputs["version"] == "1.33"
    assert cluster.inputs["publicAccessCidrs"] == ["203.0.113.0/24"]
    assert cluster.inputs["enabledClusterLogTypes"] == [
        "api",
        "audit",
        "authenticator",
        "controllerManager",
        "scheduler",
    ]
    assert cluster.inputs["deletionProtection"] is True and cluster.protect
    assert "providerCredentialOpts" not in cluster.inputs  # no deployer role: the caller's own credentials
    assert prod_with_ci_roles.one("eks:index:Cluster").inputs["providerCredentialOpts"] == {"roleArn": DEPLOYER_ROLE}
    dev_cluster = dev.one("eks:index:Cluster")
    assert not dev_cluster.protect and dev_cluster.inputs["deletionProtection"] is False
    assert "providerCredentialOpts" not in dev_cluster.inputs
    assert dev_cluster.inputs["publicSubnetIds"]  # public subnets host internet-facing load balancers


def test_oidc_provider_only_for_irsa(dev: ProgramRun, staging: ProgramRun) -> None:
    assert dev.one("eks:index:Cluster").inputs["createOidcProvider"] is False
    assert staging.one("eks:index:Cluster").inputs["createOidcProvider"] is True


def test_system_node_group_is_tainted_labelled_and_sized(prod: ProgramRun) -> None:
    group = prod.one("eks:index:ManagedNodeGroup").inputs
    assert group["taints"] == [{"key": CRITICAL_ADDONS_TAINT, "value": "true", "effect": "NO_SCHEDULE"}]
    assert group["labels"] == {SYSTEM_NODE_LABEL: "system"}
    assert group["capacityType"] == "ON_DEMAND"
    assert group["instanceTypes"] == ["m6i.large", "m6a.large"]
    assert group["scalingConfig"] == {"minSize": 3, "desiredSize": 3, "maxSize": 4}
    assert group["ignoreScalingChanges"] is True
    role = next(r for r in prod.of_type("aws:iam/role:Role") if r.name.endswith("-system-node"))
    assert group["nodeRole"] == role.id  # a reference to the role resource (the mock monitor sees its id)
    trust = json.loads(role.inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}


def test_system_node_role_has_the_worker_policies(dev: ProgramRun) -> None:
    attached = {
        a.inputs["policyArn"].rsplit("/", 1)[-1]
        for a in dev.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
        if "-system-node-" in a.name
    }
    assert attached == {
        "AmazonEKSWorkerNodePolicy",
        "AmazonEKS_CNI_Policy",
        "AmazonEC2ContainerRegistryPullOnly",
        "AmazonSSMManagedInstanceCore",
    }


def test_cluster_security_group_is_tagged_for_discovery(dev: ProgramRun) -> None:
    tag = next(t for t in dev.of_type("aws:ec2/tag:Tag") if t.name.endswith("-sg-discovery"))
    # The EKS-created cluster security group (faked child output of the eks component).
    assert tag.inputs == {
        "resourceId": "sg-0eks0cluster0sg",
        "key": "karpenter.sh/discovery",
        "value": "adze-dev",
    }


def test_pod_identity_agent_waits_for_the_system_nodes(dev: ProgramRun) -> None:
    agent = next(
        a for a in dev.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "eks-pod-identity-agent"
    )
    assert agent.inputs["clusterName"] == "adze-dev"
    assert dev.depends_on(agent, dev.one("eks:index:ManagedNodeGroup"))


def test_metrics_server_is_created_after_the_node_pools(dev: ProgramRun) -> None:
    addon = next(a for a in dev.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "metrics-server")
    component = dev.one("adze:infra:MetricsServer")
    node_pool = next(dev.k8s_objects("NodePool"))
    assert node_pool.urn in component.dependencies
    assert addon.parent == component.urn


def test_metrics_server_can_be_turned_off() -> None:
    run = run_stack("dev", **{"adze:metricsServer": False})
    assert [a.inputs["addonName"] for a in run.of_type("aws:eks/addon:Addon")] == ["eks-pod-identity-agent"]


def test_deployer_role_gets_cluster_admin_and_the_provider_waits_for_it(
    prod_with_ci_roles: ProgramRun, dev: ProgramRun
) -> None:
    run = prod_with_ci_roles
    entry = next(e for e in run.of_type("aws:eks/accessEntry:AccessEntry") if e.name.endswith("-deployer"))
    assert entry.inputs["principalArn"] == DEPLOYER_ROLE
    assert entry.inputs["type"] == "STANDARD"
    admin = run.one("aws:eks/accessPolicyAssociation:AccessPolicyAssociation", "-deployer-admin")
    assert admin.inputs["policyArn"] == "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
    assert admin.inputs["accessScope"] == {"type": "cluster"}
    provider = run.one("pulumi:providers:kubernetes")
    assert admin.urn in provider.dependencies
    assert not dev.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")


def test_one_kubernetes_provider_from_the_cluster_kubeconfig(any_stack: ProgramRun) -> None:
    provider = any_stack.one("pulumi:providers:kubernetes")
    kubeconfig = provider.inputs["kubeconfig"]
    assert kubeconfig[rpc._special_sig_key] == rpc._special_secret_sig  # stays a secret in state
    assert json.loads(kubeconfig["value"])["kind"] == "Config"
    kubernetes_objects = [r for r in any_stack.registrations if r.typ.startswith("kubernetes:")]
    assert kubernetes_objects
    assert all(r.provider.startswith(provider.urn + "::") for r in kubernetes_objects)


def test_kubeconfig_is_exported_as_a_secret_with_the_other_outputs(dev: ProgramRun) -> None:
    assert json.loads(dev.outputs["kubeconfig"])["kind"] == "Config"
    assert dev.secret_outputs == {"kubeconfig"}
    assert dev.outputs["clusterName"] == "adze-dev"
    assert dev.outputs["interruptionQueueName"]
    assert dev.outputs["nodeRoleArn"].startswith("arn:aws:iam::")
    assert dev.outputs["controllerRoleArn"].startswith("arn:aws:iam::")
    assert dev.outputs["nodePoolNames"] == ["general"]
