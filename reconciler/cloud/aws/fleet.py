"""CreateFleet: choosing offerings, building the request, reading the answer. Pure functions.

One NodeClaim = one ``instant`` fleet of capacity 1. Spot uses
``price-capacity-optimized``, on-demand ``lowest-price``. Overrides cover every
allowed (instance type x zone) offering, at most 60 types, each pinned to the
zone's subnet with the most free addresses and to the AMI its launch template
carries. Overrides are listed cheapest first, ties in the order of the
NodeClaim's instance-type options (the scheduler's), which is also what a
lowest-price fleet picks; nothing here relies on the order being honoured on
EC2 (moto's CreateFleet launches the first override, so there the order is
the outcome, and it is the simulated cloud's choice).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.cloud.types import InstanceType, LaunchRequest, Offering, prefer_generic

MAX_INSTANCE_TYPES = 60
# Fleet error codes that mean "this offering has no capacity now" (cached for 3 minutes).
ICE_ERROR_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "MaxSpotInstanceCountExceeded",
        "VcpuLimitExceeded",
        "UnfulfillableCapacity",
        "Unsupported",
        "InsufficientFreeAddressesInSubnet",
        "MaxFleetCountExceeded",
        "ReservationCapacityExceeded",
    }
)
SUBNET_EXHAUSTED = "InsufficientFreeAddressesInSubnet"
SPOT_SLR_MISSING = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"


@dataclass(slots=True, frozen=True)
class Candidate:
    instance_type: InstanceType
    offering: Offering


@dataclass(slots=True, frozen=True)
class Override:
    instance_type: str
    zone: str
    subnet_id: str
    image_id: str
    price: float


@dataclass(slots=True, frozen=True)
class LaunchedInstance:
    instance_id: str
    instance_type: str
    zone: str
    capacity_type: str
    subnet_id: str = ""
    image_id: str = ""


@dataclass(slots=True, frozen=True)
class FleetError:
    code: str
    message: str
    instance_type: str = ""
    zone: str = ""
    subnet_id: str = ""
    capacity_type: str = ""

    @property
    def is_capacity_error(self) -> bool:
        return self.code in ICE_ERROR_CODES


def choose_capacity_type(request: LaunchRequest, candidates: Sequence[Candidate]) -> str | None:
    """Spot when allowed and offered, else on-demand (reserved capacity is not supported here)."""
    offered = {c.offering.capacity_type for c in candidates}
    for capacity_type in ("spot", "on-demand"):
        if capacity_type in offered and request.allows_capacity_type(capacity_type):
            return capacity_type
    return None


def candidates_for(
    request: LaunchRequest,
    instance_types: Mapping[str, InstanceType],
    launchable_zones: set[str],
) -> list[Candidate]:
    """Available offerings of the requested types within the allowed zones and capacity types.

    Metal, GPU and accelerator types are dropped while a generic type can launch."""
    by_type: dict[str, list[Candidate]] = {}
    for name in request.instance_types:
        instance_type = instance_types.get(name)
        if instance_type is None:
            continue
        for offering in instance_type.offerings:
            if not offering.available or offering.zone not in launchable_zones or not request.allows(offering):
                continue
            by_type.setdefault(name, []).append(Candidate(instance_type, offering))
    launchable = prefer_generic([found[0].instance_type for found in by_type.values()])
    return [candidate for t in launchable for candidate in by_type[t.name]]


def select_offerings(request: LaunchRequest, candidates: Sequence[Candidate]) -> tuple[str, list[Candidate]]:
    """The capacity type to launch and its offerings, cheapest first, at most 60 instance types.

    When spot and on-demand are both allowed, spot offerings dearer than the
    cheapest on-demand offering are dropped (Karpenter's SpotOfferingFilter).
    """
    capacity_type = choose_capacity_type(request, candidates)
    if capacity_type is None:
        return "", []
    chosen = [c for c in candidates if c.offering.capacity_type == capacity_type]
    if capacity_type == "spot":
        on_demand = [c.offering.price for c in candidates if c.offering.capacity_type == "on-demand"]
        if on_demand:
            ceiling = min(on_demand)
            cheaper = [c for c in chosen if c.offering.price <= ceiling]
            chosen = cheaper or chosen
    position = {name: index for index, name in enumerate(request.instance_types)}
    chosen.sort(
        key=lambda c: (
            c.offering.price, position.get(c.instance_type.name, len(position)), c.instance_type.name, c.offering.zone
        )
    )
    kept: list[str] = []
    for candidate in chosen:
        if candidate.instance_type.name not in kept:
            kept.append(candidate.instance_type.name)
    allowed = set(kept[:MAX_INSTANCE_TYPES])
    return capacity_type, [c for c in chosen if c.instance_type.name in allowed]


def create_fleet_request(
    capacity_type: str,
    overrides_by_template: Mapping[str, Sequence[Override]],
    tag_specifications: Sequence[Mapping[str, Any]],
    context: str | None = None,
    client_token: str = "",
) -> dict[str, Any]:
    request: dict[str, Any] = {
        "Type": "instant",
        "TargetCapacitySpecification": {"TotalTargetCapacity": 1, "DefaultTargetCapacityType": capacity_type},
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": template, "Version": "$Latest"},
                "Overrides": [
                    {
                        "InstanceType": o.instance_type,
                        "SubnetId": o.subnet_id,
                        "AvailabilityZone": o.zone,
                        "ImageId": o.image_id,
                    }
                    for o in overrides
                ],
            }
            for template, overrides in overrides_by_template.items()
        ],
        "TagSpecifications": [dict(t) for t in tag_specifications],
    }
    if capacity_type == "spot":
        request["SpotOptions"] = {"AllocationStrategy": "price-capacity-optimized"}
    else:
        request["OnDemandOptions"] = {"AllocationStrategy": "lowest-price"}
    if context:
        request["Context"] = context
    if client_token:
        request["ClientToken"] = client_token  # EC2 idempotency: a repeat returns the first answer
    return request


def parse_fleet_response(
    response: Mapping[str, Any], capacity_type: str, overrides: Sequence[Override]
) -> tuple[list[LaunchedInstance], list[FleetError]]:
    """Instances launched and per-offering errors, with zones mapped back through the overrides."""
    zone_of_subnet = {o.subnet_id: o.zone for o in overrides}
    image_of = {(o.instance_type, o.zone): o.image_id for o in overrides}
    launched = []
    for group in response.get("Instances") or []:
        override = (group.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
        instance_type = str(group.get("InstanceType") or override.get("InstanceType", ""))
        subnet = str(override.get("SubnetId", ""))
        zone = str(override.get("AvailabilityZone") or zone_of_subnet.get(subnet, ""))
        lifecycle = str(group.get("Lifecycle") or capacity_type)
        for instance_id in group.get("InstanceIds") or []:
            launched.append(
                LaunchedInstance(
                    str(instance_id),
                    instance_type,
                    zone,
                    lifecycle,
                    subnet,
                    str(override.get("ImageId") or image_of.get((instance_type, zone), "")),
                )
            )
    errors = []
    for error in response.get("Errors") or []:
        override = (error.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
        subnet = str(override.get("SubnetId", ""))
        errors.append(
            FleetError(
                code=str(error.get("ErrorCode", "")),
                message=str(error.get("ErrorMessage", "")),
                instance_type=str(override.get("InstanceType", "")),
                zone=str(override.get("AvailabilityZone") or zone_of_subnet.get(subnet, "")),
                subnet_id=subnet,
                capacity_type=str(error.get("Lifecycle") or capacity_type),
            )
        )
    return launched, errors
