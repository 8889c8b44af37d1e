"""Patches that make an in-process moto answer CreateFleet more like EC2 (offline simulation and tests).

moto has no placement groups (``install_placement_group_patch`` adds them) and no capacity
reservations (``install_capacity_reservation_patch``, see its section); ``install_tag_lookup_patch`` makes
its per-resource tag lookup linear instead of a scan of every tag.
moto's CreateFleet never returns ``Errors[]`` and ignores the launch template's
security groups. ``install_fleet_patch`` fixes both inside this process: a
``FleetFaults`` source decides per-override errors (insufficient capacity and
friends, answered in EC2's shape with the failed overrides left out), and fleet
instances get their template's ``SecurityGroupIds``. Nothing in the provider
depends on these patches; they only give it AWS-shaped answers to react to.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol


class FleetFaults(Protocol):
    """Decides injected CreateFleet errors per override (moto itself never returns ``Errors[]``)."""

    def fleet_error(self, capacity_type: str, instance_type: str, zone: str) -> str | None: ...

    def on_fleet_call(self) -> None: ...


@dataclass(slots=True)
class CapacityShortages:
    """Offerings with no capacity: CreateFleet answers ``InsufficientInstanceCapacity`` for them."""

    offerings: set[tuple[str, str, str]] = field(default_factory=set)  # (capacity type, type, zone)
    fleet_calls: int = 0

    def fleet_error(self, capacity_type: str, instance_type: str, zone: str) -> str | None:
        if (capacity_type, instance_type, zone) in self.offerings:
            return "InsufficientInstanceCapacity"
        return None

    def on_fleet_call(self) -> None:
        self.fleet_calls += 1


class _FleetPatchState:
    installed = False
    security_groups = True
    faults: FleetFaults | None = None
    tokens: dict[str, tuple[str, Any]] = {}  # ClientToken -> (request fingerprint, first answer)
    tag_search_delay = 0.0  # seconds a new instance stays out of tag-filtered DescribeInstances answers


def set_tag_search_delay(seconds: float) -> None:
    """EC2's eventual consistency: instances younger than ``seconds`` are left out of DescribeInstances
    answers that filter on tags (``tag:<key>``, ``tag-key``); a lookup by instance ID still finds them."""
    _FleetPatchState.tag_search_delay = max(0.0, seconds)


def set_fleet_faults(faults: FleetFaults | None) -> None:
    """Route this process's moto CreateFleet calls through ``faults`` (None = no injected errors)."""
    _FleetPatchState.faults = faults


