"""The EKS cluster: API authentication, private nodes, a tainted system node group, add-ons, one k8s provider.

``pulumi_eks.Cluster`` is a multi-language component; its children are built by the eks
plugin. Everything else here is a plain resource so the mocks can see and check it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from components.common import (
    CRITICAL_ADDONS_TAINT,
    SYSTEM_NODE_LABEL,
    SYSTEM_NODE_LABEL_VALUE,
    discovery_tags,
    type_token,
)
from components.config import StackConfig
from components.karpenter_config import DISCOVERY_TAG
from components.policies import AwsScope, node_role_trust_policy
from components.preflight import Caller

# What every node role needs; SSM lets operators reach nodes without SSH keys.
NODE_MANAGED_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonSSMManagedInstanceCore",
)
CLUSTER_ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"
# The preview identity reads the cluster: get/list/watch on every resource (Nodes, the karpenter.sh and
# karpenter.k8s.aws objects and the other cluster-scoped kinds `reconciler snapshot` reads). AmazonEKSViewPolicy,
# the `view` ClusterRole's counterpart, covers namespaced workloads only: no Nodes, no custom resources.
PREVIEW_VIEW_POLICY = "AmazonEKSAdminViewPolicy"


def access_policy_arn(partition: str, name: str) -> str:
    return f"arn:{partition}:eks::aws:cluster-access-policy/{name}"


def managed_policy_arn(partition: str, name: str) -> str:
    return f"arn:{partition}:iam::aws:policy/{name}"


def _arn_in_partition(name: str) -> Callable[[AwsScope], str]:
    """The managed policy's ARN once the partition is known (bound per policy, not per loop variable)."""
    return lambda scope: managed_policy_arn(scope.partition, name)


def attach_node_policies(
    name: str, role: aws.iam.Role, scope: pulumi.Output[AwsScope], parent: pulumi.Resource
) -> list[aws.iam.RolePolicyAttachment]:
    return [
        aws.iam.RolePolicyAttachment(
            f"{name}-{policy}",
            role=role.name,
            policy_arn=scope.apply(_arn_in_partition(policy)),
            opts=pulumi.ResourceOptions(parent=parent),
        )
        for policy in NODE_MANAGED_POLICIES
    ]


@dataclass(slots=True)
class ClusterArgs:
    config: StackConfig
    vpc_id: pulumi.Input[str]
    private_subnet_ids: pulumi.Input[list[str]]
    public_subnet_ids: pulumi.Input[list[str]]
    scope: pulumi.Output[AwsScope]
    tags: dict[str, str] = field(default_factory=dict)
    # Who runs the program (components.preflight): a preview role's run reads the cluster as itself.
    caller: Caller | None = None


def kubeconfig_role(config: StackConfig, caller: Caller | None) -> str | None:
    """The role the Kubernetes provider's kubeconfig assumes: the deployer role, except in a run by the
    preview role, which reads the cluster with its own (view-only) credentials and may not assume the
    deployer's."""
    if config.preview_role_arn and caller is not None and caller.is_role(config.preview_role_arn):
        return None
    return config.deployer_role_arn


