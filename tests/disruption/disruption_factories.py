"""Manifest builders for disruption tests (plain dicts, as the API server returns them)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

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
        api = {"ReplicaSet": "apps/v1", "DaemonSet": "apps/v1", "StatefulSet": "apps/v1", "Node": "v1", "Job": "batch/v1"}
        metadata["ownerReferences"] = [
            {"apiVersion": api[owner], "kind": owner, "name": f"{name}-owner", "uid": f"owner-{name}", "controller": True}
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