def install_fleet_patch(faithful_security_groups: bool = True) -> None:
    """Patch moto's CreateFleet (idempotent) to answer AWS-shaped ``Errors[]`` from ``set_fleet_faults``
    and, when ``faithful_security_groups``, to give instances their launch template's security groups
    (moto otherwise puts every fleet instance in the default group)."""
    _FleetPatchState.security_groups = faithful_security_groups
    install_placement_group_patch()
    install_tag_lookup_patch()
    if _FleetPatchState.installed:
        return
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError
    from moto.ec2.models.fleets import FleetsBackend
    from moto.ec2.models.instances import InstanceBackend
    from moto.ec2.responses.fleets import Fleets

    original_backend = FleetsBackend.create_fleet
    original_response = Fleets.create_fleet
    original_describe = InstanceBackend.describe_instances

    def describe_instances(self: Any, filters: Any = None) -> Any:
        reservations = original_describe(self, filters)
        delay = _FleetPatchState.tag_search_delay
        if not delay or not filters or not any(str(key).startswith("tag") for key in filters):
            return reservations
        return _visible(reservations, delay)

    def idempotent_create_fleet(self: Any) -> Any:
        token = self._get_param("ClientToken")
        if not token:
            return response_create_fleet(self)
        fingerprint = json.dumps([self._get_param(key) for key in _FLEET_PARAMETERS], sort_keys=True, default=str)
        known = _FleetPatchState.tokens.get(token)
        if known is not None:
            if known[0] != fingerprint:
                raise EC2ClientError("IdempotentParameterMismatch",
                                     f"The client token {token} was used with other parameters.")
            return known[1]
        answer = response_create_fleet(self)
        _FleetPatchState.tokens[token] = (fingerprint, answer)
        return answer

    def backend_create_fleet(self: Any, *args: Any, **kwargs: Any) -> Any:
        created = original_backend(self, *args, **kwargs)
        if _FleetPatchState.security_groups:
            _apply_template_security_groups(self, created)
        return created

    def response_create_fleet(self: Any) -> Any:
        faults = _FleetPatchState.faults
        if faults is None or self._get_param("DryRun"):  # a dry run only checks permissions
            return original_response(self)
        faults.on_fleet_call()
        capacity_type = self._get_param("TargetCapacitySpecification", {}).get("DefaultTargetCapacityType")
        errors, kept_configs = [], []
        for config in self._get_param("LaunchTemplateConfigs", []):
            kept = []
            for override in config.get("Overrides") or []:
                code = faults.fleet_error(
                    capacity_type, override.get("InstanceType"), override.get("AvailabilityZone")
                )
                if code is None:
                    kept.append(override)
                    continue
                errors.append(
                    {
                        "LaunchTemplateAndOverrides": {
                            "LaunchTemplateSpecification": config["LaunchTemplateSpecification"],
                            "Overrides": override,
                        },
                        "Lifecycle": capacity_type,
                        "ErrorCode": code,
                        "ErrorMessage": f"{code} (injected)",
                    }
                )
            if kept:
                kept_configs.append({**config, "Overrides": kept})
        if not kept_configs:
            return ActionResult(
                {"FleetId": "fleet-00000000-0000-0000-0000-000000000000", "Instances": [], "Errors": errors}
            )
        real_get = self._get_param
        previous = self.__dict__.get("_get_param")  # another patch's override, restored after
        self._get_param = lambda name, if_none=None: (  # only the kept overrides reach moto
            kept_configs if name == "LaunchTemplateConfigs" else real_get(name, if_none)
        )
        try:
            result = original_response(self)
        finally:
            _restore_get_param(self, previous)
        if errors:
            result.result["Errors"] = errors  # type: ignore[index]  # moto types ActionResult.result as object
        return result

    # Patching moto's classes is the point of this module.
    FleetsBackend.create_fleet = backend_create_fleet  # type: ignore[method-assign]
    Fleets.create_fleet = idempotent_create_fleet  # type: ignore[method-assign]
    InstanceBackend.describe_instances = describe_instances  # type: ignore[method-assign]
    _FleetPatchState.installed = True


# What a CreateFleet ClientToken is bound to (EC2 refuses the token with any other values).
_FLEET_PARAMETERS = ("Type", "TargetCapacitySpecification", "LaunchTemplateConfigs", "OnDemandOptions", "SpotOptions",
                     "ReservedCapacityOptions")


def _visible(reservations: list[Any], delay: float) -> list[Any]:
    from moto.core.utils import utcnow

    cutoff = utcnow() - timedelta(seconds=delay)
    kept = []
    for reservation in reservations:
        instances = [i for i in reservation.instances if _launched(i) <= cutoff]
        if instances:
            visible = copy.copy(reservation)
            visible.instances = instances
            kept.append(visible)
    return kept


def _launched(instance: Any) -> datetime:
    launched = instance.launch_time
    if isinstance(launched, str):
        launched = datetime.fromisoformat(launched.replace("Z", "+00:00"))
    return launched.replace(tzinfo=None) if launched.tzinfo else launched


def _restore_get_param(response: Any, previous: Any) -> None:
    """Undo an instance-level ``_get_param`` override (patches wrap each other: restore, never just delete)."""
    if previous is None:
        response.__dict__.pop("_get_param", None)
    else:
        response._get_param = previous


def _apply_template_security_groups(backend: Any, fleet: Any) -> None:
    launched = [(item["instance"], item.get("launch_spec")) for item in fleet.on_demand_instances]
    launched += [(request.instance, request.launch_spec) for request in fleet.spot_requests]
    for instance, launch_spec in launched:
        template_spec = getattr(launch_spec, "launch_template_spec", None) or {}
        if not template_spec.get("LaunchTemplateId"):
            continue
        template = backend.get_launch_template(template_spec["LaunchTemplateId"])
        data = template.get_version(template_spec.get("Version", template.latest_version_number)).data
        group_ids = data.get("SecurityGroupIds") or []
        if group_ids:
            backend.modify_instance_security_groups(instance.id, list(group_ids))


# Placement groups moto does not model: (account, region) -> name -> group, as DescribePlacementGroups answers.
_PLACEMENT_GROUPS: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}


# Wildcards of EC2 filters: an ID holding one is looked up by moto's own filter match, as before.
_FILTER_WILDCARDS = frozenset("*?[")


