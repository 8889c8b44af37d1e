"""Simulated workload controllers: Deployments, ReplicaSets, StatefulSets, Jobs and DaemonSets make pods.

Pods carry real ownerReferences, and a pod belongs to the workload its controller reference names: a
Deployment runs its pods through ReplicaSets (``<deployment>-<template hash>``, labelled and selected by
``pod-template-hash``, owned by the Deployment), so the eviction API counts a budget's expected pods from
the Deployment's scale as Kubernetes does. A snapshot's workloads and pods are adopted as they are: a
Deployment that already has ReplicaSets keeps their scales until its spec changes in the simulation; then
the ReplicaSet whose template is the Deployment's (ignoring ``pod-template-hash``) takes every replica, or a
new one does, and the others are scaled to 0. A pod whose controller is not stored (a dump without its
ReplicaSets) is nobody's here: evicted, it comes back pending under its name (``SimulatedCluster``).

Pod names are readable and deterministic: ``<workload>-<n>`` with ``n`` counting up per workload (a
Deployment's pods after the Deployment; StatefulSets use their ordinal). Scaling down removes pending
pods first, then the highest-numbered ones, as a ReplicaSet prefers unscheduled pods. A changed pod
template replaces every pod at once (no rolling update): a Deployment's new ReplicaSet takes every replica
at once; a StatefulSet's, Job's or bare ReplicaSet's pods made by the simulator carry the template's hash
and are replaced when it changes. A Job makes ``parallelism`` pods until it is complete, failed or
suspended. DaemonSet pods are created for every node they tolerate and select. Deleting a workload deletes
its pods (and a Deployment's ReplicaSets), as the garbage collector does.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import uuid
from collections.abc import Callable, Collection, Container, Mapping
from datetime import datetime
from typing import Any

from reconciler.kube.api import (
    KINDS_BY_NAME,
    POD,
    REPLICASET,
    ForbiddenError,
    Kind,
    KubeAPI,
    Manifest,
    NotFoundError,
    WatchEvent,
    kind_of,
)
from reconciler.kube.memory import MemoryKube
from reconciler.model.meta import format_time
from reconciler.sim.scenario import MAX_TOTAL_PODS, ScenarioError

# The hash of the pod template a StatefulSet's, Job's or bare ReplicaSet's pod was made from (by the simulator).
TEMPLATE_HASH_ANNOTATION = "sim.adze.dev/template-hash"
TEMPLATE_HASH_LABEL = "pod-template-hash"  # what a Deployment's ReplicaSet and its pods are labelled with
# The order workloads are reconciled in (DaemonSets last: they follow the nodes).
REPLICATED_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "Job")
WORKLOAD_KINDS = (*REPLICATED_KINDS, "DaemonSet")
_API_VERSIONS = {"Job": "batch/v1"}


def owner_key(manifest: Mapping[str, Any]) -> str:
    metadata = manifest.get("metadata") or {}
    return f"{manifest.get('kind')}/{metadata.get('namespace', 'default')}/{metadata.get('name')}"


def controller_reference(manifest: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for owner in (manifest.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(owner, Mapping) and owner.get("controller"):
            return owner
    return None


def pod_owner(pod: Mapping[str, Any]) -> str | None:
    """``Kind/namespace/name`` of the workload a pod's controller reference names (None: no workload kind)."""
    owner = controller_reference(pod)
    if owner is None or owner.get("kind") not in WORKLOAD_KINDS:
        return None
    return f"{owner.get('kind')}/{(pod.get('metadata') or {}).get('namespace', 'default')}/{owner.get('name')}"


def deployment_of(replicaset: Mapping[str, Any]) -> str | None:
    """``Deployment/namespace/name`` of the Deployment controlling a ReplicaSet, if any."""
    owner = controller_reference(replicaset)
    if owner is None or owner.get("kind") != "Deployment":
        return None
    return f"Deployment/{(replicaset.get('metadata') or {}).get('namespace', 'default')}/{owner.get('name')}"


def template_hash(template: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(template, sort_keys=True, default=str).encode()).hexdigest()[:10]


def without_hash_label(template: Mapping[str, Any]) -> dict[str, Any]:
    """A ReplicaSet's pod template as its Deployment's would read (``pod-template-hash`` removed)."""
    metadata = dict(template.get("metadata") or {})
    labels = {k: v for k, v in (metadata.get("labels") or {}).items() if k != TEMPLATE_HASH_LABEL}
    if labels:
        metadata["labels"] = labels
    else:
        metadata.pop("labels", None)
    return {**template, "metadata": metadata}


