"""The live cluster cache: reflector events -> ``ClusterState``, plus change notifications.

``StateStore.upsert`` / ``StateStore.remove`` are the reflector callbacks. Our own
writes may be fed back at once (``write_through``) so a decision never misses a
NodeClaim it just created; a stale copy (lower resourceVersion than what is held,
or an object already seen deleted) is ignored, so watch events and write-through
can arrive in any order. Objects the engine cannot parse are logged and left out
(never a crash), and ``snapshot()`` gives decisions a private copy they may read
from a worker thread while the loop keeps feeding the live one.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconciler.kube.reflector import drop_managed_fields
from reconciler.model.meta import ManifestError, object_key
from reconciler.model.nodeclaim_lookup import nodeclaim_for_node
from reconciler.state.cluster import ClusterState

Manifest = dict[str, Any]
Listener = Callable[[str, Manifest, bool], None]  # (kind, manifest, deleted)
ObjectId = tuple[str, str]  # (kind, namespace/name)

log = logging.getLogger(__name__)
_TOMBSTONES = 4096
# Parsed first so pods are not re-parsed when their priority/runtime classes arrive later.
_FIRST_KINDS = ("PriorityClass", "RuntimeClass")


def _version(manifest: Mapping[str, Any]) -> int | None:
    raw = (manifest.get("metadata") or {}).get("resourceVersion")
    try:
        return int(str(raw))
    except (TypeError, ValueError):
        return None  # opaque versions: accept every write


@dataclass(slots=True)
class PodSchedulingTimes:
    """When the provisioner first saw a pending pod, first decided about it, first found it a home
    (Karpenter's ack, decision and scheduling-success times, which its pod metrics read)."""

    acked: datetime
    decided: datetime | None = None
    scheduled: datetime | None = None


class StateStore:
    def __init__(self) -> None:
        self.state = ClusterState()
        self.synced = False
        self.generation = 0  # bumps on every accepted change
        self.rejected: dict[ObjectId, str] = {}  # objects the engine could not parse, and why
        self._manifests: dict[ObjectId, Manifest] = {}
        self._tombstones: OrderedDict[ObjectId, int | None] = OrderedDict()
        self._listeners: list[Listener] = []
        self._nominated: dict[str, datetime] = {}
        self._marked: set[str] = set()
        self.pod_times: dict[str, PodSchedulingTimes] = {}  # pod key -> times (kept until the pod starts)

    # -- feeding -------------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def upsert(self, manifest: Manifest) -> None:
        object_id = (str(manifest.get("kind", "")), object_key(manifest))
        if self._is_stale(object_id, manifest):
            return
        try:
            self.state.upsert(manifest)
            self.rejected.pop(object_id, None)
        except (ManifestError, ValueError) as err:
            if self.rejected.get(object_id) != str(err):
                log.warning("ignoring object the engine cannot read: %s", err, extra={"object": object_id})
            self.rejected[object_id] = str(err)
            self.state.remove(manifest)
            self._manifests.pop(object_id, None)
            return
        self._tombstones.pop(object_id, None)
        self._manifests[object_id] = manifest
        self._changed(object_id[0], manifest, deleted=False)

    def remove(self, manifest: Manifest) -> None:
        object_id = (str(manifest.get("kind", "")), object_key(manifest))
        self.state.remove(manifest)
        self.rejected.pop(object_id, None)
        known = self._manifests.pop(object_id, None)
        self._tombstones[object_id] = _version(manifest)
        while len(self._tombstones) > _TOMBSTONES:
            self._tombstones.popitem(last=False)
        if known is not None:
            self._changed(object_id[0], manifest, deleted=True)

    def write_through(self, manifest: Manifest) -> None:
        """Feed back an object we just wrote (the API server's answer), ahead of its watch event; cached as the
        reflectors cache (without managedFields)."""
        self.upsert(drop_managed_fields(manifest))

    def _is_stale(self, object_id: ObjectId, manifest: Mapping[str, Any]) -> bool:
        incoming = _version(manifest)
        if incoming is None:
            return False
        if object_id in self._tombstones:
            deleted_at = self._tombstones[object_id]
            if deleted_at is not None and incoming <= deleted_at:
                return True
        held = self._manifests.get(object_id)
        held_version = _version(held) if held is not None else None
        return held_version is not None and incoming < held_version

    def _changed(self, kind: str, manifest: Manifest, *, deleted: bool) -> None:
        self.generation += 1
        for listener in list(self._listeners):
            try:
                listener(kind, manifest, deleted)
            except Exception:  # a listener bug must not stop the cache
                log.exception("state listener failed")

    # -- flags the engine's callers set ------------------------------------------------------

    def nominate(self, name: str, until: datetime) -> None:
        current = self._nominated.get(name)
        if current is None or until > current:
            self._nominated[name] = until
            self.state.nominate(name, until)

    def mark_for_deletion(self, names: Iterable[str]) -> None:
        names = set(names)
        self._marked |= names
        self.state.mark_for_deletion(*names)

    def unmark_for_deletion(self, names: Iterable[str]) -> None:
        names = set(names)
        self._marked -= names
        self.state.unmark_for_deletion(*names)

    def forget_expired_nominations(self, now: datetime) -> None:
        self._nominated = {name: until for name, until in self._nominated.items() if until > now}

    # -- reading -------------------------------------------------------------------------------

    def manifests(self, kind: str) -> list[Manifest]:
        return [m for (k, _), m in self._manifests.items() if k == kind]

    def get(self, kind: str, key: str) -> Manifest | None:
        return self._manifests.get((kind, key))

    def nodeclaims(self) -> list[Manifest]:
        return self.manifests("NodeClaim")

    def nodes(self) -> list[Manifest]:
        return self.manifests("Node")

    def node_for(self, nodeclaim: Mapping[str, Any]) -> Manifest | None:
        """The Node of a NodeClaim: by ``status.nodeName``, else by matching providerID."""
        status = nodeclaim.get("status") or {}
        if status.get("nodeName"):
            found = self.get("Node", str(status["nodeName"]))
            if found is not None:
                return found
        provider_id = status.get("providerID")
        if not provider_id:
            return None
        return next((n for n in self.nodes() if (n.get("spec") or {}).get("providerID") == provider_id), None)

    def nodeclaim_for_node(self, node: Mapping[str, Any]) -> Manifest | None:
        found: Manifest | None = nodeclaim_for_node(node, self.nodeclaims())
        return found

    def pods_on(self, node_name: str) -> list[Manifest]:
        return [p for p in self.manifests("Pod") if (p.get("spec") or {}).get("nodeName") == node_name]

    def snapshot(self) -> ClusterState:
        """A private ``ClusterState`` built from the held manifests, with the same flags."""
        state = ClusterState()
        ordered = sorted(self._manifests.items(), key=lambda item: item[0][0] not in _FIRST_KINDS)
        for _, manifest in ordered:
            try:
                state.upsert(manifest)
            except (ManifestError, ValueError):
                continue  # already reported when it arrived
        for name, until in self._nominated.items():
            state.nominate(name, until)
        if self._marked:
            state.mark_for_deletion(*self._marked)
        return state