def install_tag_lookup_patch() -> None:
    """Look up an EC2 resource's tags by its ID in moto's tag table (idempotent).

    moto answers ``resource.get_tags()`` (called per resource and per filter while it filters and serializes
    DescribeSubnets, DescribeSecurityGroups, DescribeInstances...) with ``describe_tags(resource-id=ID)``,
    which compiles a pattern and scans every tag of the account: quadratic in the number of tagged resources.
    The exact-ID lookup gives the same list (same keys, values, order and resource type); only speed differs.
    """
    from moto.ec2.models.core import TaggedEC2Resource
    from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, get_prefix

    if getattr(TaggedEC2Resource.get_tags, "_adze_by_id", False):
        return
    original = TaggedEC2Resource.get_tags

    def get_tags(self: Any) -> list[dict[str, str]]:
        resource_id = getattr(self, "id", None)
        if not resource_id or not isinstance(resource_id, str) or _FILTER_WILDCARDS & set(resource_id):
            return original(self)
        tags = self.ec2_backend.tags.get(resource_id)
        if not tags:
            return []
        resource_type = EC2_PREFIX_TO_RESOURCE.get(get_prefix(resource_id), "")
        return [{"resource_id": resource_id, "key": key, "value": value, "resource_type": resource_type}
                for key, value in list(tags.items())]

    get_tags._adze_by_id = True  # type: ignore[attr-defined]
    TaggedEC2Resource.get_tags = get_tags  # type: ignore[method-assign]


def install_placement_group_patch() -> None:
    """Give moto's EC2 CreatePlacementGroup / DescribePlacementGroups / DeletePlacementGroup (idempotent)."""
    from moto.core.responses import ActionResult, EmptyResult
    from moto.ec2.exceptions import EC2ClientError
    from moto.ec2.responses import EC2Response

    if getattr(EC2Response, "describe_placement_groups", None) is not None:
        return

    def groups(self: Any) -> dict[str, dict[str, Any]]:
        return _PLACEMENT_GROUPS.setdefault((self.current_account, self.region), {})

    def create_placement_group(self: Any) -> Any:
        name = str(self._get_param("GroupName"))
        if name in groups(self):
            raise EC2ClientError("InvalidPlacementGroup.Duplicate", f"The placement group '{name}' already exists.")
        strategy = str(self._get_param("Strategy", "cluster"))
        group: dict[str, Any] = {
            "GroupName": name, "GroupId": "pg-" + hashlib.sha256(f"{self.region}/{name}".encode()).hexdigest()[:17],
            "Strategy": strategy, "State": "available",
            "GroupArn": f"arn:aws:ec2:{self.region}:{self.current_account}:placement-group/{name}",
        }
        if strategy == "partition":
            group["PartitionCount"] = int(self._get_param("PartitionCount", 2))
        if strategy == "spread":
            group["SpreadLevel"] = str(self._get_param("SpreadLevel", "rack"))
        groups(self)[name] = group
        return ActionResult({"PlacementGroup": group})

    def describe_placement_groups(self: Any) -> Any:
        names, ids = self._get_param("GroupNames", []), self._get_param("GroupIds", [])
        filters = self._filters_from_querystring()
        found = list(groups(self).values())
        for wanted, key, code in ((names, "GroupName", "InvalidPlacementGroup.Unknown"),
                                  (ids, "GroupId", "InvalidPlacementGroupId.NotFound")):
            if wanted:
                missing = set(wanted) - {g[key] for g in found}
                if missing:
                    raise EC2ClientError(code, f"The Placement Group '{sorted(missing)[0]}' is unknown.")
                found = [g for g in found if g[key] in wanted]
        for name, key in (("state", "State"), ("strategy", "Strategy"), ("group-name", "GroupName")):
            if name in filters:
                found = [g for g in found if g[key] in filters[name]]
        return ActionResult({"PlacementGroups": found})

    def delete_placement_group(self: Any) -> Any:
        groups(self).pop(str(self._get_param("GroupName")), None)
        return EmptyResult()

    EC2Response.create_placement_group = create_placement_group  # type: ignore[attr-defined]
    EC2Response.describe_placement_groups = describe_placement_groups  # type: ignore[attr-defined]
    EC2Response.delete_placement_group = delete_placement_group  # type: ignore[attr-defined]


