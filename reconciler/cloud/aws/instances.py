"""EC2 instances as the provider sees them: provider IDs and DescribeInstances records."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from reconciler.cloud.aws.tags import NODECLAIM_TAG, NODEPOOL_TAG, tags_of
from reconciler.model import labels as wk

PROVIDER_ID_PREFIX = "aws:///"
# Instances the orphan collector and list() consider alive (terminated ones are gone for good).
ACTIVE_STATES = ("pending", "running", "stopping", "stopped", "shutting-down")


def provider_id(zone: str, instance_id: str) -> str:
    return f"{PROVIDER_ID_PREFIX}{zone}/{instance_id}"


def parse_provider_id(value: str) -> tuple[str, str]:
    """(zone, instance id) from ``aws:///<zone>/<instance-id>``."""
    if not value.startswith(PROVIDER_ID_PREFIX):
        raise ValueError(f"providerID {value!r} is not an AWS provider ID (aws:///<zone>/<instance-id>)")
    zone, _, instance_id = value[len(PROVIDER_ID_PREFIX) :].rpartition("/")
    if not instance_id.startswith("i-"):
        raise ValueError(f"providerID {value!r} does not end in an instance ID")
    return zone, instance_id


@dataclass(slots=True, frozen=True)
class InstanceRecord:
    id: str
    instance_type: str
    zone: str
    capacity_type: str
    state: str
    launch_time: datetime | None
    image_id: str = ""
    subnet_id: str = ""
    security_group_ids: tuple[str, ...] = ()
    tags: Mapping[str, str] = field(default_factory=dict)
    instance_profile: str = ""  # name of the attached IAM instance profile
    zone_id: str = ""
    # Set for instances launched into a capacity reservation (capacity type ``reserved``).
    capacity_reservation_id: str = ""
    reservation_type: str = ""  # default | capacity-block
    interruptible: bool = False

    def reservation_labels(self) -> dict[str, str]:
        return wk.reservation_labels(self.capacity_reservation_id, self.reservation_type, self.interruptible)

    @property
    def provider_id(self) -> str:
        return provider_id(self.zone, self.id)

    @property
    def nodeclaim(self) -> str:
        return self.tags.get(NODECLAIM_TAG, "")

    @property
    def nodepool(self) -> str:
        return self.tags.get(NODEPOOL_TAG, "")


def capacity_type_of_instance(item: Mapping[str, Any]) -> str:
    """Spot, reserved (in a capacity reservation Karpenter targeted: preference ``capacity-reservations-only``;
    an instance that merely matched an *open* reservation stays on-demand, as upstream), else on-demand."""
    if item.get("InstanceLifecycle") == "spot" or item.get("SpotInstanceRequestId"):
        return "spot"
    preference = (item.get("CapacityReservationSpecification") or {}).get("CapacityReservationPreference")
    if item.get("CapacityReservationId") and preference == "capacity-reservations-only":
        return wk.CAPACITY_TYPE_RESERVED
    return "on-demand"


def record_from_ec2(item: Mapping[str, Any]) -> InstanceRecord:
    """From one ``Reservations[].Instances[]`` item of DescribeInstances."""
    capacity_type = capacity_type_of_instance(item)
    reserved = capacity_type == wk.CAPACITY_TYPE_RESERVED
    lifecycle = item.get("InstanceLifecycle")
    return InstanceRecord(
        capacity_reservation_id=str(item.get("CapacityReservationId", "")) if reserved else "",
        reservation_type=(
            (wk.RESERVATION_TYPE_CAPACITY_BLOCK if lifecycle == "capacity-block" else wk.RESERVATION_TYPE_DEFAULT)
            if reserved else ""
        ),
        interruptible=reserved and lifecycle == "interruptible-capacity-reservation",
        id=str(item["InstanceId"]),
        instance_type=str(item.get("InstanceType", "")),
        zone=str((item.get("Placement") or {}).get("AvailabilityZone", "")),
        capacity_type=capacity_type,
        state=str((item.get("State") or {}).get("Name", "")),
        launch_time=item.get("LaunchTime"),
        image_id=str(item.get("ImageId", "")),
        subnet_id=str(item.get("SubnetId", "")),
        security_group_ids=tuple(sorted(str(g["GroupId"]) for g in item.get("SecurityGroups") or [])),
        tags=tags_of(item),
        instance_profile=str((item.get("IamInstanceProfile") or {}).get("Arn", "")).rsplit("/", 1)[-1],
        zone_id=str((item.get("Placement") or {}).get("AvailabilityZoneId", "")),
    )


def records_from_reservations(reservations: list[Mapping[str, Any]]) -> list[InstanceRecord]:
    return [record_from_ec2(item) for r in reservations for item in r.get("Instances") or []]