def replicas_of(workload: Mapping[str, Any]) -> int:
    """How many pods a workload wants now (a Job: its parallelism until complete, failed or suspended)."""
    spec = workload.get("spec") or {}
    if workload.get("kind") != "Job":
        replicas = spec.get("replicas")
        return int(replicas) if replicas is not None else 1
    conditions = (workload.get("status") or {}).get("conditions") or []
    finished = any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions)
    if finished or spec.get("suspend"):
        return 0
    wanted = int(spec["parallelism"]) if spec.get("parallelism") is not None else 1
    if spec.get("completions") is not None:
        left = int(spec["completions"]) - int((workload.get("status") or {}).get("succeeded") or 0)
        wanted = min(wanted, max(0, left))
    return wanted


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
        metadata["ownerReferences"] = [owner_reference(owner)]
        if deployment_of(owner) is None and owner.get("kind") != "DaemonSet":
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


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    """The controller reference an object of ``owner`` carries (Kubernetes' NewControllerRef)."""
    metadata = owner.get("metadata") or {}
    kind = str(owner.get("kind"))
    return {
        "apiVersion": owner.get("apiVersion") or _API_VERSIONS.get(kind, "apps/v1"),
        "kind": kind,
        "name": metadata["name"],
        "uid": metadata.get("uid") or f"uid-{owner_key(owner)}",
        "controller": True,
        "blockOwnerDeletion": True,
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
        self._known: set[str] = set()  # workloads seen by the last reconcile (deleted since: garbage collected)
        self._acted_on: dict[str, str] = {}  # Deployment -> the spec its ReplicaSets were last scaled for
        self._changes: _Changes | None = _Changes() if isinstance(kube, MemoryKube) else None
        if self._changes is not None:
            kube.subscribe(self._changes.observe, copy=False)  # type: ignore[attr-defined]

    def controls(self, pod: Mapping[str, Any]) -> bool:
        """Whether a workload the simulation stores owns the pod (its controller then recreates it)."""
        key = pod_owner(pod)
        if key is None:
            return False
        kind, namespace, name = key.split("/", 2)
        if isinstance(self._kube, MemoryKube):
            return self._kube.has(KINDS_BY_NAME[kind], name, namespace)
        return any(owner_key(w) == key for w in self._snapshot(kind))

    async def reconcile(self) -> None:
        live = {owner_key(w): w for kind in WORKLOAD_KINDS for w in self._snapshot(kind)}
        changes = self._changes
        if changes is None or not changes.indexed:
            pods_by_owner = self._pods_by_owner()
            await self._collect_garbage(live, lambda key: pods_by_owner.get(key, []))
            await self._reconcile_all(live)
            if changes is not None:
                changes.index(self._snapshot("Pod"), self._snapshot("Node"))
            return
        await self._collect_garbage(live, changes.pods_of)
        owners, nodes, daemonsets = changes.take()
        deployments = {key for key in owners if key.startswith("Deployment/")}
        deployments.update(
            parent for key in owners if key.startswith("ReplicaSet/") and key in live
            and (parent := deployment_of(live[key])) in live
        )
        for workload in self._snapshot("Deployment"):
            if owner_key(workload) in deployments:
                await self._reconcile_deployment(workload, changes.pods_of, changes.template_hashes)
        for kind in REPLICATED_KINDS[1:]:
            for workload in self._snapshot(kind):
                key = owner_key(workload)
                if key in owners and deployment_of(workload) not in live:
                    await self._reconcile_replicas(workload, changes.pods_of(key), hashes=changes.template_hashes(key))
        changed_nodes: list[Manifest] | None = None
        for daemonset in self._snapshot("DaemonSet"):
            key = owner_key(daemonset)
            if key in daemonsets:
                await self._reconcile_daemonset(daemonset, changes.daemon_nodes(key), self._snapshot("Node"))
            elif nodes:
                if changed_nodes is None:
                    changed_nodes = changes.nodes_in_order(nodes)
                await self._reconcile_daemonset(daemonset, changes.daemon_nodes(key), changed_nodes)

    async def _reconcile_all(self, live: Mapping[str, Manifest]) -> None:
        pods_by_owner = self._pods_by_owner()

        def pods_of(key: str) -> list[Manifest]:
            return pods_by_owner.get(key, [])

        for workload in self._snapshot("Deployment"):
            await self._reconcile_deployment(workload, pods_of)
        for kind in REPLICATED_KINDS[1:]:
            for workload in self._snapshot(kind):
                if deployment_of(workload) not in live:
                    await self._reconcile_replicas(workload, pods_of(owner_key(workload)))
        for daemonset in self._snapshot("DaemonSet"):
            pods = pods_of(owner_key(daemonset))
            await self._reconcile_daemonset(daemonset, {(p.get("spec") or {}).get("nodeName") for p in pods},
                                            self._snapshot("Node"))

    def _pods_by_owner(self) -> dict[str, list[Manifest]]:
        pods_by_owner: dict[str, list[Manifest]] = {}
        for pod in self._snapshot("Pod"):
            key = pod_owner(pod)
            if key:
                pods_by_owner.setdefault(key, []).append(pod)
        return pods_by_owner

    async def _collect_garbage(self, live: Mapping[str, Manifest], pods_of: Callable[[str], list[Manifest]]) -> None:
        """What the garbage collector does for the workloads deleted since the last reconcile: their pods go, and
        a Deployment's ReplicaSets with theirs. (A pod whose controller was never stored is left alone.)"""
        gone = sorted(self._known - set(live))
        self._known = set(live)
        for key in gone:
            self._acted_on.pop(key, None)
            if key.startswith("Deployment/"):
                for replicaset in self._snapshot("ReplicaSet"):
                    if deployment_of(replicaset) == key:
                        self._known.discard(owner_key(replicaset))
                        await self._delete(replicaset)
                        for pod in pods_of(owner_key(replicaset)):
                            await self._delete(pod)
            for pod in pods_of(key):
                await self._delete(pod)

    async def _reconcile_deployment(self, deployment: Manifest, pods_of: Callable[[str], list[Manifest]],
                                    hashes_of: Callable[[str], Collection[str | None]] | None = None) -> None:
        """Scale the Deployment's ReplicaSets when its spec changed (or it has none yet), then their pods.
        ``hashes_of``: the template hashes among an owner's pods, where they are kept (see ``_reconcile_replicas``)."""
        key = owner_key(deployment)
        spec = deployment.get("spec") or {}
        template = spec.get("template") or {}
        wanted = json.dumps([template, replicas_of(deployment)], sort_keys=True, default=str)
        replicasets = [rs for rs in self._snapshot("ReplicaSet") if deployment_of(rs) == key]
        # A snapshot's Deployment is adopted with its ReplicaSets as they are (a rollout under way included);
        # the simulation changes their scales only once the Deployment's spec changes.
        first_seen, changed = key not in self._acted_on, self._acted_on.get(key) != wanted
        self._acted_on[key] = wanted
        if (first_seen and not replicasets) or (not first_seen and changed):
            replicasets = await self._scale_replicasets(deployment, replicasets, template)
        for replicaset in replicasets:
            owner = owner_key(replicaset)
            await self._reconcile_replicas(replicaset, pods_of(owner), counter=key, base=deployment["metadata"]["name"],
                                           hashes=hashes_of(owner) if hashes_of is not None else None)

    async def _scale_replicasets(self, deployment: Manifest, replicasets: list[Manifest],
                                 template: Mapping[str, Any]) -> list[Manifest]:
        """The ReplicaSet of the current template takes every replica (created when none has it), the others
        none; returns the Deployment's ReplicaSets, the current one last (its pods come after the others')."""
        desired = replicas_of(deployment)
        current = next((rs for rs in replicasets if _same_template(rs, template)), None)
        result = []
        for replicaset in replicasets:
            if replicaset is current:
                continue
            result.append(await self._scaled(replicaset, 0))
        if current is None:
            current = await self._new_replicaset(deployment, template, desired, replicasets)
        else:
            current = await self._scaled(current, desired)
        return [*result, current]

    async def _scaled(self, replicaset: Manifest, replicas: int) -> Manifest:
        if replicas_of(replicaset) == replicas:
            return replicaset
        metadata = replicaset["metadata"]
        return await self._kube.patch(kind_of(replicaset), metadata["name"], {"spec": {"replicas": replicas}},
                                      metadata.get("namespace"))

    async def _new_replicaset(self, deployment: Manifest, template: Mapping[str, Any], replicas: int,
                              existing: list[Manifest]) -> Manifest:
        metadata = deployment["metadata"]
        namespace = metadata.get("namespace", "default")
        digest = template_hash(template)
        # A ReplicaSet the Deployment does not own may already hold the name (a snapshot whose owner references
        # were edited): the real controller then counts a collision and hashes again; a suffix does the same here.
        taken = {rs["metadata"]["name"] for rs in existing} | await self._replicaset_names(namespace)
        name = _free_name(f"{metadata['name']}-{digest}", taken)
        labels = {**((template.get("metadata") or {}).get("labels") or {}), TEMPLATE_HASH_LABEL: digest}
        selector = dict((deployment.get("spec") or {}).get("selector") or {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), TEMPLATE_HASH_LABEL: digest}
        replicaset = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            # A uid of its own, not from the API server's seeded generator: the objects created after it keep theirs.
            "metadata": {"name": name, "namespace": namespace, "labels": labels,
                         "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"adze-sim/ReplicaSet/{namespace}/{name}")),
                         "ownerReferences": [owner_reference(deployment)]},
            "spec": {
                "replicas": replicas,
                "selector": selector,
                "template": {**template, "metadata": {**(template.get("metadata") or {}), "labels": labels}},
            },
        }
        if isinstance(self._kube, MemoryKube):
            # Stored with the uid given (a create would draw one from the API server's seeded generator, and every
            # object created after it would get another uid than before ReplicaSets were stored).
            self._kube.load([replicaset])
            created = self._kube.peek(kind_of(replicaset), name, namespace) or replicaset
        else:
            created = await self._kube.create(replicaset)
        self._known.add(owner_key(created))
        return created

    async def _replicaset_names(self, namespace: str) -> set[str]:
        stored, _ = await self._kube.list(REPLICASET, namespace)
        return {rs["metadata"]["name"] for rs in stored}

    async def _reconcile_replicas(self, workload: Manifest, pods: list[Manifest], *, counter: str | None = None,
                                  base: str | None = None, hashes: Collection[str | None] | None = None) -> None:
        """Pods of a ReplicaSet, StatefulSet or Job to its replicas (``counter``, ``base``: how new pods are
        numbered and named, a Deployment's ReplicaSets sharing their Deployment's). ``hashes``: the template hashes
        the pods carry (None: none), when kept by the caller: if none is stale the per-pod walk is skipped."""
        template = (workload.get("spec") or {}).get("template") or {}
        desired = replicas_of(workload)
        current_hash = template_hash(template)
        number = counter or owner_key(workload)
        if number not in self._next_index:  # adopted pods (a snapshot's) keep their numbers: new ones come after
            self._next_index[number] = 1 + max((_pod_index(p) for p in pods), default=-1)
        if hashes is not None and all(made_from is None or made_from == current_hash for made_from in hashes):
            keep = pods  # nothing made from an older template (a Deployment's pods carry no hash at all)
        else:
            keep = []
            for pod in pods:
                made_from = _made_from(pod)
                if made_from is not None and made_from != current_hash:
                    await self._delete(pod)
                else:
                    keep.append(pod)
        if len(keep) > desired:
            # Unscheduled pods go first, then the newest (highest-numbered) ones.
            keep.sort(key=lambda p: (bool((p.get("spec") or {}).get("nodeName")), -_pod_index(p)))
            for pod in keep[: len(keep) - desired]:
                await self._delete(pod)
            return
        if len(keep) == desired:
            return
        namespace = (workload.get("metadata") or {}).get("namespace", "default")
        # The names new pods may not take: a StatefulSet's ordinals are its pods'; any other workload's next
        # number skips every stored pod's name (``_fresh_name``), and in the simulator's store that already
        # covers the kept pods (they are stored, in the namespace): naming the 1,000 of them was O(pods).
        taken = set() if workload.get("kind") != "StatefulSet" and isinstance(self._kube, MemoryKube) \
            else {p["metadata"]["name"] for p in keep}
        for _ in range(desired - len(keep)):
            name = self._fresh_name(workload, base or workload["metadata"]["name"], taken, counter)
            taken.add(name)
            pod = pending_pod(template, name=name, namespace=namespace, now=self._clock(), owner=workload)
            try:
                await create_with_status(self._kube, pod)
            except ForbiddenError:
                return  # its namespace is being deleted: the controller's creates are refused until it is gone

    def _fresh_name(self, workload: Manifest, base: str, taken: set[str], counter: str | None) -> str:
        """``<base>-<n>``: the StatefulSet's lowest free ordinal, else the workload's next number that no pod of
        the namespace has (a snapshot's pods may hold such names; the real controllers use generateName)."""
        if workload.get("kind") == "StatefulSet":
            ordinal = 0
            while f"{base}-{ordinal}" in taken:
                ordinal += 1
            return f"{base}-{ordinal}"
        key = counter or owner_key(workload)
        namespace = (workload.get("metadata") or {}).get("namespace", "default")
        index = self._next_index.get(key, 0)
        while f"{base}-{index}" in taken or self._pod_exists(f"{base}-{index}", namespace):
            index += 1
        self._next_index[key] = index + 1
        return f"{base}-{index}"

    def _pod_exists(self, name: str, namespace: str) -> bool:
        if isinstance(self._kube, MemoryKube):
            return self._kube.has(POD, name, namespace)
        return any(p["metadata"]["name"] == name and p["metadata"].get("namespace", "default") == namespace
                   for p in self._snapshot("Pod"))

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
            try:
                await create_with_status(self._kube, pod)
            except ForbiddenError:
                return  # its namespace is being deleted

    def _pod_names(self, namespace: str) -> tuple[set[str] | _StoredPodNames, int]:
        """The namespace's pod names (``in`` and ``add``) and the cluster's pod count; the simulator's store
        answers both without copying every pod (one DaemonSet pod per new node would otherwise cost O(pods))."""
        if isinstance(self._kube, MemoryKube):
            return _StoredPodNames(self._kube, namespace), self._kube.count(POD)
        every_pod = self._snapshot("Pod")
        names = {p["metadata"]["name"] for p in every_pod
                 if (p.get("metadata") or {}).get("namespace", "default") == namespace}
        return names, len(every_pod)

    async def _delete(self, obj: Manifest) -> None:
        metadata = obj["metadata"]
        with contextlib.suppress(NotFoundError):
            await self._kube.delete(kind_of(obj), metadata["name"], metadata.get("namespace", "default"))



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


