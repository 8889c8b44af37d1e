"""Turn hardware facts + offerings + NodeClass settings into the engine's ``InstanceType``.

Shared by the bundled preset (simulator) and the live AWS provider so that both
present exactly the same capacity, overhead and labels for a type.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reconciler.api.amifamily import AL2023, CUSTOM, AMIFamily, family_of_nodeclass
from reconciler.cloud.aws.allocatable import (
    DEFAULT_VM_MEMORY_OVERHEAD_PERCENT,
    KubeletOverrides,
    capacity_and_overhead,
)
from reconciler.cloud.aws.catalog import EFA, InstanceTypeInfo
from reconciler.cloud.aws.netinterfaces import efa_capacity, efa_only_on_primary_card, interfaces_fit
from reconciler.cloud.types import InstanceType, Offering
from reconciler.model import labels as wk
from reconciler.model.quantity import QuantityError, parse_quantity

SPOT_FRACTION_MIN = 0.30
SPOT_FRACTION_SPAN = 0.15
LAUNCHABLE_CAPACITY_TYPES = ("on-demand", "spot")


def build_instance_type(
    info: InstanceTypeInfo,
    offerings: Iterable[Offering],
    *,
    region: str,
    family: AMIFamily = AL2023,
    kubelet: KubeletOverrides | None = None,
    ephemeral_storage_milli: int | None = None,
    vm_overhead_percent: float = DEFAULT_VM_MEMORY_OVERHEAD_PERCENT,
    reserved_enis: int = 0,
    network_interfaces: Sequence[Mapping[str, Any]] | None = None,
) -> InstanceType | None:
    """The ``InstanceType`` for ``info`` under an AMI family, or None when the family cannot run it.

    Windows families only run on amd64; everything else runs on any arch we list. With
    ``spec.networkInterfaces``, EFA-only interfaces on card 0 take ENIs from the pods and the
    NodeClass's EFA-only interfaces are the node's ``vpc.amazonaws.com/efa``.
    """
    if family.os == "windows" and info.arch != "amd64":
        return None
    shape = info.shape()
    efa_only = efa_only_on_primary_card(network_interfaces)
    if efa_only:
        shape = dataclasses.replace(shape, network_interfaces=max(shape.network_interfaces - efa_only, 0))
    extended = info.extended_resources()
    efa = efa_capacity(info, network_interfaces)
    extended.pop(EFA, None)
    if efa:
        extended[EFA] = efa * 1000
    capacity, overhead = capacity_and_overhead(
        shape,
        family=family,
        kubelet=kubelet,
        ephemeral_storage_milli=ephemeral_storage_milli,
        vm_overhead_percent=vm_overhead_percent,
        reserved_enis=reserved_enis,
    )
    labels = info.labels(region, os=family.os)
    if family.windows_build:
        labels[wk.WINDOWS_BUILD] = family.windows_build
    return InstanceType(
        name=info.name,
        capacity=capacity + extended,
        overhead=overhead,
        offerings=tuple(offerings),
        labels=labels,
    )


def family_runs(family: AMIFamily, info: InstanceTypeInfo) -> bool:
    """Whether the family's AMIs boot on this type; the AL2023 AMIs do not support a1 (upstream's
    ``compatibility`` check). A type that fails keeps its place with every offering unavailable."""
    return not (family.name == AL2023.name and info.family == "a1")


def nodeclass_fits(spec: Mapping[str, Any], info: InstanceTypeInfo, placement_strategy: str | None = None) -> bool:
    """Whether a type can launch with the NodeClass's settings (upstream's compatibility checks):
    its network interfaces, nested virtualization when enabled, connection tracking (Nitro only)
    and the placement group's strategy."""
    if not interfaces_fit(info, spec.get("networkInterfaces")):
        return False
    if (spec.get("cpuOptions") or {}).get("nestedVirtualization") == "enabled" and not info.nested_virtualization:
        return False
    if spec.get("connectionTracking") is not None and info.hypervisor != "nitro":
        return False
    return placement_strategy is None or placement_strategy in info.placement_strategies


