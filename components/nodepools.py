"""EC2NodeClass and NodePool custom resources from stack config.

Destroy order is what keeps ``pulumi destroy`` from leaking instances. Every object
here depends on the reconciler (and each NodePool on its NodeClass), so Pulumi
deletes them first, while the reconciler still runs:

1. a NodePool is deleted in the foreground, so it disappears only after the
   NodeClaims it owns are gone, i.e. after the reconciler drained their nodes and
   terminated their instances;
2. an EC2NodeClass's finalizer holds it until no NodeClaim uses it and the
   reconciler has deleted its launch templates and instance profiles;
3. only then are the reconciler, its RBAC, CRDs and IAM removed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.common import type_token
from components.karpenter_config import (
    NODECLASS_API_VERSION,
    NODECLASS_KIND,
    NODEPOOL_API_VERSION,
    NodeClassEntry,
    NodePoolEntry,
)

# pulumi-kubernetes deletes with this propagation policy and waits for the object to go.
DELETION_PROPAGATION_ANNOTATION = "pulumi.com/deletionPropagationPolicy"
# Draining a node honours PodDisruptionBudgets and grace periods; give it time.
DELETE_TIMEOUT = "45m"
MANAGED_BY = {"app.kubernetes.io/managed-by": "pulumi", "app.kubernetes.io/part-of": "adze"}


def node_class_spec(entry: NodeClassEntry, node_role_name: pulumi.Input[str]) -> dict[str, Any]:
    spec: dict[str, Any] = dict(entry.spec)
    if entry.uses_stack_role:
        spec["role"] = node_role_name
    return spec


@dataclass(slots=True)
class NodePoolsArgs:
    node_classes: tuple[NodeClassEntry, ...]
    node_pools: tuple[NodePoolEntry, ...]
    node_role_name: pulumi.Input[str]
    provider: k8s.Provider
    # The reconciler component: it must outlive every NodePool and NodeClass.
    reconciler: pulumi.Resource
    extra_dependencies: list[pulumi.Resource] = field(default_factory=list)


class NodePools(pulumi.ComponentResource):
    node_pool_names: list[str]
    node_class_names: list[str]

    def __init__(self, name: str, args: NodePoolsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_token("NodePools"), name, {}, opts)
        metadata_base = {
            "labels": dict(MANAGED_BY),
            "annotations": {DELETION_PROPAGATION_ANNOTATION: "foreground"},
        }

        def options(*depends_on: pulumi.Resource) -> pulumi.ResourceOptions:
            return pulumi.ResourceOptions(
                parent=self,
                provider=args.provider,
                depends_on=[args.reconciler, *args.extra_dependencies, *depends_on],
                custom_timeouts=pulumi.CustomTimeouts(delete=DELETE_TIMEOUT),
            )

        node_classes: dict[str, k8s.apiextensions.CustomResource] = {}
        for entry in args.node_classes:
            node_classes[entry.name] = k8s.apiextensions.CustomResource(
                f"{name}-nodeclass-{entry.name}",
                api_version=NODECLASS_API_VERSION,
                kind=NODECLASS_KIND,
                metadata={**metadata_base, "name": entry.name},
                spec=node_class_spec(entry, args.node_role_name),
                opts=options(),
            )
        for pool in args.node_pools:
            k8s.apiextensions.CustomResource(
                f"{name}-nodepool-{pool.name}",
                api_version=NODEPOOL_API_VERSION,
                kind="NodePool",
                metadata={**metadata_base, "name": pool.name},
                spec=dict(pool.spec),
                opts=options(node_classes[pool.node_class]),
            )
        self.node_pool_names = [entry.name for entry in args.node_pools]
        self.node_class_names = list(node_classes)
        self.register_outputs({"node_pool_names": self.node_pool_names, "node_class_names": self.node_class_names})
