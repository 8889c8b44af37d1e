"""Drift: has a node stopped matching what its NodePool / EC2NodeClass now ask for?

Checks, cheapest first (as Karpenter does):

1. **NodePool static hash** (``NodePoolDrifted``): a stable hash of the NodePool's
   ``spec.template`` minus requirements (labels, annotations, taints,
   startupTaints, nodeClassRef, expireAfter, terminationGracePeriod), stamped on
   NodeClaims at creation as ``karpenter.sh/nodepool-hash`` with
   ``karpenter.sh/nodepool-hash-version``. Compared only when versions match.
2. **Requirements** (``RequirementsDrifted``): the node's labels no longer satisfy
   the NodePool's requirements.
3. **EC2NodeClass static hash** (``NodeClassDrifted``): the hash over the
   EC2NodeClass fields that need no AWS call (aws.md §6), stamped as
   ``karpenter.k8s.aws/ec2nodeclass-hash`` (+ version).
4. **Instance type gone** (``InstanceTypeNotFound``): after the NodeClaim is an
   hour old, its type or a matching offering is no longer offered.
5. A ``Drifted=True`` condition already on the NodeClaim (written from
   ``CloudProvider.is_drifted``: AMI, subnet, security group...).

The hashes are Adze's own (sorted JSON, SHA-256, lists as sets, empty values
dropped) and versioned ``*-adze1`` so NodeClaims stamped by upstream Karpenter
(version ``v3`` / ``v6``) are never compared against them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from reconciler.cloud.types import InstanceType
from reconciler.disruption.pods import parse_time
from reconciler.model import labels as wk
from reconciler.settings import SettingsError, parse_duration

NODEPOOL_HASH_VERSION = "v3-adze1"
NODECLASS_HASH_ANNOTATION = "karpenter.k8s.aws/ec2nodeclass-hash"
NODECLASS_HASH_VERSION_ANNOTATION = "karpenter.k8s.aws/ec2nodeclass-hash-version"
NODECLASS_HASH_VERSION = "v6-adze1"

NODEPOOL_DRIFTED = "NodePoolDrifted"
REQUIREMENTS_DRIFTED = "RequirementsDrifted"
NODECLASS_DRIFTED = "NodeClassDrifted"
INSTANCE_TYPE_NOT_FOUND = "InstanceTypeNotFound"

DEFAULT_EXPIRE_AFTER = "720h"
# Instance-type drift is only checked on NodeClaims older than this (the catalogue may lag a launch).
INSTANCE_TYPE_DRIFT_MIN_AGE = timedelta(hours=1)

# EC2NodeClass fields resolved dynamically (checked through CloudProvider.is_drifted) or not drift-relevant.
_NODECLASS_UNHASHED = frozenset(
    {
        "subnetSelectorTerms",
        "securityGroupSelectorTerms",
        "capacityReservationSelectorTerms",
        "amiSelectorTerms",
        "ipPrefixCount",
        "amiFamily",
    }
)
_DURATION_FIELDS = frozenset({"expireAfter", "terminationGracePeriod"})

Manifest = Mapping[str, Any]


def _as_manifest(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):  # a pydantic API model
        return obj.model_dump(by_alias=True, exclude_none=True, mode="json")
    return obj


def _canonical(value: Any, key: str = "") -> Any:
    """Normal form for hashing: empty values dropped, lists as sets, durations in seconds."""
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            normal = _canonical(v, str(k))
            if normal not in (None, "", [], {}, False, 0):
                out[str(k)] = normal
        return out
    if isinstance(value, (list, tuple)):
        items = [_canonical(v) for v in value]
        items = [i for i in items if i not in (None, "", [], {})]
        return sorted(items, key=lambda i: json.dumps(i, sort_keys=True))
    if key in _DURATION_FIELDS and isinstance(value, str) and value != "Never":
        try:
            return parse_duration(value, name=key)
        except SettingsError:
            return value
    return value


def stable_hash(value: Any) -> str:
    text = json.dumps(_canonical(value), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def nodepool_hash(nodepool: Any) -> str:
    """``karpenter.sh/nodepool-hash`` of a NodePool (manifest or API model): template minus requirements."""
    template = dict((_as_manifest(nodepool).get("spec") or {}).get("template") or {})
    spec = dict(template.get("spec") or {})
    spec.pop("requirements", None)
    spec.setdefault("expireAfter", DEFAULT_EXPIRE_AFTER)
    metadata = template.get("metadata") or {}
    return stable_hash({"metadata": {k: metadata.get(k) for k in ("labels", "annotations")}, "spec": spec})


def nodepool_hash_annotations(nodepool: Any) -> dict[str, str]:
    """The annotations a NodeClaim gets at creation so later template changes show up as drift."""
    return {wk.NODEPOOL_HASH: nodepool_hash(nodepool), wk.NODEPOOL_HASH_VERSION: NODEPOOL_HASH_VERSION}


def resolved_ami_family(spec: Mapping[str, Any]) -> str:
    """The AMI family an EC2NodeClass resolves to: from ``amiFamily`` or the first ``alias`` term."""
    if spec.get("amiFamily"):
        return str(spec["amiFamily"])
    aliases = {
        "al2": "AL2",
        "al2023": "AL2023",
        "bottlerocket": "Bottlerocket",
        "windows2019": "Windows2019",
        "windows2022": "Windows2022",
        "windows2025": "Windows2025",
    }
    for term in spec.get("amiSelectorTerms") or []:
        alias = str(term.get("alias") or "")
        if alias:
            return aliases.get(alias.partition("@")[0].lower(), alias.partition("@")[0])
    return "Custom"


def nodeclass_hash(nodeclass: Any) -> str:
    """``karpenter.k8s.aws/ec2nodeclass-hash``: the spec fields needing no AWS lookup, plus the AMI family."""
    spec = dict(_as_manifest(nodeclass).get("spec") or {})
    hashed = {k: v for k, v in spec.items() if k not in _NODECLASS_UNHASHED}
    hashed["resolvedAmiFamily"] = resolved_ami_family(spec)
    return stable_hash(hashed)


def nodeclass_hash_annotations(nodeclass: Any) -> dict[str, str]:
    return {
        NODECLASS_HASH_ANNOTATION: nodeclass_hash(nodeclass),
        NODECLASS_HASH_VERSION_ANNOTATION: NODECLASS_HASH_VERSION,
    }


def requirement_satisfied(requirement: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Does a node with these (single-valued) labels satisfy one NodePool requirement?"""
    key = wk.NORMALIZED_LABELS.get(str(requirement.get("key", "")), str(requirement.get("key", "")))
    operator = requirement.get("operator")
    values = [str(v) for v in requirement.get("values") or []]
    value = labels.get(key)
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt", "Gte", "Lte"):
        try:
            number, bound = int(value or ""), int(values[0])
        except (ValueError, IndexError):
            return False
        return {
            "Gt": number > bound, "Lt": number < bound, "Gte": number >= bound, "Lte": number <= bound
        }[operator]
    return False