# -- capacity reservations -----------------------------------------------------------------------------------
#
# moto has no capacity reservations. ``install_capacity_reservation_patch`` adds what the provider uses:
# DescribeCapacityReservations (IDs and the filters Karpenter sends), reservations seeded in-process
# (``seed_capacity_reservation``: ODCRs and capacity blocks, which EC2 sells through other APIs), and
# targeted launches: a fleet whose launch template targets a reservation launches into it (the instance
# carries ``CapacityReservationId``, its specification and, for a block, lifecycle ``capacity-block``;
# one instance fewer is left), or answers ``ReservationCapacityExceeded`` when it is full; a terminated
# instance gives its place back. The fleet's ``capacity-block`` / ``reserved-capacity`` target types,
# which moto ignores, launch as on-demand does.


def _reservations(backend: Any) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] | None = getattr(backend, "_adze_capacity_reservations", None)
    if found is None:
        found = {}
        backend._adze_capacity_reservations = found
    return found


def seed_capacity_reservation(account_id: str, region: str, reservation: Any) -> None:
    """Create ``reservation`` (a ``capacityreservation.CapacityReservation``) in moto's EC2 backend, in-process."""
    from moto.ec2.models import ec2_backends

    install_capacity_reservation_patch()
    backend = ec2_backends[account_id][region]
    item: dict[str, Any] = {
        "CapacityReservationId": reservation.id,
        "OwnerId": reservation.owner_id or account_id,
        "CapacityReservationArn": f"arn:aws:ec2:{region}:{account_id}:capacity-reservation/{reservation.id}",
        "InstanceType": reservation.instance_type,
        "InstancePlatform": "Linux/UNIX",
        "AvailabilityZone": reservation.zone,
        "Tenancy": "default",
        "TotalInstanceCount": reservation.total or reservation.available,
        "AvailableInstanceCount": reservation.available,
        "EbsOptimized": True,
        "State": reservation.state,
        "InstanceMatchCriteria": reservation.instance_match_criteria,
        "EndDateType": "limited" if reservation.end_time else "unlimited",
        "ReservationType": reservation.reservation_type,
        "Interruptible": reservation.interruptible,
        "Tags": [{"Key": k, "Value": v} for k, v in sorted(reservation.tags.items())],
    }
    if reservation.end_time is not None:
        item["EndDate"] = reservation.end_time
    _reservations(backend)[reservation.id] = item


def _matches(item: dict[str, Any], filters: dict[str, list[str]]) -> bool:
    for name, values in filters.items():
        if name == "state" and item["State"] not in values:
            return False
        if name == "owner-id" and item["OwnerId"] not in values:
            return False
        if name == "instance-match-criteria" and item["InstanceMatchCriteria"] not in values:
            return False
        if name == "instance-type" and item["InstanceType"] not in values:
            return False
        if name == "availability-zone" and item["AvailabilityZone"] not in values:
            return False
        tags = {t["Key"]: t["Value"] for t in item["Tags"]}
        if name == "tag-key" and not set(values) & set(tags):
            return False
        if name.startswith("tag:") and tags.get(name[4:]) not in values:
            return False
    return True


class _ReservationPatchState:
    installed = False