class NodeClassShape:
    """The EC2NodeClass settings that change a type's capacity, overhead and labels, and how they do.

    The one place the live provider and the offline presets turn ``InstanceTypeInfo`` into the
    ``InstanceType`` a NodeClass gets: AMI family (OS, Windows build, pod density, a1 under AL2023),
    kubelet (maxPods, podsPerCore, reserved, eviction), block devices and RAID0 instance store.
    ``key`` is equal for NodeClasses that shape every type the same way."""

    def __init__(
        self,
        spec: Mapping[str, Any] | None,
        family: AMIFamily,
        kubelet: KubeletOverrides | None = None,
        *,
        vm_overhead_percent: float = DEFAULT_VM_MEMORY_OVERHEAD_PERCENT,
        reserved_enis: int = 0,
        placement_strategy: str | None = None,
    ) -> None:
        self.spec: Mapping[str, Any] = spec or {}
        self.family = family
        self.kubelet = kubelet
        self.vm_overhead_percent = vm_overhead_percent
        self.reserved_enis = reserved_enis
        self.placement_strategy = placement_strategy
        self.key = json.dumps(
            {
                "family": family.name,
                "kubelet": self.spec.get("kubelet"),
                "bdm": self.spec.get("blockDeviceMappings"),
                "store": self.spec.get("instanceStorePolicy"),
                "nics": self.spec.get("networkInterfaces"),
                "cpu": self.spec.get("cpuOptions"),
                "conntrack": self.spec.get("connectionTracking") is not None,
                "pg": placement_strategy,
            },
            sort_keys=True,
        )

    @classmethod
    def of_manifest(cls, nodeclass: Mapping[str, Any] | None, **options: Any) -> NodeClassShape:
        """From an EC2NodeClass manifest as stored (offline: no AWS resolution needed for these fields)."""
        if not nodeclass:
            return cls(None, AL2023, **options)
        spec = nodeclass.get("spec") or {}
        family = family_of_nodeclass(dict(nodeclass))
        return cls(spec, family, KubeletOverrides.from_manifest(spec.get("kubelet")), **options)

    def build(self, info: InstanceTypeInfo, offerings: Iterable[Offering], *, region: str) -> InstanceType | None:
        return build_instance_type(
            info,
            offerings,
            region=region,
            family=self.family,
            kubelet=self.kubelet,
            ephemeral_storage_milli=ephemeral_storage_milli(self.spec, self.family, info),
            vm_overhead_percent=self.vm_overhead_percent,
            reserved_enis=self.reserved_enis,
            network_interfaces=self.spec.get("networkInterfaces"),
        )

    def runs(self, info: InstanceTypeInfo) -> bool:
        return family_runs(self.family, info) and nodeclass_fits(self.spec, info, self.placement_strategy)


def spot_fraction(instance_type: str, zone: str) -> float:
    """The simulated spot discount: a fixed fraction of on-demand in [0.30, 0.45).

    Derived from SHA-256 of ``"<type>/<zone>"`` so every run, machine and Python
    version gets the same number and zones of one type differ a little, as real
    spot markets do.
    """
    digest = hashlib.sha256(f"{instance_type}/{zone}".encode()).digest()
    unit = int.from_bytes(digest[:8], "big") / 2**64
    return SPOT_FRACTION_MIN + SPOT_FRACTION_SPAN * unit


def ephemeral_storage_milli(
    spec: Mapping[str, Any], family: AMIFamily, info: InstanceTypeInfo, *, path: str = "spec"
) -> int:
    """Ephemeral storage capacity a node of ``info`` gets under an EC2NodeClass ``spec``.

    RAID0 instance store wins; else the block device flagged ``rootVolume``; else the
    family's data device (Custom: the last mapping); else the family default size.
    """
    if spec.get("instanceStorePolicy") == "RAID0" and info.local_nvme_gb:
        return info.local_nvme_gb * 10**9 * 1000
    mappings: Sequence[Mapping[str, Any]] = spec.get("blockDeviceMappings") or []
    if mappings:
        for index, mapping in enumerate(mappings):
            if mapping.get("rootVolume"):
                size = _volume_size(mapping, f"{path}.blockDeviceMappings[{index}]")
                if size is not None:
                    return size
        if family is CUSTOM:
            size = _volume_size(mappings[-1], f"{path}.blockDeviceMappings[{len(mappings) - 1}]")
            return family.default_ephemeral_milli if size is None else size
        for index, mapping in enumerate(mappings):
            if mapping.get("deviceName") == family.ephemeral_device:
                size = _volume_size(mapping, f"{path}.blockDeviceMappings[{index}]")
                if size is not None:
                    return size
    return family.default_ephemeral_milli


def _volume_size(mapping: Mapping[str, Any], where: str) -> int | None:
    size = (mapping.get("ebs") or {}).get("volumeSize")
    if size is None:
        return None
    try:
        return parse_quantity(size)
    except QuantityError as err:
        raise ValueError(f"{where}.ebs.volumeSize: {err}") from None
