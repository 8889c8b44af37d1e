"""An in-process cluster implementing ``KubeAPI`` with the API server's semantics.

Used by the simulator (virtual time through the injectable clock, seeded names and
uids) and by tests. What it keeps from the real API server: one cluster-wide
monotonically increasing ``resourceVersion``; uid/creationTimestamp/generation
bookkeeping; 409 on stale updates and duplicate creates; JSON merge patch with
optional ``resourceVersion`` precondition; the status subresource (writes to the main
resource ignore ``status`` and vice versa); finalizers and ``deletionTimestamp``;
watches from a resourceVersion with a bounded history (``GoneError`` beyond it);
label and field selectors (pods indexed by ``spec.nodeName``, what the kubelet and the drain select
on); the Eviction subresource evaluating PodDisruptionBudgets;
graceful pod deletion when a DELETE names ``gracePeriodSeconds`` (``deletionTimestamp`` +
``deletionGracePeriodSeconds``; see ``memory_graceful``), with the kubelet's final removal
played when the clock reaches the deletionTimestamp (on the next call into the cluster).

Stored objects are never edited in place: every write stores a new top-level object with its own
metadata and shares the unchanged subtrees with the version before (structural sharing), so a write
costs what it changes, not the object's size. What leaves the store (reads, results, watch events
and listeners that ask for copies) is a deep copy, which the caller may change.

Not modelled (the kube-controller-manager's and kubelet's job, not the API server's):
owner-reference garbage collection, graceful termination of pods deleted or evicted
without a grace period (a pod without finalizers is then removed at once), namespace
existence and lifecycle, admission defaults.
"""

from __future__ import annotations

import contextlib
import random
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconciler.kube.api import (
    NAMESPACE,
    PDB,
    POD,
    ApiError,
    ConflictError,
    ForbiddenError,
    Kind,
    Manifest,
    NotFoundError,
    WatchEvent,
    WatchEventType,
    kind_of,
)
from reconciler.kube.memory_eviction import check_eviction
from reconciler.kube.memory_graceful import plan_pod_deletion
from reconciler.kube.memory_watch import Change, EventHistory
from reconciler.kube.semantics import (
    NON_SPEC_FIELDS,
    STATUS_DROPPED_ON_CREATE,
    BadRequestError,
    FieldMatcher,
    LabelMatcher,
    check_grace_period,
    clone,
    field_selector_matcher,
    format_time,
    has_status_subresource,
    label_selector_matcher,
    merge_patch,
    node_name_selected,
    parse_time,
    plural,
    qualified_resource,
)
from reconciler.model.pdb_status import BudgetStatus, budget_status

KindKey = tuple[str, str]
ObjectKey = tuple[str, str]  # (namespace or "", name)
Listener = Callable[[Kind, WatchEvent], None]
_NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the API server's generateName alphabet


@dataclass(slots=True)
class _Fault:
    verb: str
    kind_key: KindKey | None
    error: ApiError
    remaining: int


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _key_of(kind: Kind) -> KindKey:
    return (kind.api_version, kind.kind)


