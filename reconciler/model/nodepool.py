"""The parts of a karpenter.sh/v1 NodePool the scheduler reads.

The full API model (validation, defaults, CRD schema) lives in ``reconciler.api``;
this light view is built straight from the manifest so the engine stays fast and
independent of pydantic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from reconciler.model import labels as wk
from reconciler.model.meta import ManifestError, parse_time, str_map
from reconciler.model.quantity import QuantityError
from reconciler.model.requirements import Requirement, RequirementError, Requirements
from reconciler.model.resources import EMPTY, Resources
from reconciler.model.taints import Taint, TaintError, parse_taints

NODES = "nodes"


def _restricted(key: str) -> bool:
    if key in (wk.HOSTNAME, wk.NODEPOOL):
        return True
    domain = key.partition("/")[0] if "/" in key else ""
    if key == wk.CAPACITY_TYPE:
        return False
    return domain == wk.GROUP or domain.endswith("." + wk.GROUP)


@dataclass(slots=True, frozen=True)
class NodePool:
    name: str
    uid: str = ""
    weight: int = 0
    requirements: Requirements = field(default_factory=Requirements)
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    node_class_ref: Mapping[str, str] = field(default_factory=dict)
    expire_after: str = "720h"
    termination_grace_period: str | None = None
    limits: Mapping[str, int] = field(default_factory=dict)  # milli-units; explicit zeros kept
    replicas: int | None = None
    ready: bool = True
    deletion_timestamp: datetime | None = None
    disruption: Mapping[str, Any] = field(default_factory=dict)
    raw_requirements: tuple[Mapping[str, Any], ...] = ()

    @property
    def is_static(self) -> bool:
        return self.replicas is not None

    @property
    def node_class_label(self) -> tuple[str, str] | None:
        """``<group>/<lowercase kind>`` = name, the label Karpenter puts on every node of the pool."""
        group, kind, name = (self.node_class_ref.get(k, "") for k in ("group", "kind", "name"))
        if not (group and kind and name):
            return None
        return f"{group}/{kind.lower()}", name

    @property
    def has_node_limit(self) -> bool:
        return NODES in self.limits

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any]) -> NodePool:
        metadata = manifest.get("metadata") or {}
        name = str(metadata.get("name") or "")
        try:
            return _parse(cls, manifest, metadata, name)
        except (RequirementError, TaintError, QuantityError, ManifestError) as err:
            raise ManifestError(f"NodePool {name}: {err}") from None
        except ValueError as err:
            raise ManifestError(f"NodePool {name}: {err}") from None


def _parse(cls: type[NodePool], manifest: Mapping[str, Any], metadata: Mapping[str, Any], name: str) -> NodePool:
    spec = manifest.get("spec") or {}
    template = spec.get("template") or {}
    template_meta = template.get("metadata") or {}
    template_spec = template.get("spec") or {}
    base = "spec.template.spec"
    raw_requirements = template_spec.get("requirements") or []
    if not isinstance(raw_requirements, list):
        raise ManifestError(f"{base}.requirements: expected a list")
    requirements = []
    for i, raw in enumerate(raw_requirements):
        requirement = Requirement.from_manifest(raw, path=f"{base}.requirements[{i}]")
        if _restricted(requirement.key):
            raise ManifestError(f"{base}.requirements[{i}].key: {requirement.key!r} is restricted")
        if requirement.min_values is not None:
            if not 1 <= requirement.min_values <= 50:
                raise ManifestError(f"{base}.requirements[{i}].minValues: must be between 1 and 50")
            if requirement.operator == "In" and requirement.min_values > len(requirement.values):
                raise ManifestError(
                    f"{base}.requirements[{i}].minValues: {requirement.min_values} is more than the "
                    f"{len(requirement.values)} values listed"
                )
        requirements.append(requirement)
    labels = str_map(template_meta.get("labels"), path="spec.template.metadata.labels")
    for key in labels:
        if _restricted(key):
            raise ManifestError(f"spec.template.metadata.labels.{key}: label key is restricted")
    limits_raw = spec.get("limits")
    parsed = Resources.from_manifest(limits_raw, path="spec.limits") if limits_raw else EMPTY
    # A plain map, not Resources (which drops zeros): an explicit "cpu: 0" or "nodes: 0" blocks the pool.
    limits = {str(name): parsed.amount(str(name)) for name in (limits_raw or {})}
    weight = spec.get("weight")
    replicas = spec.get("replicas")
    return cls(
        name=name,
        uid=str(metadata.get("uid") or ""),
        weight=int(weight) if weight is not None else 0,
        requirements=Requirements.of(*requirements),
        labels=labels,
        annotations=str_map(template_meta.get("annotations"), path="spec.template.metadata.annotations"),
        taints=parse_taints(template_spec.get("taints"), path=f"{base}.taints"),
        startup_taints=parse_taints(template_spec.get("startupTaints"), path=f"{base}.startupTaints"),
        node_class_ref=str_map(template_spec.get("nodeClassRef"), path=f"{base}.nodeClassRef"),
        expire_after=str(template_spec.get("expireAfter") or "720h"),
        termination_grace_period=template_spec.get("terminationGracePeriod"),
        limits=limits,
        replicas=int(replicas) if replicas is not None else None,
        ready=_ready(manifest.get("status") or {}),
        deletion_timestamp=parse_time(metadata.get("deletionTimestamp"), path="metadata.deletionTimestamp"),
        disruption=dict(spec.get("disruption") or {}),
        raw_requirements=tuple(raw_requirements),
    )


def _ready(status: Mapping[str, Any]) -> bool:
    """A pool without conditions (as in scenario files) is usable; an explicit Ready=False is not."""
    for condition in status.get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return True
