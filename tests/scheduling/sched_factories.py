"""Small builders for scheduling tests: manifests as the API server returns them, and a tiny catalogue."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from reconciler.cloud.types import InstanceType, Offering
from reconciler.model import labels as wk
from reconciler.model.resources import Resources
from reconciler.provisioning.provisioner import ProvisioningPlan, plan
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState

NOW = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")


def instance_type(
    name: str,
    cpu: int,
    memory_gi: int,
    pods: int = 110,
    *,
    price: float | None = None,
    arch: str = "amd64",
    zones: Sequence[str] = ZONES,
    capacity_types: Sequence[str] = ("spot", "on-demand"),
    extra: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    unavailable: Iterable[tuple[str, str]] = (),
) -> InstanceType:
    """``price`` is the on-demand price (default 0.05/vCPU); spot costs 40 % of it."""
    base = price if price is not None else 0.05 * cpu
    gone = set(unavailable)
    offerings = tuple(
        Offering(zone, ct, round(base * (0.4 if ct == "spot" else 1.0), 4), (zone, ct) not in gone)
        for ct in capacity_types
        for zone in zones
    )
    capacity = {"cpu": str(cpu), "memory": f"{memory_gi}Gi", "pods": str(pods), **(extra or {})}
    return InstanceType(
        name=name,
        capacity=Resources.from_manifest(capacity),
        overhead=Resources.of(cpu="100m", memory="100Mi"),
        offerings=offerings,
        labels={
            wk.INSTANCE_TYPE: name,
            wk.ARCH: arch,
            wk.OS: "linux",
            wk.REGION: "test-region",
            **(labels or {}),
        },
    )


def catalog() -> list[InstanceType]:
    return [
        instance_type("small", 2, 4, 10),
        instance_type("medium", 4, 8, 30),
        instance_type("large", 8, 16, 60),
        instance_type("arm-medium", 4, 8, 30, price=0.15, arch="arm64"),
        instance_type("gpu", 8, 32, 60, price=3.0, extra={"nvidia.com/gpu": "1"}),
    ]


def nodepool(
    name: str = "default",
    *,
    requirements: list[dict[str, Any]] | None = None,
    taints: list[dict[str, Any]] | None = None,
    startup_taints: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    weight: int | None = None,
    limits: dict[str, Any] | None = None,
) -> dict[str, Any]:
    template_spec: dict[str, Any] = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": requirements if requirements is not None else [],
    }
    if taints:
        template_spec["taints"] = taints
    if startup_taints:
        template_spec["startupTaints"] = startup_taints
    spec: dict[str, Any] = {"template": {"metadata": {"labels": labels or {}}, "spec": template_spec}}
    if weight is not None:
        spec["weight"] = weight
    if limits is not None:
        spec["limits"] = limits
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": spec,
    }


def pod(
    name: str,
    cpu: str = "100m",
    memory: str = "128Mi",
    *,
    labels: dict[str, str] | None = None,
    namespace: str = "default",
    node_name: str | None = None,
    extra_requests: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": memory, **(extra_requests or {})}
    body: dict[str, Any] = {
        "containers": [{"name": "app", "image": "pause", "resources": {"requests": requests}}]
    }
    body.update(spec)
    if node_name:
        body["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "labels": labels or {},
            "creationTimestamp": "2026-01-01T08:00:00Z",
        },
        "spec": body,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def pods(
    prefix: str, count: int, cpu: str = "100m", memory: str = "128Mi", **kwargs: Any
) -> list[dict[str, Any]]:
    return [pod(f"{prefix}-{i}", cpu, memory, **kwargs) for i in range(count)]


def node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    max_pods: str = "30",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    zone: str = "test-zone-1",
    instance: str = "medium",
    capacity_type: str = "on-demand",
    nodepool_name: str | None = "default",
    ready: bool = True,
) -> dict[str, Any]:
    node_labels = {
        wk.HOSTNAME: name,
        wk.ZONE: zone,
        wk.INSTANCE_TYPE: instance,
        wk.CAPACITY_TYPE: capacity_type,
        wk.ARCH: "amd64",
        wk.OS: "linux",
        **(labels or {}),
    }
    if nodepool_name:
        node_labels[wk.NODEPOOL] = nodepool_name
        node_labels[wk.INITIALIZED] = "true"
    resources = {"cpu": cpu, "memory": memory, "pods": max_pods}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": node_labels, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"providerID": f"test:///{name}", "taints": taints or []},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def daemonset(name: str, cpu: str = "100m", memory: str = "100Mi", **spec: Any) -> dict[str, Any]:
    template_spec: dict[str, Any] = {
        "containers": [
            {"name": "d", "image": "d", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
        ],
    }
    template_spec.update(spec)
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "kube-system", "uid": f"uid-ds-{name}"},
        "spec": {
            "selector": {"matchLabels": {"ds": name}},
            "template": {"metadata": {"labels": {"ds": name}}, "spec": template_spec},
        },
    }


def names() -> Any:
    counter = itertools.count(1)

    def name_for(nodepool: str) -> str:
        return f"{nodepool}-{next(counter):05d}"

    return name_for


def solve(
    objects: Iterable[Mapping[str, Any]],
    types: Sequence[InstanceType] | None = None,
    settings: Settings | None = None,
    *,
    per_pool: Mapping[str, Sequence[InstanceType]] | None = None,
) -> ProvisioningPlan:
    state = ClusterState.from_manifests(objects)
    chosen = list(types) if types is not None else catalog()
    by_pool = dict(per_pool) if per_pool is not None else {name: chosen for name in state.nodepools}
    return plan(state, by_pool, settings or Settings(), NOW, names())


def claim_pods(result: ProvisioningPlan) -> list[list[str]]:
    return [sorted(c.pods) for c in result.nodeclaims]


def requirement(manifest: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    return next((r for r in manifest["spec"]["requirements"] if r["key"] == key), None)


def spread(
    key: str, labels: dict[str, str], max_skew: int = 1, when: str = "DoNotSchedule", **extra: Any
) -> dict[str, Any]:
    return {
        "maxSkew": max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": labels},
        **extra,
    }


def affinity_term(key: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"topologyKey": key, "labelSelector": {"matchLabels": labels}}


def required_anti_affinity(key: str, labels: dict[str, str]) -> dict[str, Any]:
    """A pod's ``affinity`` with one required anti-affinity term."""
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [affinity_term(key, labels)]}}
