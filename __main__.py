"""Adze infrastructure: one stack per environment (see Pulumi.<stack>.yaml and docs/deploying.md)."""

from __future__ import annotations

from pathlib import Path

import pulumi

from components.cluster import Cluster, ClusterArgs, MetricsServer
from components.common import SERVICE_ACCOUNT_NAME, current_aws_scope, stack_tags
from components.config import ConfigError, read_pulumi_config
from components.iam import Iam, IamArgs
from components.interruption import Interruption, InterruptionArgs
from components.karpenter_config import ami_ssm_parameters
from components.network import Network, NetworkArgs
from components.nodepools import NodePools, NodePoolsArgs
from components.preflight import PulumiLookups, preflight
from components.reconciler import Reconciler, ReconcilerArgs

try:
    config = read_pulumi_config()
    # Look-ups in the account (example ids, foreign accounts, missing VPC or subnets) before any resource.
    caller = preflight(config, PulumiLookups())
except ConfigError as err:
    # A clean, path-named message and no traceback; nothing has been registered yet.
    raise pulumi.RunError(str(err)) from None

name = config.cluster_name
tags = stack_tags(name)
scope = current_aws_scope()

network = Network(name, NetworkArgs(cluster_name=name, config=config.network, tags=tags))
cluster = Cluster(
    name,
    ClusterArgs(
        config=config,
        vpc_id=network.vpc_id,
        private_subnet_ids=network.private_subnet_ids,
        public_subnet_ids=network.public_subnet_ids,
        scope=scope,
        tags=tags,
        caller=caller,
    ),
)
interruption = (
    Interruption(name, InterruptionArgs(cluster_name=name, config=config.interruption, scope=scope, tags=tags))
    if config.interruption.enabled
    else None
)
iam = Iam(
    name,
    IamArgs(
        cluster_name=name,
        eks_cluster_name=cluster.name,
        scope=scope,
        identity_mode=config.identity_mode,
        namespace=config.reconciler.namespace,
        service_account=SERVICE_ACCOUNT_NAME,
        queue_arn=interruption.queue_arn if interruption else None,
        queue_kms_key_arn=interruption.kms_key_arn if interruption else None,
        oidc_provider_arn=cluster.oidc_provider_arn,
        oidc_issuer=cluster.oidc_issuer,
        create_spot_service_linked_role=config.create_spot_service_linked_role,
        ssm_parameters=ami_ssm_parameters(config.node_classes),
        tags=tags,
    ),
)
reconciler = Reconciler(
    name,
    ReconcilerArgs(
        config=config,
        cluster_name=cluster.name,
        cluster_endpoint=cluster.endpoint,
        region=scope.apply(lambda s: s.region),
        controller_role_arn=iam.controller_role_arn,
        provider=cluster.provider,
        repo_root=Path(__file__).resolve().parent,
        queue_name=interruption.queue_name if interruption else None,
        depends_on=[*iam.controller_ready, cluster.system_node_group, cluster.pod_identity_agent],
        tags=tags,
    ),
)
node_pools = NodePools(
    name,
    NodePoolsArgs(
        node_classes=config.node_classes,
        node_pools=config.node_pools,
        node_role_name=iam.node_role_name,
        provider=cluster.provider,
        reconciler=reconciler,
    ),
)
if config.metrics_server:
    MetricsServer(f"{name}-metrics-server", cluster.name, tags, pulumi.ResourceOptions(depends_on=[node_pools]))

pulumi.export("clusterName", cluster.name)
pulumi.export("kubeconfig", cluster.kubeconfig)
pulumi.export("vpcId", network.vpc_id)
pulumi.export("interruptionQueueName", interruption.queue_name if interruption else None)
pulumi.export("nodeRoleName", iam.node_role_name)
pulumi.export("nodeRoleArn", iam.node_role_arn)
pulumi.export("controllerRoleArn", iam.controller_role_arn)
pulumi.export("reconcilerImage", reconciler.image)
pulumi.export("nodePoolNames", node_pools.node_pool_names)
pulumi.export("nodeClassNames", node_pools.node_class_names)