class Cluster(pulumi.ComponentResource):
    name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    security_group_id: pulumi.Output[str]
    oidc_provider_arn: pulumi.Output[str]
    oidc_issuer: pulumi.Output[str]
    system_node_group: eks.ManagedNodeGroup
    provider: k8s.Provider

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_token("Cluster"), name, {}, opts)
        config = args.config
        child = pulumi.ResourceOptions(parent=self)
        deployer = config.deployer_role_arn
        kube_role = kubeconfig_role(config, args.caller)
        has_public_subnets = config.network.mode == "create" or bool(config.network.public_subnet_ids)

        cluster = eks.Cluster(
            f"{name}-eks",
            name=config.cluster_name,
            version=config.kubernetes_version,
            vpc_id=args.vpc_id,
            private_subnet_ids=args.private_subnet_ids,
            public_subnet_ids=args.public_subnet_ids if has_public_subnets else None,
            endpoint_private_access=True,
            endpoint_public_access=config.endpoint_public_access,
            public_access_cidrs=config.public_access_cidrs if config.endpoint_public_access else None,
            authentication_mode=eks.AuthenticationMode.API,
            skip_default_node_group=True,
            # Nodes (system and Adze-launched) share the EKS-created cluster security group.
            skip_default_security_groups=True,
            node_associate_public_ip_address=False,
            create_oidc_provider=config.identity_mode == "irsa",
            enabled_cluster_log_types=list(config.cluster_log_types),
            deletion_protection=config.protect,
            provider_credential_opts=eks.KubeconfigOptionsArgs(role_arn=kube_role) if kube_role else None,
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, protect=config.protect),
        )
        eks_cluster = cluster.eks_cluster
        self.name = eks_cluster.name
        self.endpoint = eks_cluster.endpoint
        self.security_group_id = eks_cluster.vpc_config.cluster_security_group_id
        self.oidc_provider_arn = cluster.oidc_provider_arn
        self.oidc_issuer = cluster.oidc_issuer
        self.kubeconfig = pulumi.Output.secret(cluster.kubeconfig_json)

        # The EKS-created security group is owned by EKS, so tag it rather than manage its tags.
        aws.ec2.Tag(
            f"{name}-sg-discovery",
            resource_id=self.security_group_id,
            key=DISCOVERY_TAG,
            value=discovery_tags(config.cluster_name)[DISCOVERY_TAG],
            opts=child,
        )

        system_role = aws.iam.Role(
            f"{name}-system-node",
            assume_role_policy=args.scope.apply(lambda s: json.dumps(node_role_trust_policy(s))),
            description=f"System node group of EKS cluster {config.cluster_name}",
            tags=args.tags,
            opts=child,
        )
        attachments = attach_node_policies(f"{name}-system-node", system_role, args.scope, self)
        system = config.system_node_group
        self.system_node_group = eks.ManagedNodeGroup(
            f"{name}-system",
            cluster=cluster,
            node_role=system_role,
            subnet_ids=args.private_subnet_ids,
            instance_types=list(system.instance_types),
            capacity_type=system.capacity_type,
            ami_type=system.ami_type,
            disk_size=system.disk_size_gib,
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=system.min_size,
                desired_size=system.desired_size or system.min_size,
                max_size=system.max_size,
            ),
            labels={SYSTEM_NODE_LABEL: SYSTEM_NODE_LABEL_VALUE},
            taints=[aws.eks.NodeGroupTaintArgs(key=CRITICAL_ADDONS_TAINT, value="true", effect="NO_SCHEDULE")]
            if system.taint
            else None,
            ignore_scaling_changes=True,
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=attachments),
        )
        # A DaemonSet: it needs the system nodes before it can become healthy.
        self.pod_identity_agent = aws.eks.Addon(
            f"{name}-pod-identity-agent",
            cluster_name=self.name,
            addon_name="eks-pod-identity-agent",
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.system_node_group]),
        )

        provider_dependencies: list[pulumi.Resource] = [self.system_node_group]
        if deployer:
            entry = aws.eks.AccessEntry(
                f"{name}-deployer",
                cluster_name=self.name,
                principal_arn=deployer,
                type="STANDARD",
                tags=args.tags,
                opts=child,
            )
            provider_dependencies.append(
                aws.eks.AccessPolicyAssociation(
                    f"{name}-deployer-admin",
                    cluster_name=self.name,
                    principal_arn=entry.principal_arn,
                    policy_arn=access_policy_arn(deployer.split(":")[1], CLUSTER_ADMIN_POLICY),
                    access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                    opts=child,
                )
            )
        if config.preview_role_arn:
            preview = aws.eks.AccessEntry(
                f"{name}-preview",
                cluster_name=self.name,
                principal_arn=config.preview_role_arn,
                type="STANDARD",
                tags=args.tags,
                opts=child,
            )
            aws.eks.AccessPolicyAssociation(
                f"{name}-preview-view",
                cluster_name=self.name,
                principal_arn=preview.principal_arn,
                policy_arn=access_policy_arn(config.preview_role_arn.split(":")[1], PREVIEW_VIEW_POLICY),
                access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                opts=child,
            )
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=provider_dependencies),
        )
        self.register_outputs(
            {
                "name": self.name,
                "endpoint": self.endpoint,
                "security_group_id": self.security_group_id,
                "kubeconfig": self.kubeconfig,
            }
        )


class MetricsServer(pulumi.ComponentResource):
    """The EKS community metrics-server add-on.

    Its pods do not tolerate the system taint, so it is created after the NodePools:
    Adze launches the node it runs on, and ``pulumi destroy`` removes it first.
    """

    def __init__(
        self, name: str, cluster_name: pulumi.Input[str], tags: dict[str, str], opts: pulumi.ResourceOptions
    ) -> None:
        super().__init__(type_token("MetricsServer"), name, {}, opts)
        self.addon = aws.eks.Addon(
            f"{name}-addon",
            cluster_name=cluster_name,
            addon_name="metrics-server",
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=tags,
            opts=pulumi.ResourceOptions(parent=self, custom_timeouts=pulumi.CustomTimeouts(create="30m")),
        )
        self.register_outputs({})
