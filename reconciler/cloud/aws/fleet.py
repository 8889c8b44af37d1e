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
from reconciler.model import labels as wk

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
    """Reserved when allowed and offered, else spot, else on-demand (Karpenter's getCapacityType)."""
    offered = {c.offering.capacity_type for c in candidates}
    for capacity_type in ("reserved", "spot", "on-demand"):
        if capacity_type in offered and request.allows_capacity_type(capacity_type):
            return capacity_type
    return None


def candidates_for(
    request: LaunchRequest,
    instance_types: Mapping[str, InstanceType],
    launchable_zones: set[str],
) -> list[Candidate]:
    """Available offerings of the requested types within the allowed zones, capacity types and reservations."""
    found: list[Candidate] = []
    for name in request.instance_types:
        instance_type = instance_types.get(name)
        if instance_type is None:
            continue
        for offering in instance_type.offerings:
            if not offering.available or offering.zone not in launchable_zones or not request.allows(offering):
                continue
            found.append(Candidate(instance_type, offering))
    return found


# Which reservations a reserved launch tries first when several kinds are offered at the same price:
# ODCRs, then capacity blocks, then interruptible ODCRs (CreateFleet takes one market type per call).
_RESERVATION_PRIORITY = {
    (wk.RESERVATION_TYPE_DEFAULT, False): 0,
    (wk.RESERVATION_TYPE_CAPACITY_BLOCK, False): 1,
    (wk.RESERVATION_TYPE_DEFAULT, True): 2,
}


def reserved_candidates(candidates: Sequence[Candidate]) -> list[Candidate]:
    """The reserved offerings one CreateFleet call can target (Karpenter's reservation filters):

    * one kind of reservation: the kind with the cheapest offering (ties: ODCR, capacity block,
      interruptible ODCR), as a fleet takes a single market type;
    * a capacity block: only the single cheapest one, as a fleet takes one block;
    * per instance type and zone, the reservation with the most instances left (one override per pool).
    """
    reserved = [c for c in candidates if c.offering.capacity_type == wk.CAPACITY_TYPE_RESERVED]
    if not reserved:
        return []

    def kind(c: Candidate) -> tuple[str, bool]:
        return (c.offering.reservation_type or wk.RESERVATION_TYPE_DEFAULT, c.offering.interruptible)

    best = min(reserved, key=lambda c: (c.offering.price, _RESERVATION_PRIORITY.get(kind(c), 3)))
    chosen = [c for c in reserved if kind(c) == kind(best)]
    if kind(best)[0] == wk.RESERVATION_TYPE_CAPACITY_BLOCK:
        cheapest = min(chosen, key=lambda c: (c.offering.price, c.instance_type.name, c.offering.zone))
        return [cheapest]
    per_pool: dict[tuple[str, str], Candidate] = {}
    for candidate in chosen:
        pool = (candidate.instance_type.name, candidate.offering.zone)
        current = per_pool.get(pool)
        if current is None or candidate.offering.reservation_capacity > current.offering.reservation_capacity:
            per_pool[pool] = candidate
    return [c for c in chosen if per_pool[(c.instance_type.name, c.offering.zone)] is c]


def select_offerings(request: LaunchRequest, candidates: Sequence[Candidate]) -> tuple[str, list[Candidate]]:
    """The capacity type to launch and its offerings, cheapest first, at most 60 instance types.

    Reserved offerings, when allowed and offered, are narrowed to what one fleet can target
    (``reserved_candidates``); metal, GPU and accelerator types are then dropped while a generic type
    remains; when spot and on-demand are both allowed, spot offerings dearer than the cheapest
    on-demand offering are dropped (Karpenter's SpotOfferingFilter).
    """
    if request.allows_capacity_type(wk.CAPACITY_TYPE_RESERVED):
        reserved = reserved_candidates(candidates)
        candidates = reserved or candidates
    by_type: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        by_type.setdefault(candidate.instance_type.name, []).append(candidate)
    generic = prefer_generic([found[0].instance_type for found in by_type.values()])
    candidates = [candidate for t in generic for candidate in by_type[t.name]]
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


def target_capacity_type(capacity_type: str, chosen: Sequence[Candidate]) -> str:
    """CreateFleet's ``DefaultTargetCapacityType``: a capacity block launches as ``capacity-block``, an
    interruptible ODCR as ``reserved-capacity``, other ODCRs as ``on-demand`` (targeted by the template)."""
    if capacity_type != wk.CAPACITY_TYPE_RESERVED or not chosen:
        return capacity_type
    offering = chosen[0].offering
    if offering.reservation_type == wk.RESERVATION_TYPE_CAPACITY_BLOCK:
        return "capacity-block"
    return "reserved-capacity" if offering.interruptible else "on-demand"


def create_fleet_request(
    capacity_type: str,
    overrides_by_template: Mapping[str, Sequence[Override]],
    tag_specifications: Sequence[Mapping[str, Any]],
    context: str | None = None,
    client_token: str = "",
    *,
    target: str = "",
    prioritized: bool = False,
) -> dict[str, Any]:
    """``target``: the ``DefaultTargetCapacityType`` when it differs from ``capacity_type`` (reserved
    launches, see ``target_capacity_type``). ``prioritized``: NodeOverlays priced the offerings, so EC2
    follows their order (each override's ``Priority`` is its overlaid price; lower goes first) instead of
    its own prices: ``prioritized`` on-demand, ``capacity-optimized-prioritized`` spot, as upstream."""
    target = target or capacity_type
    request: dict[str, Any] = {
        "Type": "instant",
        "TargetCapacitySpecification": {"TotalTargetCapacity": 1, "DefaultTargetCapacityType": target},
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": template, "Version": "$Latest"},
                "Overrides": [
                    {
                        "InstanceType": o.instance_type,
                        "SubnetId": o.subnet_id,
                        "AvailabilityZone": o.zone,
                        "ImageId": o.image_id,
                        **({"Priority": o.price} if prioritized else {}),
                    }
                    for o in overrides
                ],
            }
            for template, overrides in overrides_by_template.items()
        ],
        "TagSpecifications": [dict(t) for t in tag_specifications],
    }
    if capacity_type == "spot":
        strategy = "capacity-optimized-prioritized" if prioritized else "price-capacity-optimized"
        request["SpotOptions"] = {"AllocationStrategy": strategy}
    elif target == "reserved-capacity":
        request["ReservedCapacityOptions"] = {"ReservationTypes": ["interruptible-capacity-reservation"]}
    elif target != "capacity-block":  # a capacity-block fleet takes no on-demand options
        request["OnDemandOptions"] = {"AllocationStrategy": "prioritized" if prioritized else "lowest-price"}
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
