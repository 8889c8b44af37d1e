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
        if not isinstance(item, Mapping) or not item.get("type"):
            raise ManifestError(f"{path}[{i}].type: required")
        conditions[str(item["type"])] = Condition(
            str(item["type"]),
            str(item.get("status") or "Unknown"),
            str(item.get("reason") or ""),
            str(item.get("message") or ""),
            parse_time(item.get("lastTransitionTime"), path=f"{path}[{i}].lastTransitionTime"),
        )
    return conditions


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
    def from_manifest(cls, manifest: Mapping[str, Any]) -> Node:
        metadata = manifest.get("metadata") or {}
        spec = manifest.get("spec") or {}
        status = manifest.get("status") or {}
        name = str(metadata.get("name") or "")
        try:
            capacity = Resources.from_manifest(status.get("capacity"), path="status.capacity")
            allocatable_raw = status.get("allocatable")
            allocatable = (
                capacity if allocatable_raw is None
                else Resources.from_manifest(allocatable_raw, path="status.allocatable")
            )
            return cls(
                name=name,
                labels=_normalized(str_map(metadata.get("labels"), path="metadata.labels")),
                annotations=str_map(metadata.get("annotations"), path="metadata.annotations"),
                taints=parse_taints(spec.get("taints"), path="spec.taints"),
                capacity=capacity,
                allocatable=allocatable,
                provider_id=str(spec.get("providerID") or ""),
                unschedulable=bool(spec.get("unschedulable")),
                creation_timestamp=parse_time(metadata.get("creationTimestamp"), path="metadata.creationTimestamp"),
                deletion_timestamp=parse_time(metadata.get("deletionTimestamp"), path="metadata.deletionTimestamp"),
                conditions=parse_conditions(status.get("conditions"), path="status.conditions"),
                finalizers=tuple(str(f) for f in metadata.get("finalizers") or ()),
            )
        except (TaintError, QuantityError, ManifestError) as err:
            raise ManifestError(f"Node {name}: {err}") from None
        except ValueError as err:
            raise ManifestError(f"Node {name}: {err}") from None


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
    def from_manifest(cls, manifest: Mapping[str, Any], *, same_spec: NodeClaim | None = None) -> NodeClaim:
        """``same_spec``: a NodeClaim parsed from a manifest whose ``spec`` is this one's, never edited since (a
        status write): its spec fields (~450 instance-type values in the requirements) are taken as they are."""
        metadata = manifest.get("metadata") or {}
        spec = manifest.get("spec") or {}
        status = manifest.get("status") or {}
        name = str(metadata.get("name") or "")
        try:
            if same_spec is not None:
                requirements, requests = same_spec.requirements, same_spec.requests
                taints, startup_taints = same_spec.taints, same_spec.startup_taints
                node_class_ref = same_spec.node_class_ref
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
                labels=_normalized(str_map(metadata.get("labels"), path="metadata.labels")),
                annotations=str_map(metadata.get("annotations"), path="metadata.annotations"),
                requirements=requirements,
                taints=taints,
                startup_taints=startup_taints,
                requests=requests,
                node_class_ref=node_class_ref,
                provider_id=str(status.get("providerID") or ""),
                node_name=str(status.get("nodeName") or ""),
                capacity=Resources.from_manifest(status.get("capacity"), path="status.capacity"),
                allocatable=Resources.from_manifest(status.get("allocatable"), path="status.allocatable"),
                conditions=parse_conditions(status.get("conditions"), path="status.conditions"),
                creation_timestamp=parse_time(metadata.get("creationTimestamp"), path="metadata.creationTimestamp"),
                deletion_timestamp=parse_time(metadata.get("deletionTimestamp"), path="metadata.deletionTimestamp"),
                last_pod_event_time=parse_time(status.get("lastPodEventTime"), path="status.lastPodEventTime"),
                expire_after=spec.get("expireAfter"),
                termination_grace_period=spec.get("terminationGracePeriod"),
                image_id=str(status.get("imageID") or ""),
            )
        except (RequirementError, TaintError, QuantityError, ManifestError) as err:
            raise ManifestError(f"NodeClaim {name}: {err}") from None
        except ValueError as err:
            raise ManifestError(f"NodeClaim {name}: {err}") from None
