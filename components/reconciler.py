"""The reconciler in the cluster: image, namespace, CRDs, RBAC, Deployment, PDB and metrics Service.

CRDs come from the reconciler's own API models (the same schemas ``python -m
reconciler crds`` prints), so the cluster validates NodePools exactly as the stack did.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.common import LEADER_ELECTION_LEASE, SERVICE_ACCOUNT_NAME, type_token
from components.config import StackConfig
from components.image import ReconcilerImage, ReconcilerImageArgs
from components.rbac import KUBE_DNS_NAMESPACE, cluster_role_rules, dns_discovery_rules, leader_election_rules
from components.workload import (
    APP_LABELS,
    WorkloadSpec,
    deployment_spec,
    disruption_budget_spec,
    metrics_service_spec,
)

IRSA_ANNOTATION = "eks.amazonaws.com/role-arn"
# Namespaces that exist in every cluster; the stack must not own (or delete) them.
BUILTIN_NAMESPACES = frozenset({"kube-system", "default"})


@dataclass(slots=True)
class ReconcilerArgs:
    config: StackConfig
    cluster_name: pulumi.Input[str]
    cluster_endpoint: pulumi.Input[str]
    region: pulumi.Input[str]
    controller_role_arn: pulumi.Input[str]
    provider: k8s.Provider
    repo_root: Path
    queue_name: pulumi.Input[str] | None = None
    # IAM and node-group resources the pods need before they start (and must outlive them).
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)


def stack_settings(args: ReconcilerArgs) -> dict[str, Any]:
    """Environment the stack derives (Karpenter's names), then the user's ``adze:reconciler.settings``."""
    settings: dict[str, Any] = {
        "CLUSTER_NAME": args.cluster_name,
        "CLUSTER_ENDPOINT": args.cluster_endpoint,
        "AWS_REGION": args.region,
        "LOG_LEVEL": args.config.reconciler.log_level,
    }
    if args.queue_name is not None:
        settings["INTERRUPTION_QUEUE"] = args.queue_name
    return {**settings, **dict(sorted(args.config.reconciler.settings.items()))}


def generated_crds() -> list[dict[str, Any]]:
    from reconciler.api.crds import generate_crds

    return list(generate_crds())


class Reconciler(pulumi.ComponentResource):
    image: pulumi.Output[str]
    namespace: str
    deployment: k8s.apps.v1.Deployment

    def __init__(self, name: str, args: ReconcilerArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_token("Reconciler"), name, {}, opts)
        config = args.config.reconciler
        self.namespace = config.namespace
        if config.image:
            self.image = pulumi.Output.from_input(config.image)
        else:
            built = ReconcilerImage(
                f"{name}-image",
                ReconcilerImageArgs(
                    repo_root=args.repo_root, arm64=args.config.system_node_group.arm64, tags=args.tags
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.image = built.ref

        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.provider)
        metadata = {"namespace": config.namespace, "labels": dict(APP_LABELS)}
        foundation: list[pulumi.Resource] = []
        if config.namespace not in BUILTIN_NAMESPACES:
            foundation.append(
                k8s.core.v1.Namespace(
                    f"{name}-namespace",
                    metadata={"name": config.namespace, "labels": dict(APP_LABELS)},
                    opts=k8s_opts,
                )
            )
        after_namespace = pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=foundation))
        self.crds = [
            k8s.apiextensions.v1.CustomResourceDefinition(
                f"{name}-crd-{crd['metadata']['name']}",
                metadata=crd["metadata"],
                spec=crd["spec"],
                opts=k8s_opts,
            )
            for crd in generated_crds()
        ]
        annotations = {IRSA_ANNOTATION: args.controller_role_arn} if args.config.identity_mode == "irsa" else {}
        service_account = k8s.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata={**metadata, "name": SERVICE_ACCOUNT_NAME, "annotations": annotations},
            opts=after_namespace,
        )
        rbac = self._rbac(name, config.namespace, k8s_opts, after_namespace)

        workload = WorkloadSpec(
            namespace=config.namespace,
            service_account=SERVICE_ACCOUNT_NAME,
            image=self.image,
            replicas=config.replicas,
            resources={"requests": dict(config.resources.requests), "limits": dict(config.resources.limits)},
            settings=stack_settings(args),
        )
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata={**metadata, "name": "adze-reconciler"},
            spec=deployment_spec(workload),
            opts=pulumi.ResourceOptions.merge(
                k8s_opts,
                pulumi.ResourceOptions(depends_on=[*foundation, *self.crds, service_account, *rbac, *args.depends_on]),
            ),
        )
        k8s.policy.v1.PodDisruptionBudget(
            f"{name}-pdb",
            metadata={**metadata, "name": "adze-reconciler"},
            spec=disruption_budget_spec(),
            opts=after_namespace,
        )
        k8s.core.v1.Service(
            f"{name}-metrics",
            metadata={**metadata, "name": "adze-reconciler-metrics"},
            spec=metrics_service_spec(),
            opts=after_namespace,
        )
        self.register_outputs({"image": self.image, "namespace": self.namespace})

    def _rbac(
        self, name: str, namespace: str, k8s_opts: pulumi.ResourceOptions, namespaced: pulumi.ResourceOptions
    ) -> list[pulumi.Resource]:
        subject = [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT_NAME, "namespace": namespace}]
        cluster_role = k8s.rbac.v1.ClusterRole(
            f"{name}-clusterrole",
            metadata={"name": "adze-reconciler", "labels": dict(APP_LABELS)},
            rules=cluster_role_rules(),
            opts=k8s_opts,
        )
        cluster_binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-clusterrolebinding",
            metadata={"name": "adze-reconciler", "labels": dict(APP_LABELS)},
            role_ref={
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "adze-reconciler",
            },
            subjects=subject,
            opts=pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[cluster_role])),
        )
        role = k8s.rbac.v1.Role(
            f"{name}-leader-election",
            metadata={"name": "adze-leader-election", "namespace": namespace, "labels": dict(APP_LABELS)},
            rules=leader_election_rules(LEADER_ELECTION_LEASE),
            opts=namespaced,
        )
        binding = k8s.rbac.v1.RoleBinding(
            f"{name}-leader-election",
            metadata={"name": "adze-leader-election", "namespace": namespace, "labels": dict(APP_LABELS)},
            role_ref={
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "adze-leader-election",
            },
            subjects=subject,
            opts=pulumi.ResourceOptions.merge(namespaced, pulumi.ResourceOptions(depends_on=[role])),
        )
        # kube-system always exists: no dependency on the reconciler's namespace.
        dns_role = k8s.rbac.v1.Role(
            f"{name}-dns",
            metadata={"name": "adze-dns", "namespace": KUBE_DNS_NAMESPACE, "labels": dict(APP_LABELS)},
            rules=dns_discovery_rules(),
            opts=k8s_opts,
        )
        dns_binding = k8s.rbac.v1.RoleBinding(
            f"{name}-dns",
            metadata={"name": "adze-dns", "namespace": KUBE_DNS_NAMESPACE, "labels": dict(APP_LABELS)},
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "adze-dns"},
            subjects=subject,
            opts=pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[dns_role])),
        )
        return [cluster_role, cluster_binding, role, binding, dns_role, dns_binding]
