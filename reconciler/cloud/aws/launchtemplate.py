"""Content-addressed launch templates.

A launch template's name is ``karpenter.k8s.aws/<hash of its data and tags>``,
so identical launch options share one template, a changed option makes a new
one, and a restarted reconciler finds the template it created before crashing
(DescribeLaunchTemplates by name) instead of creating a duplicate.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.api.amifamily import BOTTLEROCKET, CUSTOM, AMIFamily
from reconciler.cloud.aws import tags as owned
from reconciler.cloud.aws.clients import AwsCaller, error_code
from reconciler.model.quantity import QuantityError, parse_quantity

NAME_PREFIX = "karpenter.k8s.aws/"
CACHE_TTL_SECONDS = 60.0
NOT_FOUND_CODES = ("InvalidLaunchTemplateName.NotFoundException", "InvalidLaunchTemplateId.NotFound")
DEFAULT_METADATA_OPTIONS = {
    "HttpEndpoint": "enabled",
    "HttpProtocolIpv6": "disabled",
    "HttpPutResponseHopLimit": 1,
    "HttpTokens": "required",
    "InstanceMetadataTags": "disabled",
}
_GIB = 2**30


@dataclass(slots=True, frozen=True)
class LaunchTemplateSpec:
    image_id: str
    user_data: str
    instance_profile: str
    security_group_ids: tuple[str, ...]
    block_device_mappings: tuple[Mapping[str, Any], ...]
    metadata_options: Mapping[str, Any]
    tags: Mapping[str, str]
    detailed_monitoring: bool = False
    spot: bool = False  # spot launches also tag their spot-instances-request
    # EC2 ``NetworkInterfaces`` (``netinterfaces.network_interfaces``); they carry the security groups.
    network_interfaces: tuple[Mapping[str, Any], ...] | None = None
    cpu_options: Mapping[str, Any] | None = None  # EC2 ``CpuOptions`` (nested virtualization)
    placement: Mapping[str, Any] | None = None  # EC2 ``Placement`` (placement group id, partition)
    # With the ReservedCapacity gate ("targeted" mode, upstream's): a reservation ID targets that capacity
    # reservation only; "none" keeps spot/on-demand launches out of open reservations; "" sets nothing.
    capacity_reservation: str = ""
    market_type: str = ""  # capacity-block | interruptible-capacity-reservation, for those reservations

    def data(self) -> dict[str, Any]:
        """EC2 ``LaunchTemplateData``."""
        data: dict[str, Any] = {
            "ImageId": self.image_id,
            "UserData": base64.b64encode(self.user_data.encode()).decode(),
            "IamInstanceProfile": {"Name": self.instance_profile},
            "MetadataOptions": dict(self.metadata_options),
            "Monitoring": {"Enabled": self.detailed_monitoring},
            "TagSpecifications": owned.tag_specifications(
                ["network-interface", "spot-instances-request"] if self.spot else ["network-interface"],
                self.tags,
            ),
        }
        if self.block_device_mappings:
            data["BlockDeviceMappings"] = [dict(m) for m in self.block_device_mappings]
        if self.network_interfaces:
            # Security groups go inside the interfaces when the template defines them (EC2 refuses both).
            data["NetworkInterfaces"] = [dict(i) for i in self.network_interfaces]
        else:
            data["SecurityGroupIds"] = list(self.security_group_ids)
        if self.cpu_options:
            data["CpuOptions"] = dict(self.cpu_options)
        if self.placement:
            data["Placement"] = dict(self.placement)
        if self.capacity_reservation == "none":
            data["CapacityReservationSpecification"] = {"CapacityReservationPreference": "none"}
        elif self.capacity_reservation:
            data["CapacityReservationSpecification"] = {
                "CapacityReservationPreference": "capacity-reservations-only",
                "CapacityReservationTarget": {"CapacityReservationId": self.capacity_reservation},
            }
        if self.market_type:
            data["InstanceMarketOptions"] = {"MarketType": self.market_type}
        return data

    @property
    def name(self) -> str:
        canonical = json.dumps({"data": self.data(), "tags": dict(self.tags)}, sort_keys=True)
        return NAME_PREFIX + hashlib.sha256(canonical.encode()).hexdigest()[:32]


def metadata_options(spec: Mapping[str, Any] | None, *, ipv6: bool = False) -> dict[str, Any]:
    """``spec.metadataOptions`` over the IMDSv2-required defaults; on an IPv6 cluster a class that says
    nothing about IMDS gets its IPv6 endpoint too (upstream's default when metadataOptions is unset)."""
    options = dict(DEFAULT_METADATA_OPTIONS)
    if ipv6 and not spec:
        options["HttpProtocolIpv6"] = "enabled"
    for key, ec2_key in (
        ("httpEndpoint", "HttpEndpoint"),
        ("httpProtocolIPv6", "HttpProtocolIpv6"),
        ("httpPutResponseHopLimit", "HttpPutResponseHopLimit"),
        ("httpTokens", "HttpTokens"),
    ):
        if spec and spec.get(key) is not None:
            options[ec2_key] = spec[key]
    return options


def default_block_devices(family: AMIFamily) -> list[dict[str, Any]]:
    def ebs(device: str, gib: int) -> dict[str, Any]:
        return {
            "DeviceName": device,
            "Ebs": {"VolumeSize": gib, "VolumeType": "gp3", "Encrypted": True, "DeleteOnTermination": True},
        }

    if family is CUSTOM:
        return []
    if family is BOTTLEROCKET:
        return [ebs("/dev/xvda", 4), ebs("/dev/xvdb", 20)]
    return [ebs(family.ephemeral_device, family.default_ephemeral_milli // 1000 // _GIB)]


def block_device_mappings(spec: Mapping[str, Any], family: AMIFamily) -> list[dict[str, Any]]:
    """``spec.blockDeviceMappings`` in EC2 form, or the family defaults."""
    mappings = spec.get("blockDeviceMappings")
    if not mappings:
        return default_block_devices(family)
    result = []
    for index, mapping in enumerate(mappings):
        where = f"spec.blockDeviceMappings[{index}]"
        if not mapping.get("deviceName"):
            raise ValueError(f"{where}.deviceName: required")
        source = mapping.get("ebs") or {}
        ebs: dict[str, Any] = {}
        if source.get("volumeSize") is not None:
            try:
                size_bytes = parse_quantity(source["volumeSize"]) // 1000
            except QuantityError as err:
                raise ValueError(f"{where}.ebs.volumeSize: {err}") from None
            ebs["VolumeSize"] = -(-size_bytes // _GIB)  # EC2 takes whole GiB, rounded up
        for key, ec2_key in (
            ("volumeType", "VolumeType"),
            ("iops", "Iops"),
            ("throughput", "Throughput"),
            ("kmsKeyID", "KmsKeyId"),
            ("snapshotID", "SnapshotId"),
            ("encrypted", "Encrypted"),
            ("deleteOnTermination", "DeleteOnTermination"),
            ("volumeInitializationRate", "VolumeInitializationRate"),
        ):
            if source.get(key) is not None:
                ebs[ec2_key] = source[key]
        result.append({"DeviceName": str(mapping["deviceName"]), "Ebs": ebs})
    return result


@dataclass(slots=True)
class _Entry:
    id: str
    expires: float


@dataclass(slots=True)
class LaunchTemplateProvider:
    caller: AwsCaller
    ec2: Any
    clock: Callable[[], float] = time.monotonic
    _cache: dict[str, _Entry] = field(default_factory=dict)

    async def ensure(self, spec: LaunchTemplateSpec) -> str:
        """The template's name, creating it when EC2 does not have it yet."""
        name = spec.name
        entry = self._cache.get(name)
        now = self.clock()
        if entry and entry.expires > now:
            entry.expires = now + CACHE_TTL_SECONDS
            return name
        template_id = await self._find(name)
        if template_id is None:
            template_id = await self._create(name, spec)
        self._cache[name] = _Entry(template_id, now + CACHE_TTL_SECONDS)
        return name

    def invalidate(self, name: str) -> None:
        self._cache.pop(name, None)

    async def _find(self, name: str) -> str | None:
        try:
            answer = await self.caller.call(self.ec2.describe_launch_templates, LaunchTemplateNames=[name])
        except Exception as err:
            if error_code(err) in NOT_FOUND_CODES:
                return None
            raise
        templates = answer.get("LaunchTemplates") or []
        return str(templates[0]["LaunchTemplateId"]) if templates else None

    async def _create(self, name: str, spec: LaunchTemplateSpec) -> str:
        try:
            answer = await self.caller.call(
                self.ec2.create_launch_template,
                LaunchTemplateName=name,
                LaunchTemplateData=spec.data(),
                TagSpecifications=owned.tag_specifications(["launch-template"], spec.tags),
            )
        except Exception as err:
            # Another replica (or our own earlier attempt) created it first.
            if error_code(err) == "InvalidLaunchTemplateName.AlreadyExistsException":
                found = await self._find(name)
                if found:
                    return found
            raise
        return str(answer["LaunchTemplate"]["LaunchTemplateId"])

    async def delete_for_nodeclass(self, cluster: str, nodeclass: str) -> list[str]:
        """Delete every template this cluster created for ``nodeclass`` (its EC2NodeClass is going away)."""
        templates = await self.caller.paginate(
            self.ec2,
            "describe_launch_templates",
            "LaunchTemplates",
            Filters=[
                {"Name": f"tag:{owned.EKS_CLUSTER_NAME_TAG}", "Values": [cluster]},
                {"Name": f"tag:{owned.NODECLASS_TAG}", "Values": [nodeclass]},
            ],
        )
        deleted = []
        for template in templates:
            name = str(template["LaunchTemplateName"])
            if not name.startswith(NAME_PREFIX):
                continue
            await self._delete(name)
            deleted.append(name)
        return deleted

    async def _delete(self, name: str) -> None:
        try:
            await self.caller.call(self.ec2.delete_launch_template, LaunchTemplateName=name)
        except Exception as err:
            if error_code(err) not in NOT_FOUND_CODES:
                raise
        self._cache.pop(name, None)

    async def delete_unused(self, cluster: str, in_use: Sequence[str] = ()) -> list[str]:
        """Delete this cluster's templates not in ``in_use`` and not used within the cache TTL."""
        templates = await self.caller.paginate(
            self.ec2,
            "describe_launch_templates",
            "LaunchTemplates",
            Filters=[{"Name": f"tag:{owned.EKS_CLUSTER_NAME_TAG}", "Values": [cluster]}],
        )
        now = self.clock()
        deleted = []
        for template in templates:
            name = str(template["LaunchTemplateName"])
            entry = self._cache.get(name)
            if name in in_use or (entry and entry.expires > now) or not name.startswith(NAME_PREFIX):
                continue
            await self._delete(name)
            deleted.append(name)
        return deleted