def install_capacity_reservation_patch() -> None:
    """Teach this process's moto capacity reservations (idempotent; see the section comment)."""
    if _ReservationPatchState.installed:
        return
    from moto.core.responses import ActionResult
    from moto.ec2.exceptions import EC2ClientError
    from moto.ec2.models.instances import InstanceBackend
    from moto.ec2.responses import EC2Response
    from moto.ec2.responses.fleets import Fleets

    def describe_capacity_reservations(self: Any) -> Any:
        known = _reservations(self.ec2_backend)
        ids = self._get_param("CapacityReservationIds", [])
        missing = [i for i in ids if i not in known]
        if missing:
            raise EC2ClientError("InvalidCapacityReservationId.NotFound",
                                 f"The capacity reservation ID '{missing[0]}' does not exist")
        filters = self._filters_from_querystring()
        items = [known[i] for i in ids] if ids else list(known.values())
        return ActionResult({"CapacityReservations": [i for i in items if _matches(i, filters)]})

    original_fleet = Fleets.create_fleet

    def create_fleet(self: Any) -> Any:
        backend = self.ec2_backend
        known = _reservations(backend)
        target = self._get_param("TargetCapacitySpecification", {}).get("DefaultTargetCapacityType")
        kept, errors, targeted = [], [], {}
        for config in self._get_param("LaunchTemplateConfigs", []):
            reservation_id, lifecycle = _template_reservation(backend, config.get("LaunchTemplateSpecification") or {})
            item = known.get(reservation_id or "")
            if reservation_id is None:
                kept.append(config)
                continue
            usable = [o for o in config.get("Overrides") or []
                      if item is not None and item["State"] == "active" and item["AvailableInstanceCount"] > 0
                      and o.get("InstanceType") == item["InstanceType"]
                      and o.get("AvailabilityZone", item["AvailabilityZone"]) == item["AvailabilityZone"]]
            for override in config.get("Overrides") or []:
                if override in usable:
                    continue
                errors.append({
                    "LaunchTemplateAndOverrides": {"LaunchTemplateSpecification": config["LaunchTemplateSpecification"],
                                                   "Overrides": override},
                    "Lifecycle": "on-demand", "ErrorCode": "ReservationCapacityExceeded",
                    "ErrorMessage": f"capacity reservation {reservation_id} has no instance left for this launch",
                })
            if usable:
                kept.append({**config, "Overrides": usable})
                targeted[str(config["LaunchTemplateSpecification"].get("LaunchTemplateName"))] = (reservation_id,
                                                                                                  lifecycle)
        if not kept:
            return ActionResult({"FleetId": "fleet-00000000-0000-0000-0000-000000000000", "Instances": [],
                                 "Errors": errors})
        real_get = self._get_param

        def get(name: str, if_none: Any = None) -> Any:
            if name == "LaunchTemplateConfigs":
                return kept
            if name == "TargetCapacitySpecification" and target in ("capacity-block", "reserved-capacity"):
                return {**real_get(name, if_none), "DefaultTargetCapacityType": "on-demand"}
            return real_get(name, if_none)

        previous = self.__dict__.get("_get_param")
        self._get_param = get
        try:
            result = original_fleet(self)
        finally:
            _restore_get_param(self, previous)
        answer: dict[str, Any] = result.result  # type: ignore[assignment]  # moto types it as object
        for group in answer.get("Instances") or []:
            template = ((group.get("LaunchTemplateAndOverrides") or {}).get("LaunchTemplateSpecification") or {})
            name = template.get("LaunchTemplateName") or backend.get_launch_template(
                template.get("LaunchTemplateId")).name
            if name not in targeted:
                continue
            reservation_id, lifecycle = targeted[name]
            for instance_id in group.get("InstanceIds") or []:
                instance = backend.get_instance(instance_id)
                instance.capacity_reservation_id = reservation_id
                instance.capacity_reservation_specification = {
                    "CapacityReservationPreference": "capacity-reservations-only",
                    "CapacityReservationTarget": {"CapacityReservationId": reservation_id},
                }
                if lifecycle:
                    instance.lifecycle = lifecycle
                known[reservation_id]["AvailableInstanceCount"] -= 1
        if errors:
            answer["Errors"] = [*(answer.get("Errors") or []), *errors]
        return result

    original_terminate = InstanceBackend.terminate_instances

    def terminate_instances(self: Any, instance_ids: list[str]) -> Any:
        terminated = original_terminate(self, instance_ids)
        known = _reservations(self)
        for instance, previous in terminated:
            reservation_id = getattr(instance, "capacity_reservation_id", None)
            if reservation_id in known and getattr(previous, "name", "") != "terminated":
                known[reservation_id]["AvailableInstanceCount"] += 1
        return terminated

    EC2Response.describe_capacity_reservations = describe_capacity_reservations  # type: ignore[attr-defined]
    Fleets.create_fleet = create_fleet  # type: ignore[method-assign]
    InstanceBackend.terminate_instances = terminate_instances  # type: ignore[method-assign]
    _ReservationPatchState.installed = True


def _template_reservation(backend: Any, spec: dict[str, Any]) -> tuple[str | None, str]:
    """The reservation a launch template targets (None: it targets none) and the lifecycle it launches with."""
    try:
        template = (backend.get_launch_template(spec["LaunchTemplateId"]) if spec.get("LaunchTemplateId")
                    else backend.get_launch_template_by_name(spec.get("LaunchTemplateName")))
    except Exception:
        return None, ""
    data = template.latest_version().data
    target = (data.get("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {}
    market = (data.get("InstanceMarketOptions") or {}).get("MarketType", "")
    lifecycle = market if market in ("capacity-block", "interruptible-capacity-reservation") else ""
    return target.get("CapacityReservationId"), lifecycle
