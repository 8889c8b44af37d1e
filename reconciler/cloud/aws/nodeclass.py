"""EC2NodeClass resolution: subnets, security groups, AMIs, instance profile, capacity reservations, status.

Selector terms are ORed; the fields of one term are ANDed. A tag value ``*``
means "the key exists". The resolved view (``ResolvedNodeClass``) is what a
launch needs; ``status()`` renders it as the EC2NodeClass ``status`` with
Karpenter's condition types, for the NodeClass controller to write back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from reconciler.api.amifamily import AMIFamily, family_of_nodeclass, unsupported_settings
from reconciler.cloud.aws import placementgroup
from reconciler.cloud.aws import tags as owned
from reconciler.cloud.aws.allocatable import KubeletOverrides
from reconciler.cloud.aws.amis import AMIResolver, AMISelectionError, ResolvedAMIs
from reconciler.cloud.aws.capacityreservation import CapacityReservation
from reconciler.cloud.aws.clients import AwsCaller, error_code
from reconciler.cloud.aws.reservations import CapacityReservationProvider
from reconciler.model.meta import format_time

CONDITION_TYPES = (
    "SubnetsReady",
    "SecurityGroupsReady",
    "AMIsReady",
    "InstanceProfileReady",
    "PlacementGroupReady",
    "ValidationSucceeded",
)
# Conditions the dry-run validation needs settled first (upstream's DependenciesNotReady).
VALIDATION_DEPENDENCIES = ("SubnetsReady", "SecurityGroupsReady", "AMIsReady", "InstanceProfileReady")
UNSUPPORTED_CONFIGURATION = "UnsupportedKubeletConfiguration"
# Reported only with the ReservedCapacity gate on, as upstream.
RESERVATIONS_CONDITION = "CapacityReservationsReady"


class NodeClassError(ValueError):
    """A NodeClass that cannot be resolved; the message names the field."""


@dataclass(slots=True, frozen=True)
class Subnet:
    id: str
    zone: str
    zone_id: str
    available_ips: int


@dataclass(slots=True, frozen=True)
class SecurityGroup:
    id: str
    name: str


@dataclass(slots=True)
class ResolvedNodeClass:
    name: str
    spec: Mapping[str, Any]
    family: AMIFamily
    kubelet: KubeletOverrides
    user_tags: dict[str, str]
    subnets: list[Subnet] = field(default_factory=list)
    security_groups: list[SecurityGroup] = field(default_factory=list)
    amis: ResolvedAMIs | None = None
    instance_profile: str = ""
    placement_group: placementgroup.PlacementGroup | None = None
    errors: dict[str, str] = field(default_factory=dict)  # condition type -> message
    reasons: dict[str, str] = field(default_factory=dict)  # condition type -> reason, when not Not<Type>
    # None: the ReservedCapacity gate is off (no reservations, no CapacityReservationsReady condition).
    capacity_reservations: list[CapacityReservation] | None = None

    @property
    def ready(self) -> bool:
        return not self.errors

    @property
    def ami_version(self) -> str:
        """The AMI release the class selects: its alias's version, else one in a resolved AMI's name
        (Bottlerocket's ``bottlerocket-aws-k8s-1.33-x86_64-v1.46.0-431fe75a``)."""
        for term in self.spec.get("amiSelectorTerms") or []:
            alias = str((term or {}).get("alias") or "")
            if "@" in alias:
                return alias.partition("@")[2]
        for ami in self.amis.amis if self.amis else ():
            version = next((p for p in ami.name.split("-") if p.startswith("v") and "." in p), "")
            if version:
                return version
        return ""

    def placement(self) -> dict[str, str] | None:
        """The launch template's ``Placement`` for the selected placement group."""
        return {"GroupId": self.placement_group.id} if self.placement_group else None

    @property
    def zones(self) -> set[str]:
        return {subnet.zone for subnet in self.subnets}

    def status(self, now: datetime, generation: int = 0) -> dict[str, Any]:
        """The EC2NodeClass ``status`` block (conditions carry ``now`` as transition time)."""
        stamp = format_time(now)
        conditions = []
        types = CONDITION_TYPES if self.capacity_reservations is None else (*CONDITION_TYPES, RESERVATIONS_CONDITION)
        for condition in (*types, "Ready"):
            reason = self.reasons.get(condition, "Not" + condition)
            if condition == "Ready":
                message = "; ".join(f"{k}: {v}" for k, v in self.errors.items())
            else:
                message = self.errors.get(condition, "")
            if condition == "ValidationSucceeded" and not message and any(
                d in self.errors for d in VALIDATION_DEPENDENCIES
            ):
                message, reason = "Awaiting AMI, Instance Profile, Security Group, and Subnet resolution", (
                    "DependenciesNotReady"
                )
            conditions.append(
                {
                    "type": condition,
                    "status": "False" if message else "True",
                    "reason": reason if message else condition,
                    "message": message,
                    "lastTransitionTime": stamp,
                    "observedGeneration": generation,
                }
            )
        status: dict[str, Any] = {
            "subnets": [{"id": s.id, "zone": s.zone, "zoneID": s.zone_id} for s in self.subnets],
            "securityGroups": [{"id": g.id, "name": g.name} for g in self.security_groups],
            "amis": [ami.to_status() for ami in (self.amis.amis if self.amis else [])],
            "instanceProfile": self.instance_profile,
            "conditions": conditions,
        }
        if self.capacity_reservations:
            status["capacityReservations"] = [r.to_status(now) for r in self.capacity_reservations]
        return status


def selector_filters(
    term: Mapping[str, Any], *, id_filter: str, name_filter: str | None = None
) -> list[dict]:
    filters: list[dict[str, Any]] = []
    if term.get("id"):
        filters.append({"Name": id_filter, "Values": [str(term["id"])]})
    if name_filter and term.get("name"):
        filters.append({"Name": name_filter, "Values": [str(term["name"])]})
    for key, value in (term.get("tags") or {}).items():
        if value == "*":
            filters.append({"Name": "tag-key", "Values": [str(key)]})
        else:
            filters.append({"Name": f"tag:{key}", "Values": [str(value)]})
    return filters


def managed_profile_name(cluster: str, region: str, nodeclass: str, uid: str, role: str) -> str:
    """Deterministic, per-(NodeClass, role) profile name: a role change makes a new profile."""
    digest = hashlib.sha256(f"{region}/{nodeclass}/{uid}/{role}".encode()).hexdigest()[:20]
    return f"{cluster}_{digest}"[:128]


def managed_profile_path(cluster: str, region: str, uid: str = "") -> str:
    base = f"/karpenter/{region}/{cluster}/"
    return f"{base}{uid}/" if uid else base


class NodeClassResolver:
    def __init__(
        self,
        caller: AwsCaller,
        ec2: Any,
        ssm: Any,
        iam: Any,
        *,
        cluster: str,
        region: str,
        kubernetes_version: str,
        reservations: CapacityReservationProvider | None = None,
    ) -> None:
        """``reservations``: resolve ``capacityReservationSelectorTerms`` (the ReservedCapacity gate on)."""
        self._caller = caller
        self._ec2 = ec2
        self._iam = iam
        self._amis = AMIResolver(caller, ec2, ssm)
        self._reservations = reservations
        self.cluster = cluster
        self.region = region
        self.kubernetes_version = kubernetes_version

    async def resolve(self, nodeclass: Mapping[str, Any], now: datetime) -> ResolvedNodeClass:
        """Resolve every part; failures are recorded per condition rather than raised."""
        metadata = nodeclass.get("metadata") or {}
        spec = nodeclass.get("spec") or {}
        name = str(metadata.get("name", ""))
        try:
            family = family_of_nodeclass(dict(nodeclass))
            kubelet = KubeletOverrides.from_manifest(spec.get("kubelet"))
            user_tags = owned.validate_user_tags(spec.get("tags"))
        except ValueError as err:
            resolved = ResolvedNodeClass(name, spec, family_of_safe(nodeclass), KubeletOverrides(), {})
            resolved.errors["ValidationSucceeded"] = str(err)
            return resolved
        resolved = ResolvedNodeClass(name, spec, family, kubelet, user_tags)
        unsupported = unsupported_settings(family, spec)
        if unsupported:
            resolved.errors["ValidationSucceeded"] = "; ".join(unsupported)
            resolved.reasons["ValidationSucceeded"] = UNSUPPORTED_CONFIGURATION
        await self._step(resolved, "SubnetsReady", self._subnets, spec)
        await self._step(resolved, "SecurityGroupsReady", self._security_groups, spec)
        await self._step(resolved, "AMIsReady", self._resolve_amis, spec, family, now)
        await self._step(resolved, "InstanceProfileReady", self._instance_profile, nodeclass, user_tags)
        await self._step(resolved, "PlacementGroupReady", self._placement_group, spec)
        if self._reservations is not None:
            resolved.capacity_reservations = []
            await self._step(resolved, RESERVATIONS_CONDITION, self._capacity_reservations, spec)
        return resolved

    async def _capacity_reservations(self, resolved: ResolvedNodeClass, spec: Mapping[str, Any]) -> None:
        assert self._reservations is not None
        terms = spec.get("capacityReservationSelectorTerms") or []
        resolved.capacity_reservations = await self._reservations.list(terms) if terms else []

    async def _step(self, resolved: ResolvedNodeClass, condition: str, action: Any, *args: Any) -> None:
        try:
            await action(resolved, *args)
        except (NodeClassError, AMISelectionError) as err:
            resolved.errors[condition] = str(err)
        except Exception as err:  # AWS errors: keep the NodeClass not-ready with the code
            resolved.errors[condition] = f"{error_code(err)}: {err}"

    async def _subnets(self, resolved: ResolvedNodeClass, spec: Mapping[str, Any]) -> None:
        terms = spec.get("subnetSelectorTerms") or []
        if not terms:
            raise NodeClassError("spec.subnetSelectorTerms: at least one term is required")
        found: dict[str, Subnet] = {}
        for index, term in enumerate(terms):
            filters = selector_filters(term, id_filter="subnet-id")
            if not filters:
                raise NodeClassError(f"spec.subnetSelectorTerms[{index}]: needs tags or id")
            for item in await self._caller.paginate(
                self._ec2, "describe_subnets", "Subnets", Filters=filters
            ):
                found[item["SubnetId"]] = Subnet(
                    id=str(item["SubnetId"]),
                    zone=str(item["AvailabilityZone"]),
                    zone_id=str(item.get("AvailabilityZoneId", "")),
                    available_ips=int(item.get("AvailableIpAddressCount") or 0),
                )
        if not found:
            raise NodeClassError("spec.subnetSelectorTerms: no subnet matches")
        resolved.subnets = sorted(found.values(), key=lambda s: (-s.available_ips, s.id))

    async def _security_groups(self, resolved: ResolvedNodeClass, spec: Mapping[str, Any]) -> None:
        terms = spec.get("securityGroupSelectorTerms") or []
        if not terms:
            raise NodeClassError("spec.securityGroupSelectorTerms: at least one term is required")
        found: dict[str, SecurityGroup] = {}
        for index, term in enumerate(terms):
            filters = selector_filters(term, id_filter="group-id", name_filter="group-name")
            if not filters:
                raise NodeClassError(f"spec.securityGroupSelectorTerms[{index}]: needs tags, id or name")
            groups = await self._caller.paginate(
                self._ec2, "describe_security_groups", "SecurityGroups", Filters=filters
            )
            for item in groups:
                found[item["GroupId"]] = SecurityGroup(str(item["GroupId"]), str(item.get("GroupName", "")))
        if not found:
            raise NodeClassError("spec.securityGroupSelectorTerms: no security group matches")
        resolved.security_groups = sorted(found.values(), key=lambda g: g.id)

    async def _resolve_amis(
        self, resolved: ResolvedNodeClass, spec: Mapping[str, Any], family: AMIFamily, now: datetime
    ) -> None:
        amis = await self._amis.resolve(
            spec.get("amiSelectorTerms") or [], family, self.kubernetes_version, now
        )
        if not amis.amis:
            raise NodeClassError("spec.amiSelectorTerms: no AMI matches")
        resolved.amis = amis

    async def _placement_group(self, resolved: ResolvedNodeClass, spec: Mapping[str, Any]) -> None:
        try:
            resolved.placement_group = await placementgroup.resolve(
                self._caller, self._ec2, spec.get("placementGroupSelector")
            )
        except placementgroup.PlacementGroupError as err:
            resolved.reasons["PlacementGroupReady"] = err.reason
            raise NodeClassError(str(err)) from None

    async def _instance_profile(
        self, resolved: ResolvedNodeClass, nodeclass: Mapping[str, Any], user_tags: dict[str, str]
    ) -> None:
        spec = nodeclass.get("spec") or {}
        role, profile = spec.get("role"), spec.get("instanceProfile")
        if bool(role) == bool(profile):
            raise NodeClassError("spec: exactly one of role and instanceProfile must be set")
        if profile:
            resolved.instance_profile = str(profile)
            return
        metadata = nodeclass.get("metadata") or {}
        uid = str(metadata.get("uid", ""))
        name = managed_profile_name(self.cluster, self.region, resolved.name, uid, str(role))
        resolved.instance_profile = await self.ensure_instance_profile(
            name, str(role), resolved.name, uid, user_tags
        )

    async def ensure_instance_profile(
        self, name: str, role: str, nodeclass: str, uid: str, user_tags: Mapping[str, str]
    ) -> str:
        """Create (tagged) and attach the role if needed; idempotent."""
        try:
            answer = await self._caller.call(self._iam.get_instance_profile, InstanceProfileName=name)
            profile = answer["InstanceProfile"]
        except Exception as err:
            if error_code(err) != "NoSuchEntity":
                raise
            profile_tags = dict(user_tags)
            profile_tags.update(
                {
                    owned.cluster_tag(self.cluster): "owned",
                    owned.EKS_CLUSTER_NAME_TAG: self.cluster,
                    owned.NODECLASS_TAG: nodeclass,
                    owned.REGION_TAG: self.region,
                }
            )
            try:
                answer = await self._caller.call(
                    self._iam.create_instance_profile,
                    InstanceProfileName=name,
                    Path=managed_profile_path(self.cluster, self.region, uid),
                    Tags=[{"Key": k, "Value": v} for k, v in sorted(profile_tags.items())],
                )
                profile = answer["InstanceProfile"]
            except Exception as create_err:
                if error_code(create_err) != "EntityAlreadyExists":
                    raise
                profile = (await self._caller.call(self._iam.get_instance_profile, InstanceProfileName=name))[
                    "InstanceProfile"
                ]
        role_name = role.rsplit("/", 1)[-1]  # a path-qualified role is added by its bare name
        attached = [r.get("RoleName") for r in profile.get("Roles") or []]
        if role_name not in attached:
            for stale in attached:
                await self._caller.call(
                    self._iam.remove_role_from_instance_profile, InstanceProfileName=name, RoleName=stale
                )
            await self._caller.call(
                self._iam.add_role_to_instance_profile, InstanceProfileName=name, RoleName=role_name
            )
        return name

    async def garbage_collect_instance_profiles(self, referenced: set[str]) -> list[str]:
        """Delete managed profiles of this cluster that nothing references; returns the deleted names."""
        deleted = []
        for profile in await self._managed_profiles(managed_profile_path(self.cluster, self.region)):
            name = str(profile["InstanceProfileName"])
            if name not in referenced:
                await self._delete_profile(profile)
                deleted.append(name)
        return deleted

    async def collect_orphaned_profiles(self, live_uids: set[str], in_use: set[str]) -> list[str]:
        """Delete managed profiles of EC2NodeClasses that no longer exist (their uid is in the path), unless
        an instance still uses them: what a class deleted while no reconciler ran its finalizer left."""
        prefix = managed_profile_path(self.cluster, self.region)
        deleted = []
        for profile in await self._managed_profiles(prefix):
            name = str(profile["InstanceProfileName"])
            uid = str(profile.get("Path", ""))[len(prefix):].strip("/")
            if uid and uid not in live_uids and name not in in_use:
                await self._delete_profile(profile)
                deleted.append(name)
        return deleted

    async def delete_nodeclass_profiles(self, uid: str) -> list[str]:
        """Delete every profile managed for the EC2NodeClass with this uid (its path names the uid).

        Profiles a class names in ``spec.instanceProfile`` live elsewhere and are never touched."""
        if not uid:
            return []  # without the uid the path would cover every class of the cluster
        profiles = await self._managed_profiles(managed_profile_path(self.cluster, self.region, uid))
        for profile in profiles:
            await self._delete_profile(profile)
        return [str(p["InstanceProfileName"]) for p in profiles]

    async def _managed_profiles(self, prefix: str) -> list[dict[str, Any]]:
        profiles = await self._caller.paginate(self._iam, "list_instance_profiles", "InstanceProfiles",
                                               PathPrefix=prefix)
        # Filter again locally: the path prefix is what makes a profile ours.
        return [p for p in profiles if str(p.get("Path", "")).startswith(prefix)]

    async def _delete_profile(self, profile: Mapping[str, Any]) -> None:
        name = str(profile["InstanceProfileName"])
        try:
            for role in profile.get("Roles") or []:
                await self._caller.call(
                    self._iam.remove_role_from_instance_profile, InstanceProfileName=name, RoleName=role["RoleName"]
                )
            await self._caller.call(self._iam.delete_instance_profile, InstanceProfileName=name)
        except Exception as err:
            if error_code(err) != "NoSuchEntity":  # gone already (another replica, an earlier attempt)
                raise


def family_of_safe(nodeclass: Mapping[str, Any]) -> AMIFamily:
    try:
        return family_of_nodeclass(dict(nodeclass))
    except ValueError:
        from reconciler.api.amifamily import DEFAULT

        return DEFAULT


def subnets_for_launch(
    subnets: Sequence[Subnet], zones: set[str], is_exhausted: Any = lambda subnet_id: False
) -> dict[str, Subnet]:
    """Per zone, the subnet with the most free IPv4 addresses (exhausted subnets skipped)."""
    chosen: dict[str, Subnet] = {}
    for subnet in subnets:
        if subnet.zone not in zones or is_exhausted(subnet.id):
            continue
        current = chosen.get(subnet.zone)
        if current is None or (subnet.available_ips, current.id) > (current.available_ips, subnet.id):
            chosen[subnet.zone] = subnet
    return chosen
