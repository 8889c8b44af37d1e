"""The Kubernetes port: what the reconciler needs from an API server.

Objects cross this boundary as plain JSON-like dicts, exactly as the API server
returns them (``kubectl get -o json``), so the live client, the in-memory
cluster and scenario files all speak the same shape.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Manifest = dict[str, Any]
WatchEventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]


@dataclass(slots=True, frozen=True)
class Kind:
    """An API resource: ``Kind("v1", "Pod")``, ``Kind("karpenter.sh/v1", "NodeClaim")``."""

    api_version: str
    kind: str
    namespaced: bool = True

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]


POD = Kind("v1", "Pod")
NODE = Kind("v1", "Node", namespaced=False)
EVENT = Kind("v1", "Event")
PV = Kind("v1", "PersistentVolume", namespaced=False)
PVC = Kind("v1", "PersistentVolumeClaim")
NAMESPACE = Kind("v1", "Namespace", namespaced=False)
DEPLOYMENT = Kind("apps/v1", "Deployment")
REPLICASET = Kind("apps/v1", "ReplicaSet")
STATEFULSET = Kind("apps/v1", "StatefulSet")
DAEMONSET = Kind("apps/v1", "DaemonSet")
JOB = Kind("batch/v1", "Job")
PDB = Kind("policy/v1", "PodDisruptionBudget")
STORAGECLASS = Kind("storage.k8s.io/v1", "StorageClass", namespaced=False)
CSINODE = Kind("storage.k8s.io/v1", "CSINode", namespaced=False)
VOLUMEATTACHMENT = Kind("storage.k8s.io/v1", "VolumeAttachment", namespaced=False)
PRIORITYCLASS = Kind("scheduling.k8s.io/v1", "PriorityClass", namespaced=False)
RUNTIMECLASS = Kind("node.k8s.io/v1", "RuntimeClass", namespaced=False)
LEASE = Kind("coordination.k8s.io/v1", "Lease")
NODEPOOL = Kind("karpenter.sh/v1", "NodePool", namespaced=False)
NODECLAIM = Kind("karpenter.sh/v1", "NodeClaim", namespaced=False)
EC2NODECLASS = Kind("karpenter.k8s.aws/v1", "EC2NodeClass", namespaced=False)
NODEOVERLAY = Kind("karpenter.sh/v1alpha1", "NodeOverlay", namespaced=False)

KNOWN_KINDS: dict[tuple[str, str], Kind] = {
    (k.api_version, k.kind): k
    for k in (
        POD, NODE, EVENT, PV, PVC, NAMESPACE, DEPLOYMENT, REPLICASET, STATEFULSET, DAEMONSET, JOB, PDB,
        STORAGECLASS, CSINODE, VOLUMEATTACHMENT, PRIORITYCLASS, RUNTIMECLASS, LEASE, NODEPOOL, NODECLAIM,
        EC2NODECLASS, NODEOVERLAY,
    )
}


KINDS_BY_NAME: dict[str, Kind] = {kind.kind: kind for kind in KNOWN_KINDS.values()}


def kind_of(manifest: Mapping[str, Any]) -> Kind:
    """The ``Kind`` of a manifest; unknown kinds are assumed namespaced when they carry a namespace."""
    key = (str(manifest.get("apiVersion", "")), str(manifest.get("kind", "")))
    known = KNOWN_KINDS.get(key)
    if known:
        return known
    return Kind(key[0], key[1], namespaced=bool((manifest.get("metadata") or {}).get("namespace")))


@dataclass(slots=True, frozen=True)
class WatchEvent:
    type: WatchEventType
    object: Manifest


class ApiError(Exception):
    """An API server error with its HTTP status and reason (``NotFound``, ``Conflict``...)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class NotFoundError(ApiError):
    def __init__(self, message: str) -> None:
        super().__init__(404, "NotFound", message)


class ConflictError(ApiError):
    """409: stale resourceVersion on update, or the object already exists on create."""

    def __init__(self, message: str, reason: str = "Conflict") -> None:
        super().__init__(409, reason, message)


class TooManyRequestsError(ApiError):
    """429: e.g. an eviction refused because a PodDisruptionBudget allows no disruption."""

    def __init__(self, message: str) -> None:
        super().__init__(429, "TooManyRequests", message)


class ForbiddenError(ApiError):
    """403: e.g. new content in a namespace that is being deleted (the NamespaceLifecycle admission plugin)."""

    def __init__(self, message: str) -> None:
        super().__init__(403, "Forbidden", message)


class GoneError(ApiError):
    """410: a watch's resourceVersion is too old; re-list."""

    def __init__(self, message: str) -> None:
        super().__init__(410, "Expired", message)


class KubeAPI(Protocol):
    async def get(self, kind: Kind, name: str, namespace: str | None = None) -> Manifest: ...

    async def list(
        self,
        kind: Kind,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[Manifest], str]:
        """Objects and the list's resourceVersion (the point to watch from)."""
        ...

    def watch(
        self,
        kind: Kind,
        resource_version: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Changes after ``resource_version``; raises ``GoneError`` when it is too old."""
        ...

    async def create(self, manifest: Manifest) -> Manifest: ...

    async def replace(self, manifest: Manifest, *, subresource: str | None = None) -> Manifest:
        """Update with optimistic concurrency on ``metadata.resourceVersion`` (409 when stale)."""
        ...

    async def patch(
        self, kind: Kind, name: str, patch: Mapping[str, Any], namespace: str | None = None,
        subresource: str | None = None,
    ) -> Manifest:
        """JSON merge patch (RFC 7386); ``subresource="status"`` patches status."""
        ...

    async def delete(
        self,
        kind: Kind,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> None:
        """Request deletion: objects with finalizers get a deletionTimestamp and stay until released.

        ``uid`` is a precondition: a same-named object created since is left alone (409).
        ``grace_period_seconds`` (DeleteOptions.gracePeriodSeconds, pods): how long a running pod
        gets to shut down before it is removed; 0 removes it at once, a shorter value than a
        pending one shortens it, ``None`` leaves it to the pod's terminationGracePeriodSeconds.
        """
        ...

    async def evict(self, name: str, namespace: str) -> None:
        """The Eviction subresource: ``TooManyRequestsError`` when a PDB forbids it."""
        ...
