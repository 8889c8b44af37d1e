"""Drift of a launched instance from its EC2NodeClass (pure).

Checked in Karpenter's order, cheapest first: AMI (the instance's image is not
the AMI the NodeClass now maps its type to), security groups (the instance's
set differs from the resolved set), subnet (the instance's subnet is no longer
selected). The static-field hash drift (``NodeClassDrifted``) compares NodeClaim
annotations with ``provisioning.drift_hashes.nodeclass_hash`` and lives in ``disruption.drift_detection``.
"""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.cloud.aws.capacityreservation import CAPACITY_RESERVATION_DRIFT
from reconciler.cloud.aws.instances import InstanceRecord
from reconciler.cloud.aws.nodeclass import ResolvedNodeClass

AMI_DRIFT = "AMIDrift"
SECURITY_GROUP_DRIFT = "SecurityGroupDrift"
SUBNET_DRIFT = "SubnetDrift"


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
    selected = resolved.capacity_reservations
    if record.capacity_reservation_id and selected is not None and record.capacity_reservation_id not in {
        r.id for r in selected
    }:
        return CAPACITY_RESERVATION_DRIFT
    return None
