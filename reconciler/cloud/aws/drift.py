"""Drift of a launched instance from its EC2NodeClass (pure).

Checked in Karpenter's order, cheapest first: AMI (the instance's image is not
the AMI the NodeClass now maps its type to), security groups (the instance's
set differs from the resolved set), subnet (the instance's subnet is no longer
selected). The static-field hash drift (``NodeClassDrift``) compares NodeClaim
annotations and is computed by ``static_hash``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from reconciler.cloud.aws.instances import InstanceRecord
from reconciler.cloud.aws.nodeclass import ResolvedNodeClass

AMI_DRIFT = "AMIDrift"
SECURITY_GROUP_DRIFT = "SecurityGroupDrift"
SUBNET_DRIFT = "SubnetDrift"
NODECLASS_DRIFT = "NodeClassDrift"
HASH_ANNOTATION = "karpenter.k8s.aws/ec2nodeclass-hash"
HASH_VERSION_ANNOTATION = "karpenter.k8s.aws/ec2nodeclass-hash-version"
HASH_VERSION = "v6"
# Fields whose change is detected through resolution (AMIs, subnets, SGs), not through the hash.
_DYNAMIC_FIELDS = frozenset(
    {
        "subnetSelectorTerms",
        "securityGroupSelectorTerms",
        "capacityReservationSelectorTerms",
        "amiSelectorTerms",
        "ipPrefixCount",
        "amiFamily",
    }
)


def drift_reason(
    record: InstanceRecord, resolved: ResolvedNodeClass, type_labels: Mapping[str, str]
) -> str | None:
    if resolved.amis is not None:
        ami = resolved.amis.for_labels(type_labels) if type_labels else None
        allowed = {ami.id} if ami else {a.id for a in resolved.amis.amis}
        if record.image_id and record.image_id not in allowed:
            return AMI_DRIFT
    if resolved.security_groups and set(record.security_group_ids) != {
        g.id for g in resolved.security_groups
    }:
        return SECURITY_GROUP_DRIFT
    if resolved.subnets and record.subnet_id and record.subnet_id not in {s.id for s in resolved.subnets}:
        return SUBNET_DRIFT
    return None


def static_hash(spec: Mapping[str, Any], resolved_family: str, ca_bundle: str = "") -> str:
    """Hash of the EC2NodeClass fields that drift nodes when edited (stamped on NodeClaims at launch)."""
    hashed: dict[str, Any] = _normalise(
        {key: value for key, value in spec.items() if key not in _DYNAMIC_FIELDS}
    )
    hashed["resolvedAMIFamily"] = resolved_family
    if ca_bundle:
        hashed["caBundle"] = ca_bundle
    digest = hashlib.sha256(json.dumps(hashed, sort_keys=True, default=str).encode()).hexdigest()
    return str(int(digest[:16], 16))


def nodeclass_drifted(
    nodeclaim_annotations: Mapping[str, str], nodeclass_annotations: Mapping[str, str]
) -> bool:
    """Static drift: hashes differ and both were computed with the same hash version."""
    if nodeclaim_annotations.get(HASH_VERSION_ANNOTATION) != nodeclass_annotations.get(
        HASH_VERSION_ANNOTATION
    ):
        return False
    return nodeclaim_annotations.get(HASH_ANNOTATION) != nodeclass_annotations.get(HASH_ANNOTATION)


def _normalise(value: Any) -> Any:
    """Zero values are ignored and lists compare as sets, so cosmetic edits do not drift nodes."""
    if isinstance(value, Mapping):
        return {k: _normalise(v) for k, v in sorted(value.items()) if v not in (None, "", [], {}, 0, False)}
    if isinstance(value, list):
        return sorted(
            (_normalise(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True, default=str)
        )
    return value
