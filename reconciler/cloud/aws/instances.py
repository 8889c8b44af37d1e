"""EC2 instances as the provider sees them: provider IDs and DescribeInstances records."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from reconciler.cloud.aws.tags import NODECLAIM_TAG, NODEPOOL_TAG, tags_of

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

    @property
    def provider_id(self) -> str:
        return provider_id(self.zone, self.id)

    @property
    def nodeclaim(self) -> str:
        return self.tags.get(NODECLAIM_TAG, "")

    @property
    def nodepool(self) -> str:
        return self.tags.get(NODEPOOL_TAG, "")


def record_from_ec2(item: Mapping[str, Any]) -> InstanceRecord:
    """From one ``Reservations[].Instances[]`` item of DescribeInstances."""
    return InstanceRecord(
        id=str(item["InstanceId"]),
        instance_type=str(item.get("InstanceType", "")),
        zone=str((item.get("Placement") or {}).get("AvailabilityZone", "")),
        capacity_type="spot" if item.get("InstanceLifecycle") == "spot" else "on-demand",
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
