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
from collections.abc import Callable, Collection, Container, Mapping
from datetime import datetime
from typing import Any

from reconciler.kube.api import POD, Kind, KubeAPI, Manifest, NotFoundError, WatchEvent, kind_of
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
    """Reconciles workload objects into pods, like kube-controller-manager would.

    Given a ``MemoryKube`` (the simulator's), the pods are kept indexed by owner from its writes and a reconcile
    visits only what changed since the last one: workloads whose object or pods changed, and for DaemonSets the
    nodes that changed or whose DaemonSet pod did. A reconcile leaves every workload it visits satisfied, so
    the rest would make no call; the calls made are the full reconcile's, in its order.
    """

    def __init__(self, kube: KubeAPI, snapshot: Callable[[str], list[Manifest]], clock: Callable[[], datetime],
                 daemon_fits: Callable[[Mapping[str, Any], Mapping[str, Any]], bool]) -> None:
        self._kube = kube
        self._snapshot = snapshot
        self._clock = clock
        self._daemon_fits = daemon_fits
        self._next_index: dict[str, int] = {}
        self._changes: _Changes | None = _Changes() if isinstance(kube, MemoryKube) else None
        if self._changes is not None:
            kube.subscribe(self._changes.observe, copy=False)  # type: ignore[attr-defined]

    async def reconcile(self) -> None:
        changes = self._changes
        if changes is None or not changes.indexed:
            await self._reconcile_all()
            if changes is not None:
                changes.index(self._snapshot("Pod"), self._snapshot("Node"))
            return
        owners, nodes, daemonsets = changes.take()
        for kind in ("Deployment", "ReplicaSet", "StatefulSet", "Job"):
            for workload in self._snapshot(kind):
                key = owner_key(workload)
                if key in owners:
                    await self._reconcile_replicas(workload, changes.pods_of(key))
        changed_nodes: list[Manifest] | None = None
        for daemonset in self._snapshot("DaemonSet"):
            key = owner_key(daemonset)
            if key in daemonsets:
                await self._reconcile_daemonset(daemonset, changes.daemon_nodes(key), self._snapshot("Node"))
            elif nodes:
                if changed_nodes is None:
                    changed_nodes = changes.nodes_in_order(nodes)
                await self._reconcile_daemonset(daemonset, changes.daemon_nodes(key), changed_nodes)
        live_owners = {owner_key(w) for kind in WORKLOAD_KINDS for w in self._snapshot(kind)}
        if changes.owners_beyond(live_owners):
            await self._delete_orphans(live_owners)

    async def _reconcile_all(self) -> None:
        pods_by_owner = self._pods_by_owner()
        for kind in ("Deployment", "ReplicaSet", "StatefulSet", "Job"):
            for workload in self._snapshot(kind):
                await self._reconcile_replicas(workload, pods_by_owner.get(owner_key(workload), []))
        for daemonset in self._snapshot("DaemonSet"):
            pods = pods_by_owner.get(owner_key(daemonset), [])
            await self._reconcile_daemonset(daemonset, {(p.get("spec") or {}).get("nodeName") for p in pods},
                                            self._snapshot("Node"))
        await self._delete_orphans({owner_key(w) for kind in WORKLOAD_KINDS for w in self._snapshot(kind)},
                                   pods_by_owner)

    def _pods_by_owner(self) -> dict[str, list[Manifest]]:
        pods_by_owner: dict[str, list[Manifest]] = {}
        for pod in self._snapshot("Pod"):
            key = ((pod.get("metadata") or {}).get("annotations") or {}).get(OWNER_ANNOTATION)
            if key:
                pods_by_owner.setdefault(key, []).append(pod)
        return pods_by_owner

    async def _delete_orphans(self, live_owners: set[str], pods_by_owner: dict[str, list[Manifest]] | None = None
                              ) -> None:
        for key, pods in (pods_by_owner if pods_by_owner is not None else self._pods_by_owner()).items():
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

    async def _reconcile_daemonset(self, daemonset: Manifest, occupied: Collection[str | None],
                                   nodes: list[Manifest]) -> None:
        """``occupied``: the nodes the DaemonSet's pods are bound to."""
        template = (daemonset.get("spec") or {}).get("template") or {}
        namespace = (daemonset.get("metadata") or {}).get("namespace", "default")
        taken: set[str] | _StoredPodNames | None = None  # the namespace's pod names, when a pod is first needed
        pod_total = 0
        for node in nodes:
            node_name = node["metadata"]["name"]
            if node_name in occupied or (node.get("metadata") or {}).get("deletionTimestamp"):
                continue
            if not self._daemon_fits(template, node):
                continue
            if taken is None:
                taken, pod_total = self._pod_names(namespace)
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

    def _pod_names(self, namespace: str) -> tuple[set[str] | _StoredPodNames, int]:
        """The namespace's pod names (``in`` and ``add``) and the cluster's pod count; the simulator's store
        answers both without copying every pod (one DaemonSet pod per new node would otherwise cost O(pods))."""
        if isinstance(self._kube, MemoryKube):
            return _StoredPodNames(self._kube, namespace), self._kube.count(POD)
        every_pod = self._snapshot("Pod")
        names = {p["metadata"]["name"] for p in every_pod
                 if (p.get("metadata") or {}).get("namespace", "default") == namespace}
        return names, len(every_pod)

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


