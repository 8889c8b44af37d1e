"""Manifest builders for disruption tests (plain dicts, as the API server returns them)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.cloud.types import InstanceType, Offering
from reconciler.disruption.decide import decide
from reconciler.disruption.types import DisruptionDecision
from reconciler.model.resources import Resources
from reconciler.settings import DEFAULT_FEATURE_GATES, Settings
from reconciler.state.cluster import ClusterState

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def ts(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(
    name: str,
    *,
    namespace: str = "default",
    node: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    cpu: str = "100m",
    memory: str = "128Mi",
    owner: str | None = "ReplicaSet",
    phase: str = "Running",
    ready: bool | None = True,
    started: datetime | None = None,
    deleted: datetime | None = None,
    priority: int | None = None,
    priority_class: str | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    grace_seconds: int | None = None,
    extra_spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "labels": dict(labels or {}),
        "annotations": dict(annotations or {}),
        "creationTimestamp": ts((started or NOW) - timedelta(seconds=1)),
    }
    if owner:
        api = {
            "ReplicaSet": "apps/v1",
            "DaemonSet": "apps/v1",
            "StatefulSet": "apps/v1",
            "Node": "v1",
            "Job": "batch/v1",
        }
        metadata["ownerReferences"] = [
            {
                "apiVersion": api[owner],
                "kind": owner,
                "name": f"{name}-owner",
                "uid": f"owner-{name}",
                "controller": True,
            }
        ]
    if deleted is not None:
        metadata["deletionTimestamp"] = ts(deleted)
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": "pause", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
    }
    if node:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    if priority_class:
        spec["priorityClassName"] = priority_class
    if tolerations:
        spec["tolerations"] = tolerations
    if grace_seconds is not None:
        spec["terminationGracePeriodSeconds"] = grace_seconds
    spec.update(extra_spec or {})
    status: dict[str, Any] = {"phase": phase}
    if node:
        status["startTime"] = ts(started or NOW - timedelta(hours=1))
        status["conditions"] = [{"type": "PodScheduled", "status": "True"}]
        if ready is not None:
            status["conditions"].append({"type": "Ready", "status": "True" if ready else "False"})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def pdb(
    name: str,
    selector: dict[str, str] | None,
    *,
    namespace: str = "default",
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    allowed: int | None = None,
    always_allow: bool = False,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if selector is not None:
        spec["selector"] = {"matchLabels": selector}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    if always_allow:
        spec["unhealthyPodEvictionPolicy"] = "AlwaysAllow"
    manifest: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    if allowed is not None:
        manifest["status"] = {"disruptionsAllowed": allowed}
    return manifest


def nodepool(
    name: str = "default",
    *,
    consolidate_after: str = "0s",
    policy: str = "WhenEmptyOrUnderutilized",
    budgets: list[dict[str, Any]] | None = None,
    requirements: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    expire_after: str = "720h",
    termination_grace_period: str | None = None,
    weight: int | None = None,
) -> dict[str, Any]:
    template_spec: dict[str, Any] = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": requirements
        if requirements is not None
        else [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
        "expireAfter": expire_after,
    }
    if termination_grace_period:
        template_spec["terminationGracePeriod"] = termination_grace_period
    spec: dict[str, Any] = {
        "template": {"metadata": {"labels": dict(labels or {})}, "spec": template_spec},
        "disruption": {"consolidateAfter": consolidate_after, "consolidationPolicy": policy},
    }
    if budgets is not None:
        spec["disruption"]["budgets"] = budgets
    if weight is not None:
        spec["weight"] = weight
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def managed_node(
    name: str,
    *,
    instance_type: str = "m5.large",
    zone: str = "test-zone-1",
    capacity_type: str = "on-demand",
    pool: str = "default",
    cpu: str = "2",
    memory: str = "8Gi",
    max_pods: str = "110",
    created: datetime | None = None,
    initialized: bool = True,
    last_pod_event: datetime | None = None,
    annotations: dict[str, str] | None = None,
    claim_annotations: dict[str, str] | None = None,
    ready: bool = True,
    termination_grace_period: str | None = None,
    expire_after: str = "720h",
    extra_labels: dict[str, str] | None = None,
    conditions: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """A registered Node and its NodeClaim (named ``<name>-claim``)."""
    created = created or NOW - timedelta(hours=2)
    labels = {
        "kubernetes.io/hostname": name,
        "karpenter.sh/nodepool": pool,
        "node.kubernetes.io/instance-type": instance_type,
        "topology.kubernetes.io/zone": zone,
        "karpenter.sh/capacity-type": capacity_type,
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "karpenter.sh/registered": "true",
        **(extra_labels or {}),
    }
    if initialized:
        labels["karpenter.sh/initialized"] = "true"
    provider_id = f"sim:///{zone}/i-{name}"
    capacity = {"cpu": cpu, "memory": memory, "pods": max_pods}
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": dict(annotations or {}),
            "creationTimestamp": ts(created),
            "finalizers": ["karpenter.sh/termination"],
        },
        "spec": {"providerID": provider_id},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }
    claim_conditions = [
        {"type": "Launched", "status": "True", "lastTransitionTime": ts(created)},
        {"type": "Registered", "status": "True", "lastTransitionTime": ts(created)},
    ]
    if initialized:
        claim_conditions.append({"type": "Initialized", "status": "True", "lastTransitionTime": ts(created)})
    claim_conditions.extend(conditions or [])
    spec: dict[str, Any] = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [instance_type]}],
        "expireAfter": expire_after,
    }
    if termination_grace_period:
        spec["terminationGracePeriod"] = termination_grace_period
    status: dict[str, Any] = {
        "nodeName": name,
        "providerID": provider_id,
        "capacity": capacity,
        "allocatable": capacity,
        "conditions": claim_conditions,
    }
    if last_pod_event is not None:
        status["lastPodEventTime"] = ts(last_pod_event)
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": f"{name}-claim",
            "labels": {k: v for k, v in labels.items() if k != "kubernetes.io/hostname"},
            "annotations": dict(claim_annotations or {}),
            "creationTimestamp": ts(created),
        },
        "spec": spec,
        "status": status,
    }
    return [node, claim]


def instance_type(
    name: str,
    cpu: int,
    memory_gi: int,
    on_demand: float,
    spot: float | None = None,
    *,
    zones: tuple[str, ...] = ("test-zone-1", "test-zone-2"),
    max_pods: int = 110,
    family: str = "m5",
) -> InstanceType:
    offerings = [Offering(z, "on-demand", on_demand) for z in zones]
    if spot is not None:
        offerings += [Offering(z, "spot", spot) for z in zones]
    return InstanceType(
        name=name,
        capacity=Resources.of(cpu=str(cpu), memory=f"{memory_gi}Gi", pods=str(max_pods)),
        offerings=tuple(offerings),
        labels={
            "node.kubernetes.io/instance-type": name,
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/os": "linux",
            "karpenter.k8s.aws/instance-family": family,
            "karpenter.k8s.aws/instance-cpu": str(cpu),
        },
    )


SMALL = instance_type("small", 2, 4, 0.05, 0.02, family="s")
MEDIUM = instance_type("medium", 4, 8, 0.10, 0.04, family="m")
LARGE = instance_type("large", 8, 16, 0.20, 0.08, family="l")
TYPES = [SMALL, MEDIUM, LARGE]


def node_of(name: str, itype: InstanceType, **kwargs: Any) -> list[dict[str, Any]]:
    """A managed Node + NodeClaim of ``itype`` (capacity taken from the type)."""
    capacity = itype.capacity.to_manifest()
    return managed_node(
        name,
        instance_type=itype.name,
        cpu=capacity["cpu"],
        memory=capacity["memory"],
        max_pods=capacity.get("pods", "110"),
        extra_labels={k: v for k, v in itype.labels.items() if k.startswith("karpenter.k8s.aws/")},
        **kwargs,
    )


def cluster(*objects: Any) -> ClusterState:
    flat: list[dict[str, Any]] = []
    for item in objects:
        flat.extend(item if isinstance(item, list) else [item])
    return ClusterState.from_manifests(flat)


def run_decide(
    state: ClusterState,
    types: list[InstanceType] | None = None,
    *,
    now: datetime = NOW,
    gates: dict[str, bool] | None = None,
    **kwargs: Any,
) -> DisruptionDecision:
    settings = Settings(feature_gates={**DEFAULT_FEATURE_GATES, **(gates or {})})
    pools = {name: (types or TYPES) for name in state.nodepools}
    return decide(state, pools, settings, now, **kwargs)


def why(decision: DisruptionDecision, node: str) -> str:
    found = [f"{e.code}: {e.message}" for e in decision.explanations if e.node == node]
    return " | ".join(found)
