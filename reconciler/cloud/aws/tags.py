"""Ownership tags: what every created resource must carry, and what users may not set.

The scoped IAM policy only allows CreateFleet/RunInstances/CreateLaunchTemplate
(and the CreateTags that goes with them) when the request carries
``kubernetes.io/cluster/<cluster>=owned``, ``eks:eks-cluster-name=<cluster>`` and
``karpenter.sh/nodepool``; the orphan collector finds instances by the same tags.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

NODEPOOL_TAG = "karpenter.sh/nodepool"
NODECLASS_TAG = "karpenter.k8s.aws/ec2nodeclass"
NODECLAIM_TAG = "karpenter.sh/nodeclaim"
EKS_CLUSTER_NAME_TAG = "eks:eks-cluster-name"
NAME_TAG = "Name"
REGION_TAG = "topology.kubernetes.io/region"


def cluster_tag(cluster: str) -> str:
    return f"kubernetes.io/cluster/{cluster}"


def is_restricted(key: str) -> bool:
    """Keys a NodeClass's ``spec.tags`` may not set (Karpenter's validation list)."""
    return key.startswith("kubernetes.io/cluster/") or key in (
        NODEPOOL_TAG,
        EKS_CLUSTER_NAME_TAG,
        NODECLASS_TAG,
        NODECLAIM_TAG,
    )


def validate_user_tags(tags: Mapping[str, Any] | None, *, path: str = "spec.tags") -> dict[str, str]:
    if not tags:
        return {}
    if not isinstance(tags, Mapping):
        raise ValueError(f"{path}: expected a map of tag key to value")
    for key in tags:
        if is_restricted(str(key)):
            raise ValueError(f"{path}.{key}: tag key is reserved for the reconciler's ownership tags")
    return {str(k): str(v) for k, v in tags.items()}


def ownership_tags(cluster: str, nodepool: str, nodeclass: str) -> dict[str, str]:
    return {
        cluster_tag(cluster): "owned",
        EKS_CLUSTER_NAME_TAG: cluster,
        NODEPOOL_TAG: nodepool,
        NODECLASS_TAG: nodeclass,
    }


def launch_tags(
    cluster: str,
    nodepool: str,
    nodeclass: str,
    user_tags: Mapping[str, str] | None = None,
    nodeclaim: str = "",
) -> dict[str, str]:
    """User tags overlaid with the static ownership tags (which always win).

    The NodeClaim name is added at creation too (Karpenter adds it after
    registration): it lets a restarted reconciler adopt an instance it launched
    just before crashing instead of launching a duplicate.
    """
    tags = dict(user_tags or {})
    tags.update(ownership_tags(cluster, nodepool, nodeclass))
    if nodeclaim:
        tags[NODECLAIM_TAG] = nodeclaim
    return tags


def tag_specifications(resource_types: Sequence[str], tags: Mapping[str, str]) -> list[dict[str, Any]]:
    items = [{"Key": key, "Value": value} for key, value in sorted(tags.items())]
    return [{"ResourceType": resource_type, "Tags": list(items)} for resource_type in resource_types]


def tags_of(item: Mapping[str, Any]) -> dict[str, str]:
    """``[{Key, Value}]`` as a dict."""
    return {str(tag.get("Key")): str(tag.get("Value", "")) for tag in item.get("Tags") or []}