class _StoredPodNames:
    """Pod names of one namespace in a ``MemoryKube``, plus those given out since (not yet created)."""

    def __init__(self, kube: MemoryKube, namespace: str) -> None:
        self._kube, self._namespace, self._given = kube, namespace, set[str]()

    def __contains__(self, name: object) -> bool:
        return name in self._given or (isinstance(name, str) and self._kube.has(POD, name, self._namespace))

    def add(self, name: str) -> None:
        self._given.add(name)


def _free_name(name: str, taken: Container[str]) -> str:
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


class _Changes:
    """The simulator's pods by owner (in the store's order) and what changed since the last reconcile."""

    def __init__(self) -> None:
        self.indexed = False
        self._pods: dict[str, dict[str, Manifest]] = {}  # owner -> pod key -> pod
        self._owner_of: dict[str, str] = {}  # pod key -> owner
        self._owners: set[str] = set()  # owners whose object or pods changed
        self._nodes: set[str] = set()  # nodes that changed, or whose DaemonSet pod did
        self._daemonsets: set[str] = set()  # DaemonSets whose object changed (every node to check)
        self._daemon_nodes: dict[str, dict[str, int]] = {}  # DaemonSet -> node -> its pods bound there
        # Nodes in the store's order (a number each, from their creation) and as last written.
        self._node_order: dict[str, int] = {}
        self._node_objects: dict[str, Manifest] = {}
        self._next = 0

    def index(self, pods: list[Manifest], nodes: list[Manifest]) -> None:
        self._pods.clear()
        self._owner_of.clear()
        self._daemon_nodes.clear()
        self._node_order.clear()
        self._node_objects.clear()
        for pod in pods:
            self._add(pod)
        for node in nodes:
            self._node_written(node)
        self._owners, self._nodes, self._daemonsets = set(), set(), set()
        self.indexed = True

    def take(self) -> tuple[set[str], set[str], set[str]]:
        """The owners, nodes and DaemonSets changed since the last ``take`` (and forgets them)."""
        found = (self._owners, self._nodes, self._daemonsets)
        self._owners, self._nodes, self._daemonsets = set(), set(), set()
        return found

    def pods_of(self, owner: str) -> list[Manifest]:
        return list(self._pods.get(owner, {}).values())

    def owners_beyond(self, live: set[str]) -> bool:
        return any(owner not in live for owner in self._pods)

    def daemon_nodes(self, owner: str) -> Collection[str]:
        return self._daemon_nodes.get(owner, {}).keys()

    def nodes_in_order(self, names: set[str]) -> list[Manifest]:
        """The named nodes that exist, in the store's order."""
        present = sorted((self._node_order[name], name) for name in names if name in self._node_order)
        return [self._node_objects[name] for _, name in present]

    def _node_written(self, node: Manifest) -> None:
        name = str(node["metadata"]["name"])
        if name not in self._node_order:
            self._node_order[name] = self._next
            self._next += 1
        self._node_objects[name] = node

    def observe(self, kind: Kind, event: WatchEvent) -> None:
        if not self.indexed:
            return
        manifest = event.object
        if kind == POD:
            self._remove(manifest)
            if event.type != "DELETED":
                self._add(manifest)
        elif kind.kind == "Node":
            name = str(manifest["metadata"]["name"])
            self._nodes.add(name)
            if event.type == "DELETED":
                self._node_order.pop(name, None)
                self._node_objects.pop(name, None)
            else:
                self._node_written(manifest)
        elif kind.kind == "DaemonSet":
            self._daemonsets.add(owner_key(manifest))
        elif kind.kind in WORKLOAD_KINDS:
            self._owners.add(owner_key(manifest))

    def _key(self, pod: Manifest) -> str:
        metadata = pod.get("metadata") or {}
        return f"{metadata.get('namespace', 'default')}/{metadata.get('name')}"

    def _add(self, pod: Manifest) -> None:
        owner = ((pod.get("metadata") or {}).get("annotations") or {}).get(OWNER_ANNOTATION)
        if not owner:
            return
        key = self._key(pod)
        self._pods.setdefault(owner, {})[key] = pod
        self._owner_of[key] = owner
        self._changed(owner, pod, 1)

    def _remove(self, pod: Manifest) -> None:
        key = self._key(pod)
        owner = self._owner_of.pop(key, None)
        if owner is None:
            return
        pods = self._pods[owner]
        previous = pods.pop(key)
        if not pods:
            del self._pods[owner]
        self._changed(owner, previous, -1)

    def _changed(self, owner: str, pod: Manifest, delta: int) -> None:
        if not owner.startswith("DaemonSet/"):
            self._owners.add(owner)
            return
        node = (pod.get("spec") or {}).get("nodeName")  # a DaemonSet pod matters to its node only
        if node:
            self._nodes.add(str(node))
            bound = self._daemon_nodes.setdefault(owner, {})
            bound[node] = bound.get(node, 0) + delta
            if not bound[node]:
                del bound[node]
