"""Simulated workload controllers: Deployments, ReplicaSets, StatefulSets, Jobs and DaemonSets make pods.

Pod names are readable and deterministic: ``<workload>-<n>`` with ``n`` counting
up per workload (StatefulSets use their ordinal). Scaling down removes pending
pods first, then the highest-numbered ones, as a ReplicaSet prefers unscheduled
pods. A changed pod template replaces every pod at once (no rolling update).
DaemonSet pods are created for every node they tolerate and select.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from reconciler.kube.api import POD, KubeAPI, Manifest, NotFoundError, kind_of
from reconciler.kube.memory import MemoryKube
from reconciler.model.meta import format_time
from reconciler.sim.scenario import MAX_TOTAL_PODS, ScenarioError

OWNER_ANNOTATION = "sim.adze.dev/owner"
TEMPLATE_HASH_ANNOTATION = "sim.adze.dev/template-hash"
WORKLOAD_KINDS = {"Deployment", "ReplicaSet", "StatefulSet", "Job", "DaemonSet"}


def owner_key(manifest: Mapping[str, Any]) -> str:
    metadata = manifest.get("metadata") or {}
    return f"{manifest.get('kind')}/{metadata.get('namespace', 'default')}/{metadata.get('name')}"


def simulated_scale(kube: MemoryKube) -> Callable[[str, Mapping[str, Any]], int | None]:
    """PDB scale lookup for the simulator's pods: a Deployment's pods name a ReplicaSet after the
    Deployment (the simulator stores no ReplicaSets for them), so such a reference resolves to the
    Deployment's replicas; stored controllers resolve as the API server would."""

    def scale_of(namespace: str, owner: Mapping[str, Any]) -> int | None:
        stored = kube.stored_scale(namespace, owner)
        if stored is not None or owner.get("kind") != "ReplicaSet":
            return stored
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "name": owner.get("name", "")}
        return kube.stored_scale(namespace, deployment)

    return scale_of


def template_hash(template: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(template, sort_keys=True, default=str).encode()).hexdigest()[:10]


