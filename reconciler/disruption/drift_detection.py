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
4. **Capacity reservation** (``CapacityReservationDrift``): the node runs in a reservation its
   EC2NodeClass's status no longer lists (the selector terms changed or the reservation went away).
5. **Instance type gone** (``InstanceTypeNotFound``): once the NodeClaim is an
   hour old, its type or a matching offering is no longer offered.
6. A ``Drifted=True`` condition already on the NodeClaim (written from
   ``CloudProvider.is_drifted``: AMI, subnet, security group...).

The hashes themselves live in ``reconciler.provisioning.drift_hashes`` (provisioning stamps them too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from reconciler.cloud.aws.capacityreservation import CAPACITY_RESERVATION_DRIFT, status_reservation_ids
from reconciler.cloud.types import InstanceType
from reconciler.model import labels as wk
from reconciler.model.node import NodeClaim
from reconciler.model.nodepool import NodePool
from reconciler.model.requirements import Requirements
from reconciler.provisioning.drift_hashes import (
    NODECLASS_HASH_ANNOTATION,
    NODECLASS_HASH_VERSION,
    NODECLASS_HASH_VERSION_ANNOTATION,
    NODEPOOL_HASH_VERSION,
    nodeclass_hash,
    nodepool_hash,
)

NODEPOOL_DRIFTED = "NodePoolDrifted"
REQUIREMENTS_DRIFTED = "RequirementsDrifted"
NODECLASS_DRIFTED = "NodeClassDrifted"
INSTANCE_TYPE_NOT_FOUND = "InstanceTypeNotFound"

# Instance-type drift is only checked on NodeClaims older than this (the catalogue may lag a launch).
INSTANCE_TYPE_DRIFT_MIN_AGE = timedelta(hours=1)


def _stamp_differs(annotations: Mapping[str, str], key: str, version_key: str, version: str, current: str) -> bool:
    stamped = annotations.get(key)
    return stamped is not None and annotations.get(version_key) == version and stamped != current


# The pool's instance types as a list, or by name (what the disruption pass has at hand: no scan per node).
InstanceTypes = Sequence[InstanceType] | Mapping[str, InstanceType]


def _find_type(instance_types: InstanceTypes | None, name: str | None) -> InstanceType | None:
    if not instance_types or name is None:
        return None
    if isinstance(instance_types, Mapping):
        return instance_types.get(name)
    return next((it for it in instance_types if it.name == name), None)


def _instance_type_missing(labels: Mapping[str, str], instance_types: InstanceTypes) -> bool:
    match = _find_type(instance_types, labels.get(wk.INSTANCE_TYPE))
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
    nodeclaim: NodeClaim, node_labels: Mapping[str, str] | None, instance_types: InstanceTypes | None
) -> dict[str, str]:
    """NodeClaim labels, completed by the Node's and by the launched type's well-known labels."""
    labels: dict[str, str] = {}
    type_name = nodeclaim.labels.get(wk.INSTANCE_TYPE) or (node_labels or {}).get(wk.INSTANCE_TYPE)
    launched = _find_type(instance_types, type_name)
    if launched is not None:
        labels.update(launched.labels)
    labels.update(node_labels or {})
    labels.update(nodeclaim.labels)
    return labels


def drift_reason(
    nodepool: NodePool,
    nodeclaim: NodeClaim,
    *,
    now: datetime,
    instance_types: InstanceTypes | None = None,
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
    violated = Requirements.from_labels(labels).incompatibility(nodepool.requirements)
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
    reservation = labels.get(wk.CAPACITY_RESERVATION_ID)
    if reservation and nodeclass is not None:
        selected = status_reservation_ids(nodeclass)
        if selected is not None and reservation not in selected:
            name = (nodeclass.get("metadata") or {}).get("name", "")
            return (CAPACITY_RESERVATION_DRIFT,
                    f"capacity reservation {reservation} is no longer selected by EC2NodeClass {name}")
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
