"""Nodes and NodeClaims as the engine sees them, built from API-server manifests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from reconciler.model import labels as wk
from reconciler.model.meta import ManifestError, parse_time, str_map
from reconciler.model.quantity import QuantityError
from reconciler.model.requirements import RequirementError, Requirements
from reconciler.model.resources import EMPTY, Resources
from reconciler.model.taints import Taint, TaintError, parse_taints


@dataclass(slots=True, frozen=True)
class Condition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: datetime | None = None

    @property
    def is_true(self) -> bool:
        return self.status == "True"


def parse_conditions(raw: Any, *, path: str) -> dict[str, Condition]:
    conditions: dict[str, Condition] = {}
    for i, item in enumerate(raw or []):
        condition = _condition(item, path=f"{path}[{i}]")
        conditions[condition.type] = condition
    return conditions


def _condition(item: Any, *, path: str) -> Condition:
    if not isinstance(item, Mapping) or not item.get("type"):
        raise ManifestError(f"{path}.type: required")
    return Condition(
        str(item["type"]),
        str(item.get("status") or "Unknown"),
        str(item.get("reason") or ""),
        str(item.get("message") or ""),
        parse_time(item.get("lastTransitionTime"), path=f"{path}.lastTransitionTime"),
    )


def _reparsed_conditions(raw: Any, kept_raw: Any, kept: Mapping[str, Condition], *, path: str) -> dict[str, Condition]:
    """``parse_conditions(raw)``, taking each condition written as it was in ``kept_raw`` (which ``kept`` was
    parsed from) from ``kept``: a condition set rewrites the list, and its other conditions are copies."""
    if type(raw) is not list or type(kept_raw) is not list or not all(map(_plain_condition, kept_raw)):
        return parse_conditions(raw, path=path)
    was = {item["type"]: item for item in kept_raw}  # the last of a type is the one ``kept`` holds
    conditions: dict[str, Condition] = {}
    for i, item in enumerate(raw):
        if _plain_condition(item) and was.get(item["type"]) == item:
            conditions[item["type"]] = kept[item["type"]]
        else:
            condition = _condition(item, path=f"{path}[{i}]")
            conditions[condition.type] = condition
    return conditions


def _plain_condition(item: Any) -> bool:
    """A condition with a type whose values are all strings, integers (observedGeneration) or null: equal values
    of these types read the same (unlike 1 == 1.0 == True, whose strings differ)."""
    return type(item) is dict and bool(item.get("type")) and _PLAIN.issuperset(map(type, item.values()))


_PLAIN = frozenset({str, int, type(None)})


@dataclass(slots=True, frozen=True)
class Node:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    capacity: Resources = EMPTY
    allocatable: Resources = EMPTY
    provider_id: str = ""
    unschedulable: bool = False
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    conditions: Mapping[str, Condition] = field(default_factory=dict)
    finalizers: tuple[str, ...] = ()

    @property
    def nodepool(self) -> str:
        return self.labels.get(wk.NODEPOOL, "")

    @property
    def is_ready(self) -> bool:
        """Ready unless a Ready condition says otherwise (snapshots often omit conditions)."""
        ready = self.conditions.get("Ready")
        return ready is None or ready.is_true

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any], *, kept: tuple[Mapping[str, Any], Node] | None = None) -> Node:
        """``kept``: an earlier manifest of this Node, never edited since, and its parse: each value this manifest
        shares with it (the same object: the in-memory API server's writes share what they leave alone) is taken
        from that parse instead of being read again."""
        metadata = manifest.get("metadata") or {}
        spec = manifest.get("spec") or {}
        status = manifest.get("status") or {}
        name = str(metadata.get("name") or "")
        shared = _Shared(metadata, spec, status, kept[0] if kept is not None else None)
        was = kept[1] if kept is not None else _NO_NODE  # read only where ``shared`` says so
        try:
            if shared.status("capacity") and shared.status("allocatable"):
                capacity, allocatable = was.capacity, was.allocatable
            else:
                capacity = Resources.from_manifest(status.get("capacity"), path="status.capacity")
                allocatable_raw = status.get("allocatable")
                allocatable = (
                    capacity if allocatable_raw is None
                    else Resources.from_manifest(allocatable_raw, path="status.allocatable")
                )
            return cls(
                name=name,
                labels=was.labels if shared.metadata("labels")
                else _normalized(str_map(metadata.get("labels"), path="metadata.labels")),
                annotations=was.annotations if shared.metadata("annotations")
                else str_map(metadata.get("annotations"), path="metadata.annotations"),
                taints=was.taints if shared.spec("taints") else parse_taints(spec.get("taints"), path="spec.taints"),
                capacity=capacity,
                allocatable=allocatable,
                provider_id=str(spec.get("providerID") or ""),
                unschedulable=bool(spec.get("unschedulable")),
                creation_timestamp=was.creation_timestamp if shared.metadata("creationTimestamp")
                else parse_time(metadata.get("creationTimestamp"), path="metadata.creationTimestamp"),
                deletion_timestamp=was.deletion_timestamp if shared.metadata("deletionTimestamp")
                else parse_time(metadata.get("deletionTimestamp"), path="metadata.deletionTimestamp"),
                conditions=_conditions(status, shared, was, kept),
                finalizers=tuple(str(f) for f in metadata.get("finalizers") or ()),
            )
        except (TaintError, QuantityError, ManifestError) as err:
            raise ManifestError(f"Node {name}: {err}") from None
        except ValueError as err:
            raise ManifestError(f"Node {name}: {err}") from None


_NO_NODE = Node(name="")


def _conditions(
    status: Mapping[str, Any], shared: _Shared, was: Node | NodeClaim, kept: tuple[Mapping[str, Any], Any] | None
) -> dict[str, Condition] | Mapping[str, Condition]:
    if shared.status("conditions"):
        return was.conditions
    raw = status.get("conditions")
    if kept is None:
        return parse_conditions(raw, path="status.conditions")
    kept_raw = (kept[0].get("status") or {}).get("conditions")
    return _reparsed_conditions(raw, kept_raw, was.conditions, path="status.conditions")


class _Shared:
    """Which values of a manifest's metadata, spec and status are the very objects of an earlier manifest's
    (nothing is shared when there is none)."""

    __slots__ = ("_new", "_old")

    def __init__(
        self, metadata: Mapping[str, Any], spec: Mapping[str, Any], status: Mapping[str, Any],
        old: Mapping[str, Any] | None,
    ) -> None:
        self._new = (metadata, spec, status)
        self._old = (
            None if old is None
            else (old.get("metadata") or {}, old.get("spec") or {}, old.get("status") or {})
        )

    def metadata(self, key: str) -> bool:
        return self._old is not None and self._new[0].get(key) is self._old[0].get(key)

    def spec(self, key: str) -> bool:
        return self._old is not None and self._new[1].get(key) is self._old[1].get(key)

    def status(self, key: str) -> bool:
        return self._old is not None and self._new[2].get(key) is self._old[2].get(key)


def _normalized(labels: dict[str, str]) -> dict[str, str]:
    """Add stable names for legacy label keys (beta zone/arch/...), as Karpenter reads them."""
    for legacy, stable in wk.NORMALIZED_LABELS.items():
        if legacy in labels and stable not in labels:
            labels[stable] = labels[legacy]
    return labels


@dataclass(slots=True, frozen=True)
class NodeClaim:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    requirements: Requirements = field(default_factory=Requirements)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    requests: Resources = EMPTY
    node_class_ref: Mapping[str, str] = field(default_factory=dict)
    provider_id: str = ""
    node_name: str = ""
    capacity: Resources = EMPTY
    allocatable: Resources = EMPTY
    conditions: Mapping[str, Condition] = field(default_factory=dict)
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    last_pod_event_time: datetime | None = None
    expire_after: str | None = None
    termination_grace_period: str | None = None
    image_id: str = ""

    @property
    def nodepool(self) -> str:
        return self.labels.get(wk.NODEPOOL, "")

    def condition_true(self, kind: str) -> bool:
        condition = self.conditions.get(kind)
        return condition is not None and condition.is_true

    @property
    def launched(self) -> bool:
        return self.condition_true("Launched")

    @property
    def registered(self) -> bool:
        return self.condition_true("Registered")

    @property
    def initialized(self) -> bool:
        return self.condition_true("Initialized")

    @classmethod
    def from_manifest(
        cls, manifest: Mapping[str, Any], *, kept: tuple[Mapping[str, Any], NodeClaim] | None = None
    ) -> NodeClaim:
        """``kept``: an earlier manifest of this NodeClaim, never edited since, and its parse: each value this
        manifest shares with it (the same object: a status write shares the spec, whose requirements hold ~450
        instance-type values) is taken from that parse instead of being read again."""
        metadata = manifest.get("metadata") or {}
        spec = manifest.get("spec") or {}
        status = manifest.get("status") or {}
        name = str(metadata.get("name") or "")
        shared = _Shared(metadata, spec, status, kept[0] if kept is not None else None)
        was = kept[1] if kept is not None else _NO_CLAIM  # read only where ``shared`` says so
        try:
            if kept is not None and manifest.get("spec") is kept[0].get("spec"):
                requirements, requests = was.requirements, was.requests
                taints, startup_taints = was.taints, was.startup_taints
                node_class_ref = was.node_class_ref
            else:
                requirements = Requirements.from_manifest(spec.get("requirements"), path="spec.requirements")
                taints = parse_taints(spec.get("taints"), path="spec.taints")
                startup_taints = parse_taints(spec.get("startupTaints"), path="spec.startupTaints")
                requests = Resources.from_manifest(
                    (spec.get("resources") or {}).get("requests"), path="spec.resources.requests"
                )
                node_class_ref = str_map(spec.get("nodeClassRef"), path="spec.nodeClassRef")
            return cls(
                name=name,
                labels=was.labels if shared.metadata("labels")
                else _normalized(str_map(metadata.get("labels"), path="metadata.labels")),
                annotations=was.annotations if shared.metadata("annotations")
                else str_map(metadata.get("annotations"), path="metadata.annotations"),
                requirements=requirements,
                taints=taints,
                startup_taints=startup_taints,
                requests=requests,
                node_class_ref=node_class_ref,
                provider_id=str(status.get("providerID") or ""),
                node_name=str(status.get("nodeName") or ""),
                capacity=was.capacity if shared.status("capacity")
                else Resources.from_manifest(status.get("capacity"), path="status.capacity"),
                allocatable=was.allocatable if shared.status("allocatable")
                else Resources.from_manifest(status.get("allocatable"), path="status.allocatable"),
                conditions=_conditions(status, shared, was, kept),
                creation_timestamp=was.creation_timestamp if shared.metadata("creationTimestamp")
                else parse_time(metadata.get("creationTimestamp"), path="metadata.creationTimestamp"),
                deletion_timestamp=was.deletion_timestamp if shared.metadata("deletionTimestamp")
                else parse_time(metadata.get("deletionTimestamp"), path="metadata.deletionTimestamp"),
                last_pod_event_time=was.last_pod_event_time if shared.status("lastPodEventTime")
                else parse_time(status.get("lastPodEventTime"), path="status.lastPodEventTime"),
                expire_after=spec.get("expireAfter"),
                termination_grace_period=spec.get("terminationGracePeriod"),
                image_id=str(status.get("imageID") or ""),
            )
        except (RequirementError, TaintError, QuantityError, ManifestError) as err:
            raise ManifestError(f"NodeClaim {name}: {err}") from None
        except ValueError as err:
            raise ManifestError(f"NodeClaim {name}: {err}") from None


_NO_CLAIM = NodeClaim(name="")
