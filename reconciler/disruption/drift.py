"""Drift: has a node stopped matching what its NodePool / EC2NodeClass now ask for?

Checks, cheapest first (as Karpenter does):

1. **NodePool static hash** (``NodePoolDrifted``): ``nodepool_hash`` over the
   template minus requirements (labels, annotations, taints, startupTaints,
   nodeClassRef, expireAfter, terminationGracePeriod), stamped on NodeClaims at
   creation as ``karpenter.sh/nodepool-hash`` with
   ``karpenter.sh/nodepool-hash-version``; compared only when versions match.
2. **Requirements** (``RequirementsDrifted``): the node's labels no longer satisfy
   the NodePool's requirements.
3. **EC2NodeClass static hash** (``NodeClassDrifted``): a hash over the
   EC2NodeClass fields that need no AWS call (aws.md §6), stamped as
   ``karpenter.k8s.aws/ec2nodeclass-hash`` (+ version) at launch.
4. **Instance type gone** (``InstanceTypeNotFound``): once the NodeClaim is an
   hour old, its type or a matching offering is no longer offered.
5. A ``Drifted=True`` condition already on the NodeClaim (written from
   ``CloudProvider.is_drifted``: AMI, subnet, security group...).

Hashes are Adze's own (sorted JSON, SHA-256) with ``*adze*`` versions, so claims
stamped by upstream Karpenter (``v3`` / ``v6``) are never compared with them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from reconciler.cloud.types import InstanceType
from reconciler.model import labels as wk
from reconciler.model.node import NodeClaim
from reconciler.model.nodepool import NodePool
from reconciler.model.requirements import Requirements
from reconciler.settings import SettingsError, parse_duration

NODEPOOL_HASH_VERSION = "adze-v1"

NODECLASS_HASH_ANNOTATION = "karpenter.k8s.aws/ec2nodeclass-hash"
NODECLASS_HASH_VERSION_ANNOTATION = "karpenter.k8s.aws/ec2nodeclass-hash-version"
NODECLASS_HASH_VERSION = "adze-v1"

NODEPOOL_DRIFTED = "NodePoolDrifted"
REQUIREMENTS_DRIFTED = "RequirementsDrifted"
NODECLASS_DRIFTED = "NodeClassDrifted"
INSTANCE_TYPE_NOT_FOUND = "InstanceTypeNotFound"

# Instance-type drift is only checked on NodeClaims older than this (the catalogue may lag a launch).
INSTANCE_TYPE_DRIFT_MIN_AGE = timedelta(hours=1)

# EC2NodeClass fields resolved through AWS (checked by CloudProvider.is_drifted) or not drift-relevant.
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
_AMI_ALIAS_FAMILIES = {
    "al2": "AL2",
    "al2023": "AL2023",
    "bottlerocket": "Bottlerocket",
    "windows2019": "Windows2019",
    "windows2022": "Windows2022",
    "windows2025": "Windows2025",
}


def _canonical(value: Any) -> Any:
    """Normal form for hashing: empty and zero values dropped (absent == empty), lists as sets."""
    if isinstance(value, Mapping):
        normal = {str(k): _canonical(v) for k, v in value.items()}
        return {k: v for k, v in normal.items() if v not in (None, "", [], {}, False, 0)}
    if isinstance(value, list | tuple):
        items = [_canonical(v) for v in value]
        return sorted((i for i in items if i not in (None, "", [], {})), key=lambda i: json.dumps(i, sort_keys=True))
    return value


def _stable_hash(value: Any) -> str:
    text = json.dumps(_canonical(value), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _duration(text: str | None) -> float | str | None:
    """Durations compare by length of time ("60m" == "1h"); ``Never`` stays as is."""
    if text is None or text == "Never":
        return text
    try:
        return parse_duration(text)
    except SettingsError:
        return text


def nodepool_hash(nodepool: NodePool | Mapping[str, Any]) -> str:
    """``karpenter.sh/nodepool-hash``: the template minus requirements (so budgets never drift nodes)."""
    pool = nodepool if isinstance(nodepool, NodePool) else NodePool.from_manifest(nodepool)
    return _stable_hash(
        {
            "labels": dict(pool.labels),
            "annotations": dict(pool.annotations),
            "taints": [t.to_manifest() for t in pool.taints],
            "startupTaints": [t.to_manifest() for t in pool.startup_taints],
            "nodeClassRef": dict(pool.node_class_ref),
            "expireAfter": _duration(pool.expire_after or "720h"),
            "terminationGracePeriod": _duration(pool.termination_grace_period),
        }
    )


def nodepool_hash_annotations(nodepool: NodePool | Mapping[str, Any]) -> dict[str, str]:
    """The annotations a NodeClaim gets at creation, so later template edits show up as drift."""
    return {wk.NODEPOOL_HASH: nodepool_hash(nodepool), wk.NODEPOOL_HASH_VERSION: NODEPOOL_HASH_VERSION}


def resolved_ami_family(spec: Mapping[str, Any]) -> str:
    """The AMI family an EC2NodeClass resolves to: ``amiFamily``, else the family of its first alias."""
    if spec.get("amiFamily"):
        return str(spec["amiFamily"])
    for term in spec.get("amiSelectorTerms") or []:
        alias = str(term.get("alias") or "").partition("@")[0]
        if alias:
            return _AMI_ALIAS_FAMILIES.get(alias.lower(), alias)
    return "Custom"


def nodeclass_hash(nodeclass: Mapping[str, Any]) -> str:
    """``karpenter.k8s.aws/ec2nodeclass-hash``: the spec fields needing no AWS lookup, plus the AMI family.

    Editing userData, role/instanceProfile, tags, kubelet, blockDeviceMappings,
    metadataOptions, instanceStorePolicy, ... changes it; selector terms do not
    (their effect is checked against resolved AMIs, subnets and security groups).
    """
    spec = dict(nodeclass.get("spec") or {})
    hashed = {k: v for k, v in spec.items() if k not in _NODECLASS_UNHASHED}
    hashed["resolvedAmiFamily"] = resolved_ami_family(spec)
    return _stable_hash(hashed)


def nodeclass_hash_annotations(nodeclass: Mapping[str, Any]) -> dict[str, str]:
    """Annotations for a NodeClaim launched with this EC2NodeClass (and for the EC2NodeClass itself)."""
    return {
        NODECLASS_HASH_ANNOTATION: nodeclass_hash(nodeclass),
        NODECLASS_HASH_VERSION_ANNOTATION: NODECLASS_HASH_VERSION,
    }


def _stamp_differs(annotations: Mapping[str, str], key: str, version_key: str, version: str, current: str) -> bool:
    stamped = annotations.get(key)
    return stamped is not None and annotations.get(version_key) == version and stamped != current


def _instance_type_missing(labels: Mapping[str, str], instance_types: Sequence[InstanceType]) -> bool:
    match = next((it for it in instance_types if it.name == labels.get(wk.INSTANCE_TYPE)), None)
    if match is None:
        return True
    zone, capacity = labels.get(wk.ZONE), labels.get(wk.CAPACITY_TYPE)
    capacities = {capacity}
    if capacity == wk.CAPACITY_TYPE_RESERVED:  # may have been demoted to on-demand since launch
        capacities.add(wk.CAPACITY_TYPE_ON_DEMAND)
    return not any(
        (zone is None or o.zone == zone) and (capacity is None or o.capacity_type in capacities)
        for o in match.offerings
    )


def effective_labels(
    nodeclaim: NodeClaim, node_labels: Mapping[str, str] | None, instance_types: Sequence[InstanceType] | None
) -> dict[str, str]:
    """NodeClaim labels, completed by the Node's and by the launched type's well-known labels."""
    labels: dict[str, str] = {}
    type_name = nodeclaim.labels.get(wk.INSTANCE_TYPE) or (node_labels or {}).get(wk.INSTANCE_TYPE)
    for it in instance_types or ():
        if it.name == type_name:
            labels.update(it.labels)
            break
    labels.update(node_labels or {})
    labels.update(nodeclaim.labels)
    return labels


def drift_reason(
    nodepool: NodePool,
    nodeclaim: NodeClaim,
    *,
    now: datetime,
    instance_types: Sequence[InstanceType] | None = None,
    nodeclass: Mapping[str, Any] | None = None,
    node_labels: Mapping[str, str] | None = None,
) -> tuple[str, str] | None:
    """Why the NodeClaim has drifted, as ``(reason, detail)``, or None when it is current.

    ``nodeclass`` is the EC2NodeClass manifest the claim references (None skips
    that check); ``instance_types`` are the pool's current types (None or empty
    skips the instance-type check, e.g. while the catalogue is unknown).
    """
    launched = nodeclaim.conditions.get("Launched")
    if launched is not None and not launched.is_true:
        return None
    annotations = nodeclaim.annotations
    if _stamp_differs(
        annotations,
        wk.NODEPOOL_HASH,
        wk.NODEPOOL_HASH_VERSION,
        NODEPOOL_HASH_VERSION,
        nodepool_hash(nodepool),
    ):
        return NODEPOOL_DRIFTED, f"NodePool {nodepool.name} template changed since the node was launched"
    labels = effective_labels(nodeclaim, node_labels, instance_types)
    violated = Requirements.from_labels(labels).compatible(nodepool.requirements)
    if violated is not None:
        return (
            REQUIREMENTS_DRIFTED,
            f"node no longer satisfies NodePool {nodepool.name} requirements: {violated}",
        )
    if nodeclass is not None and _stamp_differs(
        annotations,
        NODECLASS_HASH_ANNOTATION,
        NODECLASS_HASH_VERSION_ANNOTATION,
        NODECLASS_HASH_VERSION,
        nodeclass_hash(nodeclass),
    ):
        name = (nodeclass.get("metadata") or {}).get("name", "")
        return NODECLASS_DRIFTED, f"EC2NodeClass {name} changed since the node was launched"
    created = nodeclaim.creation_timestamp
    if (
        instance_types
        and created is not None
        and now - created > INSTANCE_TYPE_DRIFT_MIN_AGE
        and _instance_type_missing(labels, instance_types)
    ):
        return INSTANCE_TYPE_NOT_FOUND, f"instance type {labels.get(wk.INSTANCE_TYPE)!r} is no longer offered"
    drifted = nodeclaim.conditions.get("Drifted")
    if drifted is not None and drifted.is_true:
        reason = drifted.reason or "Drifted"
        return reason, drifted.message or reason
    return None