class MemoryKube:
    """``KubeAPI`` over dicts in memory. ``history`` bounds how many past events watches can replay."""

    def __init__(
        self,
        clock: Callable[[], datetime] | None = None,
        *,
        seed: int | None = None,
        history: int = 10_000,
    ) -> None:
        self._clock = clock or _utc_now
        self._random = random.Random(seed)
        self._objects: dict[KindKey, dict[ObjectKey, Manifest]] = {}
        self._kinds: dict[KindKey, Kind] = {}
        self._history = EventHistory(history)
        self._listeners: list[tuple[Listener, bool]] = []  # (listener, gets a copy)
        self._faults: list[_Fault] = []
        self._terminating_pods: dict[ObjectKey, datetime] = {}  # graceful deletions -> when the kubelet ends them
        self._pods_by_node: dict[str, dict[ObjectKey, Manifest]] = {}  # spec.nodeName -> its pods
        self._pod_order: dict[ObjectKey, int] = {}  # when each pod entered the store: lists keep store order
        self._pods_stored = 0

    # --- synchronous access for the simulator and tests ------------------------------------

    @property
    def resource_version(self) -> str:
        return str(self._history.revision)

    def objects(self, kind: Kind | None = None) -> list[Manifest]:
        """Deep copies of the stored objects (of one kind, or all), in creation order."""
        if kind is not None:
            return [clone(obj) for obj in self._objects.get(_key_of(kind), {}).values()]
        return [clone(obj) for store in self._objects.values() for obj in store.values()]

    def peek(self, kind: Kind, name: str, namespace: str | None = None) -> Manifest | None:
        """A deep copy of one object, or ``None``; no fault injection, no await."""
        found = self._objects.get(_key_of(kind), {}).get(self._object_key(kind, name, namespace))
        return clone(found) if found is not None else None

    def has(self, kind: Kind, name: str, namespace: str | None = None) -> bool:
        """Whether the object is stored (no copy)."""
        return self._object_key(kind, name, namespace) in self._objects.get(_key_of(kind), {})

    def count(self, kind: Kind) -> int:
        """How many objects of the kind are stored (no copy)."""
        return len(self._objects.get(_key_of(kind), {}))

    def load(self, manifests: Iterable[Manifest], *, share: bool = False) -> None:
        """Seed objects as a restored backup would: kept as given (status included), with
        uid/creationTimestamp/resourceVersion filled in when missing; emits ADDED events.

        ``share``: keep the manifests' nested values instead of deep copies (only the top level and
        ``metadata`` are copied): for a caller that never changes them afterwards, such as a parsed
        snapshot several simulations load."""
        for manifest in manifests:
            kind = self._remember(kind_of(manifest))
            obj = _shallow(manifest) if share else clone(manifest)
            metadata = self._prepare_metadata(kind, obj)
            store = self._objects.setdefault(_key_of(kind), {})
            key = (metadata.get("namespace", ""), metadata["name"])
            if key in store:
                raise ConflictError(self._already_exists(kind, metadata["name"]), reason="AlreadyExists")
            metadata.setdefault("generation", 1)
            self._write(kind, key, obj, "ADDED")
            if kind == POD and metadata.get("deletionTimestamp") and metadata.get("deletionGracePeriodSeconds"):
                self._terminating_pods[key] = parse_time(str(metadata["deletionTimestamp"]))

    def subscribe(self, listener: Listener, *, copy: bool = True) -> Callable[[], None]:
        """Call ``listener(kind, event)`` synchronously after every write; returns an unsubscribe.

        ``copy=False`` hands the listener the stored object itself (no deep copy per write): it must
        not change it. Stored objects are never edited in place — every write stores a new object —
        so what the listener keeps stays as it was written."""
        entry = (listener, copy)
        self._listeners.append(entry)
        return lambda: self._listeners.remove(entry)

    def inject_fault(self, verb: str, error: ApiError, *, kind: Kind | None = None, times: int = 1) -> None:
        """Make the next ``times`` calls of ``verb`` (get, list, watch, create, replace, patch,
        delete, evict) on ``kind`` (any when ``None``) fail with ``error``."""
        self._faults.append(_Fault(verb, _key_of(kind) if kind else None, error, times))

    def clear_faults(self) -> None:
        self._faults.clear()

    def compact(self) -> None:
        """Forget the event history: watches from any earlier resourceVersion now get 410."""
        self._history.compact()

    def break_watches(self, *, gone: bool = False) -> None:
        """End every open watch: as a closed stream, or with ``GoneError`` when ``gone``."""
        self._history.break_watches(gone=gone)

    # --- KubeAPI ----------------------------------------------------------------------------

    async def get(self, kind: Kind, name: str, namespace: str | None = None) -> Manifest:
        self._finish_graceful_deletions()
        self._maybe_fail("get", kind)
        return clone(self._stored(kind, name, namespace))

    async def list(
        self,
        kind: Kind,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[Manifest], str]:
        self._finish_graceful_deletions()
        self._maybe_fail("list", kind)
        matches = self._matcher(kind, namespace, label_selector, field_selector)
        items = [clone(obj) for obj in self._candidates(kind, field_selector) if matches(obj)]
        return items, str(self._history.revision)

    def _candidates(self, kind: Kind, field_selector: str | None) -> Iterable[Manifest]:
        """The stored objects a list must look at: a pod list selecting ``spec.nodeName=X`` only needs
        the index's pods of X (the full selector is still applied to them)."""
        if kind == POD and field_selector:
            node = node_name_selected(field_selector)
            if node is not None:
                on_node = self._pods_by_node.get(node, {})
                order = self._pod_order
                return [on_node[key] for key in sorted(on_node, key=order.__getitem__)]
        return self._objects.get(_key_of(kind), {}).values()

    def watch(
        self,
        kind: Kind,
        resource_version: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        bookmark_interval: float | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Changes after ``resource_version`` (``""``/``"0"``: current objects as ADDED first).

        With ``bookmark_interval`` (seconds of event-loop time), a BOOKMARK carrying the
        latest resourceVersion is sent after that long without a matching event.
        """
        return self._watch(kind, resource_version, namespace, label_selector, field_selector, bookmark_interval)

    async def _watch(
        self,
        kind: Kind,
        resource_version: str,
        namespace: str | None,
        label_selector: str | None,
        field_selector: str | None,
        bookmark_interval: float | None,
    ) -> AsyncIterator[WatchEvent]:
        self._finish_graceful_deletions()
        self._maybe_fail("watch", kind)  # on first iteration, like a real server's response
        matches = self._matcher(kind, namespace, label_selector, field_selector)
        store = self._objects.setdefault(_key_of(kind), {})
        events = self._history.watch(kind, resource_version, matches, store.values, bookmark_interval)
        async with contextlib.aclosing(events):
            async for event in events:
                yield event

    async def create(self, manifest: Manifest) -> Manifest:
        self._finish_graceful_deletions()
        kind = self._remember(kind_of(manifest))
        self._maybe_fail("create", kind)
        obj = clone(manifest)
        metadata = obj.get("metadata") or {}
        obj["metadata"] = metadata
        if not metadata.get("name") and metadata.get("generateName"):
            suffix = "".join(self._random.choice(_NAME_SUFFIX_ALPHABET) for _ in range(5))
            metadata["name"] = f"{metadata['generateName']}{suffix}"
        for managed in ("resourceVersion", "uid", "creationTimestamp", "deletionTimestamp", "generation"):
            metadata.pop(managed, None)
        metadata = self._prepare_metadata(kind, obj)
        key = (metadata.get("namespace", ""), metadata["name"])
        self._admit_to_namespace(kind, key)
        store = self._objects.setdefault(_key_of(kind), {})
        if key in store:
            raise ConflictError(self._already_exists(kind, metadata["name"]), reason="AlreadyExists")
        metadata["generation"] = 1
        if (kind.api_version, kind.kind) in STATUS_DROPPED_ON_CREATE:
            obj.pop("status", None)
        elif kind == POD:
            obj["status"] = {"phase": "Pending"}
        return clone(self._write(kind, key, obj, "ADDED"))

    async def replace(self, manifest: Manifest, *, subresource: str | None = None) -> Manifest:
        """Update; ``subresource="status"`` replaces only ``status`` (PUT .../status)."""
        self._finish_graceful_deletions()
        kind = self._remember(kind_of(manifest))
        self._maybe_fail("replace", kind)
        if subresource not in (None, "status"):
            raise BadRequestError(f"subresource {subresource!r} cannot be replaced")
        metadata = manifest.get("metadata") or {}
        current = self._stored(kind, str(metadata.get("name", "")), metadata.get("namespace"))
        self._check_precondition(kind, current, metadata.get("resourceVersion"))
        return clone(self._update(kind, current, clone(manifest), status_only=subresource == "status"))

    async def patch(
        self,
        kind: Kind,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> Manifest:
        return clone(self._patch(kind, name, patch, namespace, subresource))

    async def patch_unread(
        self,
        kind: Kind,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> None:
        """``patch`` for a caller that does not read the result (the simulator's own writes): no copy is made."""
        self._patch(kind, name, patch, namespace, subresource)

    def _patch(
        self, kind: Kind, name: str, patch: Mapping[str, Any], namespace: str | None, subresource: str | None
    ) -> Manifest:
        """The stored object after the patch (not a copy)."""
        self._finish_graceful_deletions()
        kind = self._remember(kind)
        self._maybe_fail("patch", kind)
        if subresource not in (None, "status"):
            raise BadRequestError(f"subresource {subresource!r} cannot be patched")
        if not isinstance(patch, Mapping):
            raise BadRequestError("a merge patch must be a JSON object")
        current = self._stored(kind, name, namespace)
        precondition = (patch.get("metadata") or {}).get("resourceVersion")
        self._check_precondition(kind, current, precondition)
        merged = merge_patch(current, patch)
        return self._update(kind, current, merged, status_only=subresource == "status")

    async def delete(
        self,
        kind: Kind,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> None:
        """Without ``grace_period_seconds`` a pod is removed at once (graceful termination is
        only modelled when asked for); other kinds ignore it, as on a real server."""
        check_grace_period(grace_period_seconds)
        self._finish_graceful_deletions()
        kind = self._remember(kind)
        self._maybe_fail("delete", kind)
        current = self._stored(kind, name, namespace)
        if uid is not None and current["metadata"].get("uid") != uid:
            raise ConflictError(f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                                f"{current['metadata'].get('uid')}")
        if kind == POD and grace_period_seconds is not None:
            self._delete_pod_gracefully(current, grace_period_seconds)
        else:
            self._request_deletion(kind, current)

    async def evict(self, name: str, namespace: str, *, grace_period_seconds: int | None = None,
                    mark_disruption_target: bool = False) -> None:
        """The Eviction subresource: 429 when a PodDisruptionBudget refuses, else the pod is deleted (at once;
        gracefully with ``grace_period_seconds``, as a DELETE with that period). ``mark_disruption_target``:
        first give the pod the ``DisruptionTarget`` condition, as the API server's eviction handler does."""
        check_grace_period(grace_period_seconds)
        self._finish_graceful_deletions()
        self._maybe_fail("evict", POD)
        pod = self._stored(POD, name, namespace)
        pdbs = [p for (ns, _), p in self._objects.get(_key_of(PDB), {}).items() if ns == namespace]
        if pdbs:
            pods = [p for (ns, _), p in self._objects.get(_key_of(POD), {}).items() if ns == namespace]
            check_eviction(pod, pdbs, pods, self.stored_controller)
        if mark_disruption_target and not pod["metadata"].get("deletionTimestamp"):
            pod = self._mark_disruption_target(pod)
        if grace_period_seconds is not None:
            self._delete_pod_gracefully(pod, grace_period_seconds)
        else:
            self._request_deletion(POD, pod)

    def pdb_status(self, pdb: Manifest) -> BudgetStatus:
        """The status the disruption controller would give a budget now (from the stored pods and controllers)."""
        namespace = str((pdb.get("metadata") or {}).get("namespace") or "default")
        pods = [p for (ns, _), p in self._objects.get(_key_of(POD), {}).items() if ns == namespace]
        return budget_status(pdb, pods, self.stored_controller)

    # --- internals --------------------------------------------------------------------------

    def stored_controller(self, kind: str, group: str, namespace: str, name: str) -> Manifest | None:
        """The stored object of that kind and API group (any version) in ``namespace``; not a copy: read only."""
        for (api_version, stored_kind), store in self._objects.items():
            if stored_kind == kind and (api_version.rpartition("/")[0] if "/" in api_version else "") == group:
                found = store.get((namespace, name))
                if found is not None:
                    return found
        return None

    def _mark_disruption_target(self, pod: Manifest) -> Manifest:
        status = dict(pod.get("status") or {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
        conditions.append({"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                           "message": "Eviction API: evicting", "lastTransitionTime": format_time(self._clock())})
        updated = _shallow(pod)
        updated["status"] = {**status, "conditions": conditions}
        metadata = pod["metadata"]
        return self._write(POD, (metadata.get("namespace", ""), metadata["name"]), updated, "MODIFIED", previous=pod)

    def _remember(self, kind: Kind) -> Kind:
        return self._kinds.setdefault(_key_of(kind), kind)

    def _object_key(self, kind: Kind, name: str, namespace: str | None) -> ObjectKey:
        return ((namespace or "default") if kind.namespaced else "", name)

    def _stored(self, kind: Kind, name: str, namespace: str | None) -> Manifest:
        found = self._objects.get(_key_of(kind), {}).get(self._object_key(kind, name, namespace))
        if found is None:
            raise NotFoundError(f'{qualified_resource(kind)} "{name}" not found')
        return found

    def _already_exists(self, kind: Kind, name: str) -> str:
        return f'{qualified_resource(kind)} "{name}" already exists'

    def _maybe_fail(self, verb: str, kind: Kind) -> None:
        for fault in self._faults:
            if fault.verb == verb and fault.kind_key in (None, _key_of(kind)):
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self._faults.remove(fault)
                raise fault.error

    def _admit_to_namespace(self, kind: Kind, key: ObjectKey) -> None:
        """The NamespaceLifecycle admission plugin: nothing new in a namespace that is being deleted (a snapshot
        taken while one was: its ReplicaSets can no longer recreate the pods they lose)."""
        namespace, name = key
        stored = self._objects.get(_key_of(NAMESPACE), {}).get(("", namespace)) if kind.namespaced else None
        if stored is not None and stored["metadata"].get("deletionTimestamp"):
            raise ForbiddenError(f'{kind.kind.lower()}s "{name}" is forbidden: unable to create new content in '
                                 f"namespace {namespace} because it is being terminated")

    def _prepare_metadata(self, kind: Kind, obj: Manifest) -> dict[str, Any]:
        metadata = obj.setdefault("metadata", {})
        name = metadata.get("name")
        if not name or not isinstance(name, str):
            raise ApiError(
                422, "Invalid", f"{kind.kind}.metadata.name: Required value: name or generateName is required"
            )
        if kind.namespaced:
            metadata["namespace"] = metadata.get("namespace") or "default"
        else:
            metadata.pop("namespace", None)
        if "uid" not in metadata:  # (not setdefault: the generator is drawn only for objects without one)
            metadata["uid"] = str(uuid.UUID(int=self._random.getrandbits(128), version=4))
        metadata.setdefault("creationTimestamp", format_time(self._clock()))
        return metadata

    def _matcher(
        self, kind: Kind, namespace: str | None, label_selector: str | None, field_selector: str | None
    ) -> Callable[[Manifest], bool]:
        labels_match: LabelMatcher = label_selector_matcher(label_selector)
        fields_match: FieldMatcher = field_selector_matcher(field_selector)
        scoped = namespace if kind.namespaced else None

        def matches(obj: Manifest) -> bool:
            metadata = obj.get("metadata") or {}
            if scoped and metadata.get("namespace") != scoped:
                return False
            return labels_match(metadata.get("labels") or {}) and fields_match(obj)

        return matches

    def _check_precondition(self, kind: Kind, current: Manifest, resource_version: Any) -> None:
        if resource_version in (None, ""):
            return
        if str(resource_version) != current["metadata"]["resourceVersion"]:
            name = current["metadata"]["name"]
            raise ConflictError(
                f'Operation cannot be fulfilled on {qualified_resource(kind)} "{name}": '
                "the object has been modified; please apply your changes to the latest version and try again"
            )

    def _update(self, kind: Kind, current: Manifest, desired: Manifest, *, status_only: bool) -> Manifest:
        old_meta = current["metadata"]
        if (
            desired.get("kind", kind.kind) != kind.kind
            or str(desired.get("metadata", {}).get("name")) != old_meta["name"]
        ):
            raise BadRequestError(f"{plural(kind)}: the name and kind in the body must match the object")
        if status_only:
            if not has_status_subresource(kind):
                raise NotFoundError(f"{qualified_resource(kind)} has no status subresource")
            # The status subresource ignores every change outside ``status``.
            updated = _shallow(current)
            if "status" in desired:
                updated["status"] = desired["status"]
            else:
                updated.pop("status", None)
        else:
            updated = desired
            updated["apiVersion"], updated["kind"] = kind.api_version, kind.kind
            # Its own metadata: a merge patch that left metadata alone shares the stored version's.
            metadata = updated["metadata"] = dict(updated.get("metadata") or {})
            metadata["resourceVersion"] = old_meta["resourceVersion"]
            for managed in (
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "namespace",
            ):
                if managed in old_meta:
                    metadata[managed] = old_meta[managed]
                else:
                    metadata.pop(managed, None)
            if has_status_subresource(kind):
                if "status" in current:
                    updated["status"] = current["status"]
                else:
                    updated.pop("status", None)
            if old_meta.get("deletionTimestamp"):
                # A terminating object may only lose finalizers, never gain new ones.
                added = set(metadata.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
                if added:
                    raise ApiError(
                        422,
                        "Invalid",
                        f"metadata.finalizers: Forbidden: no new finalizers can be added "
                        f"if the object is being deleted, found new finalizers {sorted(added)}",
                    )
            spec_changed = any(
                current.get(f) != updated.get(f) for f in set(current) | set(updated) if f not in NON_SPEC_FIELDS
            )
            metadata["generation"] = old_meta.get("generation", 1) + (1 if spec_changed else 0)
        if updated == current:
            return current  # a no-op write does not bump resourceVersion, as on a real server
        key = (old_meta.get("namespace", ""), old_meta["name"])
        new_meta = updated["metadata"]
        if (
            new_meta.get("deletionTimestamp")
            and not new_meta.get("finalizers")
            and not new_meta.get("deletionGracePeriodSeconds")  # a terminating pod waits for its kubelet
        ):
            return self._write(kind, key, updated, "DELETED")
        return self._write(kind, key, updated, "MODIFIED", previous=current)

    def _request_deletion(self, kind: Kind, current: Manifest) -> None:
        metadata = current["metadata"]
        key = (metadata.get("namespace", ""), metadata["name"])
        if not metadata.get("finalizers"):
            self._write(kind, key, _shallow(current), "DELETED")
            return
        if metadata.get("deletionTimestamp"):
            return  # already terminating: a repeated delete changes nothing
        updated = _shallow(current)
        updated["metadata"]["deletionTimestamp"] = format_time(self._clock())
        updated["metadata"]["deletionGracePeriodSeconds"] = 0
        self._write(kind, key, updated, "MODIFIED", previous=current)

    def _delete_pod_gracefully(self, pod: Manifest, grace_period_seconds: int) -> None:
        decision = plan_pod_deletion(pod, grace_period_seconds, self._clock())
        if decision.kind == "immediate":
            self._request_deletion(POD, pod)
            return
        if decision.kind == "unchanged" or decision.until is None:
            return
        metadata = pod["metadata"]
        key = (metadata.get("namespace", ""), metadata["name"])
        if decision.grace_seconds == 0 and not metadata.get("finalizers"):
            self._write(POD, key, _shallow(pod), "DELETED")
            return
        updated = _shallow(pod)
        updated["metadata"]["deletionTimestamp"] = format_time(decision.until)
        updated["metadata"]["deletionGracePeriodSeconds"] = decision.grace_seconds
        self._write(POD, key, updated, "MODIFIED", previous=pod)
        if decision.grace_seconds:
            self._terminating_pods[key] = decision.until
        else:
            self._terminating_pods.pop(key, None)

    def _finish_graceful_deletions(self) -> None:
        """The kubelet's final delete (grace 0) of every pod whose grace period has run out."""
        if not self._terminating_pods:
            return
        now = self._clock()
        due = [key for key, until in self._terminating_pods.items() if until <= now]
        for key in due:
            del self._terminating_pods[key]
            pod = self._objects.get(_key_of(POD), {}).get(key)
            if pod is None or not pod["metadata"].get("deletionGracePeriodSeconds"):
                continue  # gone already, or recreated under the same name
            if not pod["metadata"].get("finalizers"):
                self._write(POD, key, _shallow(pod), "DELETED")
                continue
            updated = _shallow(pod)
            updated["metadata"]["deletionGracePeriodSeconds"] = 0
            self._write(POD, key, updated, "MODIFIED", previous=pod)

    def _index_pod(self, key: ObjectKey, old: Manifest | None, new: Manifest | None) -> None:
        old_node = (old.get("spec") or {}).get("nodeName") if old is not None else None
        new_node = (new.get("spec") or {}).get("nodeName") if new is not None else None
        if old_node and old_node != new_node:
            on_node = self._pods_by_node.get(str(old_node))
            if on_node is not None:
                on_node.pop(key, None)
                if not on_node:
                    del self._pods_by_node[str(old_node)]
        if new_node and new is not None:
            self._pods_by_node.setdefault(str(new_node), {})[key] = new

    def _write(
        self,
        kind: Kind,
        key: ObjectKey,
        obj: Manifest,
        event_type: WatchEventType,
        previous: Manifest | None = None,
    ) -> Manifest:
        revision = self._history.next_revision()
        obj["metadata"]["resourceVersion"] = str(revision)
        store = self._objects.setdefault(_key_of(kind), {})
        if kind == POD:
            previous_stored = store.get(key)
            self._index_pod(key, previous_stored, None if event_type == "DELETED" else obj)
            if event_type == "DELETED":
                self._pod_order.pop(key, None)
            elif previous_stored is None:
                self._pods_stored += 1
                self._pod_order[key] = self._pods_stored
        if event_type == "DELETED":
            store.pop(key, None)
        else:
            store[key] = obj
        self._history.append(Change(revision, kind, event_type, obj, previous))
        for listener, copy in list(self._listeners):
            listener(kind, WatchEvent(event_type, clone(obj) if copy else obj))
        return obj


def _shallow(manifest: Manifest) -> Manifest:
    """A new top-level object with its own metadata, sharing every other value (never edited in place)."""
    copied = dict(manifest)
    copied["metadata"] = dict(manifest.get("metadata") or {})
    return copied