def pending_pod(
    template: Mapping[str, Any],
    *,
    name: str,
    namespace: str,
    now: datetime,
    owner: Mapping[str, Any] | None = None,
) -> Manifest:
    """A new, unscheduled pod from a pod template (kube-scheduler already marked it Unschedulable)."""
    template_meta = template.get("metadata") or {}
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": dict(template_meta.get("labels") or {}),
        "annotations": dict(template_meta.get("annotations") or {}),
    }
    if owner is not None:
        owner_kind = "ReplicaSet" if owner.get("kind") == "Deployment" else owner.get("kind")
        metadata["ownerReferences"] = [
            {
                "apiVersion": "batch/v1" if owner_kind == "Job" else "apps/v1",
                "kind": owner_kind,
                "name": owner["metadata"]["name"],
                "uid": (owner.get("metadata") or {}).get("uid") or f"uid-{owner_key(owner)}",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        metadata["annotations"][OWNER_ANNOTATION] = owner_key(owner)
        metadata["annotations"][TEMPLATE_HASH_ANNOTATION] = template_hash(template)
    if not metadata["annotations"]:
        del metadata["annotations"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": copy.deepcopy(dict(template.get("spec") or {})),
        "status": unschedulable_status(now),
    }


def unschedulable_status(now: datetime) -> dict[str, Any]:
    stamp = format_time(now)
    return {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": stamp}
        ],
    }


async def create_with_status(kube: KubeAPI, manifest: Manifest) -> Manifest:
    """Create an object, then set its status: the API server ignores status on create."""
    created = await kube.create(manifest)
    if manifest.get("status"):
        metadata = created["metadata"]
        created = await kube.patch(
            kind_of(created), metadata["name"], {"status": manifest["status"]}, metadata.get("namespace"),
            subresource="status",
        )
    return created


def expand_pod_replicas(manifest: Mapping[str, Any]) -> list[Manifest]:
    """A scenario Pod with top-level ``replicas: N`` stands for N identical pods ``<name>-0..N-1``."""
    if manifest.get("kind") != "Pod" or "replicas" not in manifest:
        return [dict(manifest)]
    pods = []
    for index in range(int(manifest["replicas"])):
        pod = copy.deepcopy({k: v for k, v in manifest.items() if k != "replicas"})
        pod["metadata"]["name"] = f"{manifest['metadata']['name']}-{index}"
        pods.append(pod)
    return pods


class WorkloadControllers:
    """Reconciles workload objects into pods, like kube-controller-manager would."""

    def __init__(self, kube: KubeAPI, snapshot: Callable[[str], list[Manifest]], clock: Callable[[], datetime],
                 daemon_fits: Callable[[Mapping[str, Any], Mapping[str, Any]], bool]) -> None:
        self._kube = kube
        self._snapshot = snapshot
        self._clock = clock
        self._daemon_fits = daemon_fits
        self._next_index: dict[str, int] = {}

    async def reconcile(self) -> None:
        pods_by_owner: dict[str, list[Manifest]] = {}
        for pod in self._snapshot("Pod"):
            key = ((pod.get("metadata") or {}).get("annotations") or {}).get(OWNER_ANNOTATION)
            if key:
                pods_by_owner.setdefault(key, []).append(pod)
        for kind in ("Deployment", "ReplicaSet", "StatefulSet", "Job"):
            for workload in self._snapshot(kind):
                await self._reconcile_replicas(workload, pods_by_owner.get(owner_key(workload), []))
        for daemonset in self._snapshot("DaemonSet"):
            await self._reconcile_daemonset(daemonset, pods_by_owner.get(owner_key(daemonset), []))
        live_owners = {owner_key(w) for kind in WORKLOAD_KINDS for w in self._snapshot(kind)}
        for key, pods in pods_by_owner.items():
            if key not in live_owners:
                for pod in pods:
                    await self._delete_pod(pod)

    async def _reconcile_replicas(self, workload: Manifest, pods: list[Manifest]) -> None:
        spec = workload.get("spec") or {}
        template = spec.get("template") or {}
        if workload.get("kind") == "Job":
            desired = int(spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1)
        else:
            desired = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
        current_hash = template_hash(template)
        keep = []
        for pod in pods:
            annotations = (pod.get("metadata") or {}).get("annotations") or {}
            if annotations.get(TEMPLATE_HASH_ANNOTATION) != current_hash:
                await self._delete_pod(pod)
            else:
                keep.append(pod)
        if len(keep) > desired:
            # Unscheduled pods go first, then the newest (highest-numbered) ones.
            keep.sort(key=lambda p: (bool((p.get("spec") or {}).get("nodeName")), -_pod_index(p)))
            for pod in keep[: len(keep) - desired]:
                await self._delete_pod(pod)
            return
        namespace = (workload.get("metadata") or {}).get("namespace", "default")
        base = workload["metadata"]["name"]
        taken = {p["metadata"]["name"] for p in keep}
        for _ in range(desired - len(keep)):
            name = self._fresh_name(workload, base, taken)
            taken.add(name)
            pod = pending_pod(template, name=name, namespace=namespace, now=self._clock(), owner=workload)
            await create_with_status(self._kube, pod)

    def _fresh_name(self, workload: Manifest, base: str, taken: set[str]) -> str:
        if workload.get("kind") == "StatefulSet":
            ordinal = 0
            while f"{base}-{ordinal}" in taken:
                ordinal += 1
            return f"{base}-{ordinal}"
        key = owner_key(workload)
        index = self._next_index.get(key, 0)
        while f"{base}-{index}" in taken:
            index += 1
        self._next_index[key] = index + 1
        return f"{base}-{index}"

    async def _reconcile_daemonset(self, daemonset: Manifest, pods: list[Manifest]) -> None:
        template = (daemonset.get("spec") or {}).get("template") or {}
        namespace = (daemonset.get("metadata") or {}).get("namespace", "default")
        by_node = {(p.get("spec") or {}).get("nodeName"): p for p in pods}
        taken: set[str] | None = None  # pod names of the namespace, read when a pod is first needed
        pod_total = 0
        for node in self._snapshot("Node"):
            node_name = node["metadata"]["name"]
            if node_name in by_node or (node.get("metadata") or {}).get("deletionTimestamp"):
                continue
            if not self._daemon_fits(template, node):
                continue
            if taken is None:
                every_pod = self._snapshot("Pod")
                pod_total = len(every_pod)
                taken = {p["metadata"]["name"] for p in every_pod
                         if (p.get("metadata") or {}).get("namespace", "default") == namespace}
            if pod_total >= MAX_TOTAL_PODS:
                owner = daemonset["metadata"]["name"]
                raise ScenarioError(f"objects: DaemonSet {namespace}/{owner}: its pods would take the cluster past "
                                    f"{MAX_TOTAL_PODS:,} pods, the most a scenario may hold")
            pod_total += 1
            name = _free_name(f"{daemonset['metadata']['name']}-{node_name}", taken)
            taken.add(name)
            pod = pending_pod(template, name=name, namespace=namespace, now=self._clock(), owner=daemonset)
            pod["spec"]["nodeName"] = node_name
            pod["status"] = running_status(self._clock())
            await create_with_status(self._kube, pod)

    async def _delete_pod(self, pod: Manifest) -> None:
        with contextlib.suppress(NotFoundError):
            await self._kube.delete(POD, pod["metadata"]["name"], pod["metadata"].get("namespace", "default"))


def running_status(now: datetime) -> dict[str, Any]:
    stamp = format_time(now)
    return {
        "phase": "Running",
        "startTime": stamp,
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp},
            {"type": "Ready", "status": "True", "lastTransitionTime": stamp},
        ],
    }


def _free_name(name: str, taken: set[str]) -> str:
    """``name``, or ``name-2``, ``name-3``... when a pod already has it (an unowned pod, or a snapshot's
    DaemonSet pod that moved or lost its owner): the real controller never collides, it uses generateName."""
    candidate, suffix = name, 1
    while candidate in taken:
        suffix += 1
        candidate = f"{name}-{suffix}"
    return candidate


def _pod_index(pod: Mapping[str, Any]) -> int:
    suffix = pod["metadata"]["name"].rpartition("-")[2]
    return int(suffix) if suffix.isdigit() else 0
