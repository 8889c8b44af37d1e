"""Cluster snapshots: the objects the engine reads, stripped of everything else, as a scenario document.

A snapshot keeps Pods, Nodes, Karpenter objects, PDBs (with the status their controller observed), the
workload controllers (Deployments, ReplicaSets, StatefulSets, Jobs, ReplicationControllers and DaemonSets:
their scale, selector and pod template), storage objects, priority and runtime classes, CSINodes and
Namespaces. It never keeps Secrets or ConfigMaps, container env values, commands or arguments,
managedFields or ``last-applied-configuration`` annotations (pod templates are reduced as pods are).

The workload controllers are what lets a budget count its expected pods as the disruption controller
does (a Deployment's scale, through the ReplicaSet its pods name), and they recreate the pods the plan
evicts; the simulator adopts the snapshot's pods through their ownerReferences rather than making new
ones. A pod whose controller the snapshot lacks comes back pending under its name when evicted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from reconciler.kube.api import (
    CSINODE,
    DAEMONSET,
    DEPLOYMENT,
    EC2NODECLASS,
    JOB,
    NAMESPACE,
    NODE,
    NODECLAIM,
    NODEOVERLAY,
    NODEPOOL,
    PDB,
    POD,
    PRIORITYCLASS,
    PV,
    PVC,
    REPLICASET,
    RUNTIMECLASS,
    STATEFULSET,
    STORAGECLASS,
    Kind,
    KubeAPI,
    Manifest,
)
from reconciler.model import labels as wk
from reconciler.model.meta import format_time
from reconciler.sim.scenario import Scenario

REPLICATIONCONTROLLER = Kind("v1", "ReplicationController")

# What a snapshot reads, in the order it is written (cluster-scoped configuration first).
SNAPSHOT_KINDS: tuple[Kind, ...] = (
    NAMESPACE,
    PRIORITYCLASS,
    RUNTIMECLASS,
    STORAGECLASS,
    EC2NODECLASS,
    NODEOVERLAY,
    NODEPOOL,
    NODECLAIM,
    NODE,
    CSINODE,
    PV,
    PVC,
    PDB,
    DAEMONSET,
    DEPLOYMENT,
    REPLICASET,
    STATEFULSET,
    JOB,
    REPLICATIONCONTROLLER,
    POD,
)
KEPT_KINDS = frozenset(kind.kind for kind in SNAPSHOT_KINDS)
# Workload controllers: kept with their scale, selector and pod template (reduced as a pod's is).
WORKLOAD_KINDS = frozenset({"Deployment", "ReplicaSet", "StatefulSet", "Job", "ReplicationController", "DaemonSet"})
_WORKLOAD_SPEC_FIELDS = ("replicas", "selector", "parallelism", "completions", "suspend", "serviceName")
_JOB_STATUS_FIELDS = ("conditions", "succeeded", "active", "failed")

_DROPPED_METADATA = ("managedFields", "resourceVersion", "generation", "selfLink")
_DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)
# The simulator's own bookkeeping (a snapshot of a simulated cluster): owners are re-derived on load.
_SIMULATOR_ANNOTATION_PREFIX = "sim.adze.dev/"
_CONTAINER_FIELDS = ("name", "image", "resources", "ports", "restartPolicy")
_POD_SPEC_FIELDS = (
    "nodeName",
    "nodeSelector",
    "affinity",
    "tolerations",
    "topologySpreadConstraints",
    "priorityClassName",
    "priority",
    "preemptionPolicy",
    "runtimeClassName",
    "overhead",
    "schedulerName",
    "schedulingGates",
    "resourceClaims",
    "resources",
    "hostNetwork",
    "terminationGracePeriodSeconds",
    "restartPolicy",
    "os",
)
_POD_STATUS_FIELDS = ("phase", "conditions", "startTime", "nominatedNodeName")
_CONDITION_FIELDS = ("type", "status", "reason", "message", "lastTransitionTime")
# Volume sources whose definition matters to scheduling; others keep only their type.
_VOLUME_SOURCES_KEPT = ("persistentVolumeClaim", "ephemeral")


def sanitize_objects(objects: Iterable[Mapping[str, Any]]) -> tuple[list[Manifest], dict[str, int]]:
    """Keep and strip what a snapshot may hold; returns (objects, count of dropped objects per kind).

    Terminal pods (Succeeded/Failed) are dropped: they use no capacity. The result shares values with
    ``objects`` (no copies: a 1,000-node dump is millions of values), which the caller hands over.
    """
    kept: list[Manifest] = []
    dropped: dict[str, int] = {}
    for manifest in objects:
        kind = str(manifest.get("kind") or "")
        phase = (manifest.get("status") or {}).get("phase")
        if kind not in KEPT_KINDS or (kind == "Pod" and phase in ("Succeeded", "Failed")):
            dropped[kind] = dropped.get(kind, 0) + 1
            continue
        kept.append(_sanitize(manifest))
    for deployment in _without_replicasets(kept):
        kept.remove(deployment)
        dropped["Deployment"] = dropped.get("Deployment", 0) + 1
    order = {kind.kind: index for index, kind in enumerate(SNAPSHOT_KINDS)}
    kept.sort(key=lambda m: (order[m["kind"]], m["metadata"].get("namespace", ""), m["metadata"]["name"]))
    return kept, dict(sorted(dropped.items()))


def _without_replicasets(objects: list[Manifest]) -> list[Manifest]:
    """Deployments none of whose ReplicaSets the dump holds (``kubectl get deploy,pods``): the simulated
    controller would make a ReplicaSet and a second set of pods for them. Left out, their pods are nobody's
    (back under their names when evicted) and budgets over them use their observed status."""
    owners = set()
    for manifest in objects:
        if manifest["kind"] == "ReplicaSet":
            for ref in manifest["metadata"].get("ownerReferences") or []:
                if ref.get("kind") == "Deployment" and ref.get("controller"):
                    owners.add((manifest["metadata"].get("namespace", "default"), ref.get("name")))
    return [m for m in objects if m["kind"] == "Deployment"
            and (m["metadata"].get("namespace", "default"), m["metadata"]["name"]) not in owners]


def _sanitize(manifest: Mapping[str, Any]) -> Manifest:
    kind = str(manifest["kind"])
    result: Manifest = {
        "apiVersion": manifest.get("apiVersion"),
        "kind": kind,
        "metadata": _metadata(manifest.get("metadata") or {}, keep_finalizers=kind != "Pod"),
    }
    if kind == "Pod":
        result["spec"] = pod_spec(manifest.get("spec") or {})
        status = manifest.get("status") or {}
        result["status"] = {
            k: _conditions(v) if k == "conditions" else v
            for k, v in status.items()
            if k in _POD_STATUS_FIELDS
        }
        return result
    if kind in WORKLOAD_KINDS:
        spec = manifest.get("spec") or {}
        template = spec.get("template") or {}
        result["spec"] = {k: v for k, v in spec.items() if k in _WORKLOAD_SPEC_FIELDS}
        result["spec"]["template"] = {
            "metadata": _metadata(template.get("metadata") or {}, keep_finalizers=False),
            "spec": pod_spec(template.get("spec") or {}),
        }
        if kind == "Job":  # whether it is done, and how many pods it still runs
            status = manifest.get("status") or {}
            result["status"] = {k: _conditions(v) if k == "conditions" else v
                                for k, v in status.items() if k in _JOB_STATUS_FIELDS}
        return result
    if kind == "Node":
        result["spec"] = {
            k: v
            for k, v in (manifest.get("spec") or {}).items()
            if k in ("providerID", "taints", "unschedulable")
        }
        status = manifest.get("status") or {}
        node_info = status.get("nodeInfo") or {}
        result["status"] = {
            "capacity": status.get("capacity") or {},
            "allocatable": status.get("allocatable") or {},
            "conditions": _conditions(status.get("conditions") or []),
            "nodeInfo": {
                k: v
                for k, v in node_info.items()
                if k in ("architecture", "operatingSystem", "kubeletVersion")
            },
        }
        return result
    for key, value in manifest.items():
        if key not in ("apiVersion", "kind", "metadata"):
            result[key] = value
    return result


def _metadata(metadata: Mapping[str, Any], *, keep_finalizers: bool) -> dict[str, Any]:
    result = {k: v for k, v in metadata.items() if k not in _DROPPED_METADATA}
    if not keep_finalizers:
        result.pop("finalizers", None)
    annotations = {
        k: v
        for k, v in (metadata.get("annotations") or {}).items()
        if k not in _DROPPED_ANNOTATIONS and not k.startswith(_SIMULATOR_ANNOTATION_PREFIX)
    }
    if annotations:
        result["annotations"] = annotations
    else:
        result.pop("annotations", None)
    return result


def pod_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A pod spec reduced to what scheduling and disruption read (no env, commands, probes, mounts)."""
    result = {k: v for k, v in spec.items() if k in _POD_SPEC_FIELDS}
    for field in ("initContainers", "containers"):
        if spec.get(field):
            result[field] = [
                {k: v for k, v in container.items() if k in _CONTAINER_FIELDS}
                for container in spec[field]
            ]
    if spec.get("volumes"):
        result["volumes"] = [_volume(volume) for volume in spec["volumes"]]
    return result