def unsatisfied_requirement(
    requirements: Sequence[Mapping[str, Any]], labels: Mapping[str, str]
) -> str | None:
    """The first NodePool requirement the labels violate, described, or None."""
    for requirement in requirements:
        if not requirement_satisfied(requirement, labels):
            key = requirement.get("key")
            values = requirement.get("values") or []
            has = labels.get(str(key), "<unset>")
            return f"{key} {requirement.get('operator')} {list(values)} (node has {has!r})"
    return None


def _annotation_drift(
    annotations: Mapping[str, str], key: str, version_key: str, version: str, current: str
) -> bool:
    stamped, stamped_version = annotations.get(key), annotations.get(version_key)
    return stamped is not None and stamped_version == version and stamped != current


def _instance_type_missing(labels: Mapping[str, str], instance_types: Sequence[InstanceType]) -> bool:
    name = labels.get(wk.INSTANCE_TYPE)
    match = next((it for it in instance_types if it.name == name), None)
    if match is None:
        return True
    zone, capacity = labels.get(wk.ZONE), labels.get(wk.CAPACITY_TYPE)
    # A reserved node may have been demoted to on-demand; either offering keeps it current.
    capacities = {capacity}
    if capacity == wk.CAPACITY_TYPE_RESERVED:
        capacities.add(wk.CAPACITY_TYPE_ON_DEMAND)
    return not any(
        (zone is None or o.zone == zone) and (capacity is None or o.capacity_type in capacities)
        for o in match.offerings
    )


def drift_reason(
    nodepool: Any,
    nodeclaim: Manifest,
    *,
    instance_types: Sequence[InstanceType] | None,
    nodeclass: Any | None,
    now: datetime,
    node_labels: Mapping[str, str] | None = None,
) -> tuple[str, str] | None:
    """Why the NodeClaim has drifted, as ``(reason, detail)``, or None when it is current."""
    pool = _as_manifest(nodepool)
    metadata = nodeclaim.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    launched = _condition(nodeclaim, "Launched")
    if launched is not None and launched.get("status") != "True":
        return None
    if _annotation_drift(
        annotations, wk.NODEPOOL_HASH, wk.NODEPOOL_HASH_VERSION, NODEPOOL_HASH_VERSION, nodepool_hash(pool)
    ):
        return NODEPOOL_DRIFTED, "NodePool template changed since the node was launched"
    labels = _effective_labels(nodeclaim, node_labels, instance_types)
    requirements = ((pool.get("spec") or {}).get("template") or {}).get("spec", {}).get("requirements") or []
    violated = unsatisfied_requirement(requirements, labels)
    if violated is not None:
        return REQUIREMENTS_DRIFTED, f"node no longer satisfies NodePool requirement {violated}"
    if nodeclass is not None and _annotation_drift(
        annotations,
        NODECLASS_HASH_ANNOTATION,
        NODECLASS_HASH_VERSION_ANNOTATION,
        NODECLASS_HASH_VERSION,
        nodeclass_hash(nodeclass),
    ):
        return NODECLASS_DRIFTED, "EC2NodeClass changed since the node was launched"
    created = parse_time(metadata.get("creationTimestamp"))
    if (
        instance_types
        and created is not None
        and now - created > INSTANCE_TYPE_DRIFT_MIN_AGE
        and _instance_type_missing(labels, instance_types)
    ):
        return INSTANCE_TYPE_NOT_FOUND, f"instance type {labels.get(wk.INSTANCE_TYPE)!r} is no longer offered"
    drifted = _condition(nodeclaim, "Drifted")
    if drifted is not None and drifted.get("status") == "True":
        reason = str(drifted.get("reason") or "Drifted")
        return reason, str(drifted.get("message") or reason)
    return None


def _effective_labels(
    nodeclaim: Manifest, node_labels: Mapping[str, str] | None, instance_types: Sequence[InstanceType] | None
) -> dict[str, str]:
    """NodeClaim labels, completed by the Node's and by the launched type's well-known labels."""
    labels: dict[str, str] = {}
    claim_labels = (nodeclaim.get("metadata") or {}).get("labels") or {}
    type_name = claim_labels.get(wk.INSTANCE_TYPE) or (node_labels or {}).get(wk.INSTANCE_TYPE)
    for it in instance_types or ():
        if it.name == type_name:
            labels.update(it.labels)
            break
    labels.update(node_labels or {})
    labels.update(claim_labels)
    return labels


def _condition(obj: Manifest, kind: str) -> Mapping[str, Any] | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return condition
    return None