def _same_template(replicaset: Mapping[str, Any], template: Mapping[str, Any]) -> bool:
    """Kubernetes' EqualIgnoreHash: the ReplicaSet runs the Deployment's template."""
    def normal(found: Mapping[str, Any]) -> dict[str, Any]:
        stripped = without_hash_label(found)
        return {k: v for k, v in stripped.items() if not (k == "metadata" and not v)}

    return normal((replicaset.get("spec") or {}).get("template") or {}) == normal(template)


def _pod_index(pod: Mapping[str, Any] | str) -> int:
    name = pod if isinstance(pod, str) else pod["metadata"]["name"]
    suffix = name.rpartition("-")[2]
    return int(suffix) if suffix.isdigit() else 0


class _Changes:
    """The simulator's pods by owner (in the store's order) and what changed since the last reconcile."""

    def __init__(self) -> None:
        self.indexed = False
        self._pods: dict[str, dict[str, Manifest]] = {}  # owner -> pod key -> pod
        self._owner_of: dict[str, str] = {}  # pod key -> owner
        # owner -> template hash (None: none) -> how many of its pods carry it; lets a reconcile skip the walk
        self._hashes: dict[str, dict[str | None, int]] = {}
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
        self._hashes.clear()
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

    def template_hashes(self, owner: str) -> Collection[str | None]:
        """The template hashes the owner's pods carry (None for a pod without one), each at least once."""
        return self._hashes.get(owner, {}).keys()

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
        owner = pod_owner(pod)
        if not owner:
            return
        key = self._key(pod)
        self._pods.setdefault(owner, {})[key] = pod
        self._owner_of[key] = owner
        made_from = _made_from(pod)
        counts = self._hashes.setdefault(owner, {})
        counts[made_from] = counts.get(made_from, 0) + 1
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
        made_from, counts = _made_from(previous), self._hashes[owner]
        counts[made_from] -= 1
        if not counts[made_from]:
            del counts[made_from]
            if not counts:
                del self._hashes[owner]
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


_NOT_A_HASH = "\0not a template hash"  # what an annotation value that is no string counts as: stale, as it is


def _made_from(pod: Manifest) -> str | None:
    """The template hash the simulation stamped on the pod (None when it carries none)."""
    made_from = ((pod.get("metadata") or {}).get("annotations") or {}).get(TEMPLATE_HASH_ANNOTATION)
    return made_from if made_from is None or isinstance(made_from, str) else _NOT_A_HASH