def _volume(volume: Mapping[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {"name": volume.get("name")}
    for key, value in volume.items():
        if key == "name":
            continue
        result[key] = value if key in _VOLUME_SOURCES_KEPT else {}
    return result


def _conditions(conditions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in c.items() if k in _CONDITION_FIELDS} for c in conditions if isinstance(c, Mapping)
    ]


def observed_zones(objects: Iterable[Mapping[str, Any]]) -> list[str]:
    """Zones the cluster uses: where its nodes run and where its EC2NodeClasses' subnets are (new capacity can
    go to those even when no node runs there yet)."""
    zones = set()
    for manifest in objects:
        if manifest.get("kind") == "Node":
            zone = ((manifest.get("metadata") or {}).get("labels") or {}).get(wk.ZONE)
            if zone:
                zones.add(str(zone))
        elif manifest.get("kind") == "EC2NodeClass":
            for subnet in (manifest.get("status") or {}).get("subnets") or []:
                if isinstance(subnet, Mapping) and subnet.get("zone"):
                    zones.add(str(subnet["zone"]))
    return sorted(zones)


def observed_region(objects: Iterable[Mapping[str, Any]]) -> str | None:
    for manifest in objects:
        if manifest.get("kind") == "Node":
            region = ((manifest.get("metadata") or {}).get("labels") or {}).get(wk.REGION)
            if region:
                return str(region)
    return None


def snapshot_document(
    objects: Sequence[Manifest], *, taken_at: datetime, name: str, catalog: Mapping[str, Any], source: str,
    feature_gates: Mapping[str, bool] | None = None,
) -> dict[str, Any]:
    """A scenario document (docs/scenario-format.md) holding the snapshot; no steps. ``feature_gates``: the gates
    the cluster runs with, when known (a simulated cluster's; a live snapshot cannot see them)."""
    settings: dict[str, Any] = {"clock": format_time(taken_at)}
    if feature_gates:
        settings["featureGates"] = dict(feature_gates)
    return {
        "name": name,
        "description": f"cluster snapshot of {source} taken {format_time(taken_at)}",
        "settings": settings,
        "catalog": dict(catalog),
        "objects": list(objects),
        "steps": [],
    }


async def simulated_snapshot(scenario: Scenario) -> dict[str, Any]:
    """Run a scenario in the simulator and snapshot the simulated cluster it leaves (demos, tests).

    The objects are read through the same ``KubeAPI`` calls as a live snapshot.
    """
    from reconciler.sim.runner import Simulation

    sim = Simulation(scenario)
    await sim.run()
    objects, _ = sanitize_objects(await collect_live(sim.kube))
    catalog = dict(scenario.catalog)
    left = getattr(sim.cloud, "reservation_left", None)
    if catalog.get("capacityReservations") and left:  # what is left in each reservation now
        catalog["capacityReservations"] = [
            {**entry, "availableInstanceCount": left.get(entry.get("id"), entry.get("availableInstanceCount"))}
            for entry in catalog["capacityReservations"]
        ]
    return snapshot_document(
        objects,
        taken_at=sim.now,
        name=scenario.name,
        catalog=catalog,
        source=f"scenario {scenario.name}",
        feature_gates=_changed_gates(scenario.settings.feature_gates, objects),
    )


def _changed_gates(gates: Mapping[str, bool], objects: Sequence[Manifest]) -> dict[str, bool]:
    """The gates set away from their defaults, and the NodeOverlay gate whenever NodeOverlays are there (a
    snapshot that does not say is planned with its overlays in use: ``Snapshot.overlay_gate``)."""
    from reconciler.settings import DEFAULT_FEATURE_GATES

    overlays = any(o.get("kind") == "NodeOverlay" for o in objects)
    return {name: value for name, value in sorted(gates.items())
            if DEFAULT_FEATURE_GATES.get(name) != value or (name == "NodeOverlay" and overlays)}


async def collect_live(kube: KubeAPI) -> list[Manifest]:
    """List every snapshot kind through the KubeAPI port (Karpenter kinds may be absent: skipped)."""
    from reconciler.kube.api import ApiError

    objects: list[Manifest] = []
    for kind in SNAPSHOT_KINDS:
        try:
            items, _ = await kube.list(kind)
        except ApiError as err:
            if err.status == 404 and kind.group in (wk.GROUP, wk.AWS_GROUP, "storage.k8s.io", "node.k8s.io"):
                continue  # CRDs not installed (or API group disabled): nothing of that kind exists
            if err.status in (403, 404) and kind is REPLICATIONCONTROLLER:
                continue  # the legacy kind not served or not allowed: budgets over such pods use their own status
            raise
        for item in items:
            item.setdefault("apiVersion", kind.api_version)
            item.setdefault("kind", kind.kind)
            objects.append(item)
    return objects


__all__ = [
    "KEPT_KINDS",
    "SNAPSHOT_KINDS",
    "collect_live",
    "observed_region",
    "observed_zones",
    "pod_spec",
    "sanitize_objects",
    "snapshot_document",
]
