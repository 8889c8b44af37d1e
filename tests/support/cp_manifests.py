"""Manifests for the tests on the real control plane: NodePools, workloads, disruption budgets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reconciler.model import labels as wk

PAUSE_IMAGE = "public.ecr.aws/eks-distro/kubernetes/pause:3.7"


def nodepool(
    name: str,
    *,
    families: Sequence[str] = ("c5",),
    sizes: Sequence[str] = ("large", "xlarge", "2xlarge"),
    consolidate_after: str = "0s",
    consolidation_policy: str = "WhenEmptyOrUnderutilized",
    budgets: Sequence[dict[str, Any]] = ({"nodes": "100%"},),
    labels: dict[str, str] | None = None,
    weight: int | None = None,
    nodeclass: str = "default",
    capacity_types: Sequence[str] = ("on-demand",),
    expire_after: str = "720h",
) -> dict[str, Any]:
    """A NodePool (on-demand by default) over the given EC2 families and sizes."""
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": dict(labels or {})},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": nodeclass},
                "requirements": [
                    {"key": wk.CAPACITY_TYPE, "operator": "In", "values": list(capacity_types)},
                    {"key": wk.INSTANCE_FAMILY, "operator": "In", "values": list(families)},
                    {"key": wk.INSTANCE_SIZE, "operator": "In", "values": list(sizes)},
                ],
                "expireAfter": expire_after,
            },
        },
        "disruption": {
            "consolidationPolicy": consolidation_policy,
            "consolidateAfter": consolidate_after,
            "budgets": [dict(b) for b in budgets],
        },
    }
    if weight is not None:
        spec["weight"] = weight
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def deployment(
    name: str,
    replicas: int,
    *,
    cpu: str = "500m",
    memory: str = "256Mi",
    spread_key: str | None = None,
    node_selector: dict[str, str] | None = None,
    one_per_node: bool = False,
) -> dict[str, Any]:
    """pause containers with requests; ``spread_key``: a hard topology spread (maxSkew 1) over that label;
    ``one_per_node``: a required pod anti-affinity on the host name (each pod needs a node of its own)."""
    pod_spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 5,
        "containers": [{"name": "app", "image": PAUSE_IMAGE,
                        "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
    }
    if node_selector:
        pod_spec["nodeSelector"] = dict(node_selector)
    if spread_key:
        pod_spec["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": spread_key, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": name}},
        }]
    if one_per_node:
        pod_spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": {"app": name}},
        }]}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec},
        },
    }


def pod_disruption_budget(
    name: str, app: str, *, max_unavailable: int | str | None = None, min_available: int | str | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"matchLabels": {"app": app}}}
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    if min_available is not None:
        spec["minAvailable"] = min_available
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name}, "spec": spec}


def is_ready(obj: dict[str, Any]) -> bool:
    """The object's Ready condition is True (Pods, Nodes, NodeClaims, NodePools, EC2NodeClasses)."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
