"""Instance-type hardware facts, from DescribeInstanceTypes or the bundled catalogue.

``InstanceTypeInfo`` is the compact, provider-neutral record of one EC2 type:
the live provider builds it from a DescribeInstanceTypes item
(``InstanceTypeInfo.from_ec2``), the catalogue generator writes it to JSON
(``to_record``) and the preset reads it back (``from_record``). Labels and
extended resources are derived from it the way Karpenter's AWS provider does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.cloud.aws.allocatable import Shape
from reconciler.model import labels as wk
from reconciler.model.quantity import MILLI

# "m5", "m5d", "u-6tb1" ... → category, generation (Karpenter's regex on the name).
_NAME_SCHEME = re.compile(r"^([a-z]+)(-[0-9]+tb)?([0-9]+).*\.")
EC2_TO_KUBE_ARCH = {"x86_64": "amd64", "arm64": "arm64"}

NVIDIA_GPU = "nvidia.com/gpu"
AMD_GPU = "amd.com/gpu"
HABANA_GAUDI = "habana.ai/gaudi"
AWS_NEURON = "aws.amazon.com/neuron"
AWS_NEURON_CORE = "aws.amazon.com/neuroncore"
EFA = "vpc.amazonaws.com/efa"
DEFAULT_USAGE_CLASSES = ("on-demand", "spot")
PLACEMENT_STRATEGIES = ("cluster", "partition", "spread")
_GPU_RESOURCES = {"nvidia": NVIDIA_GPU, "amd": AMD_GPU, "habana": HABANA_GAUDI}


@dataclass(slots=True, frozen=True)
class Accelerator:
    """One accelerator model on a type: GPU, Neuron device or inference accelerator."""

    name: str
    manufacturer: str
    count: int
    memory_mib: int = 0
    cores: int = 0  # Neuron cores per device

    def to_record(self) -> list[Any]:
        return [self.name, self.manufacturer, self.count, self.memory_mib, self.cores]

    @classmethod
    def from_record(cls, record: list[Any]) -> Accelerator:
        name, manufacturer, count, memory_mib, cores = record
        return cls(str(name), str(manufacturer), int(count), int(memory_mib), int(cores))


@dataclass(slots=True, frozen=True)
class InstanceTypeInfo:
    name: str
    vcpus: int
    memory_mib: int
    architectures: tuple[str, ...]  # EC2 names: x86_64, arm64 (i386 dropped)
    network_interfaces: int  # MaximumNetworkInterfaces of the default network card
    ipv4_per_interface: int
    hypervisor: str = ""
    usage_classes: tuple[str, ...] = DEFAULT_USAGE_CLASSES
    gpus: tuple[Accelerator, ...] = ()
    neuron: tuple[Accelerator, ...] = ()
    inference: tuple[Accelerator, ...] = ()
    efa_interfaces: int = 0
    local_nvme_gb: int = 0
    bare_metal: bool = False
    cpu_manufacturer: str = ""
    clock_mhz: int = 0
    encryption_in_transit: bool = False
    ebs_bandwidth_mbps: int = 0
    network_bandwidth_mbps: int = 0
    nitro_enclaves: bool = False
    # MaximumNetworkInterfaces per network card, by card index (empty: one card, ``network_interfaces``).
    network_cards: tuple[int, ...] = ()
    ena_supported: bool = True
    nested_virtualization: bool = False
    placement_strategies: tuple[str, ...] = PLACEMENT_STRATEGIES

    @property
    def arch(self) -> str:
        """Kubernetes arch of the type (first supported EC2 architecture Kubernetes knows)."""
        for architecture in self.architectures:
            if architecture in EC2_TO_KUBE_ARCH:
                return EC2_TO_KUBE_ARCH[architecture]
        return "amd64"

    @property
    def family(self) -> str:
        return self.name.partition(".")[0]

    @property
    def size(self) -> str:
        return self.name.partition(".")[2]

    @property
    def category_and_generation(self) -> tuple[str, str]:
        match = _NAME_SCHEME.match(self.name)
        if not match:
            return "", ""
        return match.group(1), match.group(3)

    def shape(self) -> Shape:
        return Shape(self.vcpus, self.memory_mib, self.arch, self.network_interfaces, self.ipv4_per_interface)

    def labels(self, region: str, os: str = "linux") -> dict[str, str]:
        """Single-valued well-known labels (zone and capacity type come from offerings)."""
        result = {
            wk.INSTANCE_TYPE: self.name,
            wk.ARCH: self.arch,
            wk.OS: os,
            wk.REGION: region,
            wk.INSTANCE_CPU: str(self.vcpus),
            wk.INSTANCE_MEMORY: str(self.memory_mib),
            wk.INSTANCE_FAMILY: self.family,
            wk.INSTANCE_SIZE: self.size,
            "karpenter.k8s.aws/instance-encryption-in-transit-supported": str(
                self.encryption_in_transit
            ).lower(),
            "karpenter.k8s.aws/instance-capability-flex": str("-flex" in self.family).lower(),
            "karpenter.k8s.aws/instance-tenancy": "default",
            # Set for every type; bare-metal types have no hypervisor and carry "" (upstream's In "").
            wk.INSTANCE_HYPERVISOR: self.hypervisor,
            wk.NITRO_SANDBOX: str(self.nitro_enclaves).lower(),
        }
        category, generation = self.category_and_generation
        if category:
            result[wk.INSTANCE_CATEGORY] = category
            result[wk.INSTANCE_GENERATION] = generation
        if self.local_nvme_gb:
            result["karpenter.k8s.aws/instance-local-nvme"] = str(self.local_nvme_gb)
        if self.cpu_manufacturer:
            result["karpenter.k8s.aws/instance-cpu-manufacturer"] = _kebab(self.cpu_manufacturer)
        if self.clock_mhz:
            result["karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"] = str(self.clock_mhz)
        if self.ebs_bandwidth_mbps:
            result["karpenter.k8s.aws/instance-ebs-bandwidth"] = str(self.ebs_bandwidth_mbps)
        if self.network_bandwidth_mbps:
            result["karpenter.k8s.aws/instance-network-bandwidth"] = str(self.network_bandwidth_mbps)
        if len(self.gpus) == 1:
            gpu = self.gpus[0]
            result[wk.INSTANCE_GPU_NAME] = _kebab(gpu.name)
            result[wk.INSTANCE_GPU_MANUFACTURER] = _kebab(gpu.manufacturer)
            result[wk.INSTANCE_GPU_COUNT] = str(gpu.count)
            result[wk.INSTANCE_GPU_MEMORY] = str(gpu.memory_mib)
        accelerators = self.neuron or self.inference
        if len(accelerators) == 1:
            accelerator = accelerators[0]
            result["karpenter.k8s.aws/instance-accelerator-name"] = _kebab(accelerator.name)
            result["karpenter.k8s.aws/instance-accelerator-manufacturer"] = _kebab(accelerator.manufacturer)
            result["karpenter.k8s.aws/instance-accelerator-count"] = str(accelerator.count)
        return result

    def extended_resources(self) -> dict[str, int]:
        """GPU, Neuron and EFA capacity in milli-units (absent when zero)."""
        amounts: dict[str, int] = {}
        for gpu in self.gpus:
            resource = _GPU_RESOURCES.get(gpu.manufacturer.lower())
            if resource:
                amounts[resource] = amounts.get(resource, 0) + gpu.count * MILLI
        neuron_devices = sum(device.count for device in self.neuron) or sum(a.count for a in self.inference)
        if neuron_devices:
            amounts[AWS_NEURON] = neuron_devices * MILLI
        neuron_cores = sum(device.count * device.cores for device in self.neuron)
        if neuron_cores:
            amounts[AWS_NEURON_CORE] = neuron_cores * MILLI
        if self.efa_interfaces:
            amounts[EFA] = self.efa_interfaces * MILLI
        return amounts

    # --- conversions -------------------------------------------------------------------------------

    @classmethod
    def from_ec2(cls, item: Mapping[str, Any]) -> InstanceTypeInfo:
        """From one ``InstanceTypes[]`` item of DescribeInstanceTypes."""
        network = item.get("NetworkInfo") or {}
        cards = network.get("NetworkCards") or []
        default_card = int(network.get("DefaultNetworkCardIndex") or 0)
        interfaces = int(network.get("MaximumNetworkInterfaces") or 0)
        bandwidth = 0.0
        for card in cards:
            if int(card.get("NetworkCardIndex", 0)) == default_card:
                interfaces = int(card.get("MaximumNetworkInterfaces") or interfaces)
                bandwidth = float(card.get("BaselineBandwidthInGbps") or 0)
        processor = item.get("ProcessorInfo") or {}
        card_sizes = {int(c.get("NetworkCardIndex", 0)): int(c.get("MaximumNetworkInterfaces") or 0) for c in cards}
        storage = item.get("InstanceStorageInfo") or {}
        ebs = item.get("EbsInfo") or {}
        ebs_optimized = ebs.get("EbsOptimizedInfo") or {}
        neuron = tuple(
            Accelerator(
                str(device.get("Name", "")),
                "AWS",
                int(device.get("Count") or 0),
                int((device.get("MemoryInfo") or {}).get("SizeInMiB") or 0),
                int((device.get("CoreInfo") or {}).get("Count") or 0),
            )
            for device in (item.get("NeuronInfo") or {}).get("NeuronDevices") or []
        )
        return cls(
            name=str(item["InstanceType"]),
            vcpus=int((item.get("VCpuInfo") or {}).get("DefaultVCpus") or 0),
            memory_mib=int((item.get("MemoryInfo") or {}).get("SizeInMiB") or 0),
            architectures=tuple(
                a for a in processor.get("SupportedArchitectures") or [] if a in EC2_TO_KUBE_ARCH
            ),
            network_interfaces=interfaces,
            ipv4_per_interface=int(network.get("Ipv4AddressesPerInterface") or 0),
            hypervisor=str(item.get("Hypervisor") or ""),
            usage_classes=tuple(sorted(set(item.get("SupportedUsageClasses") or []))),
            gpus=tuple(_accelerator(gpu) for gpu in (item.get("GpuInfo") or {}).get("Gpus") or []),
            neuron=neuron,
            inference=tuple(
                _accelerator(a)
                for a in (item.get("InferenceAcceleratorInfo") or {}).get("Accelerators") or []
            ),
            efa_interfaces=int((network.get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0),
            local_nvme_gb=(
                int(storage.get("TotalSizeInGB") or 0)
                if storage and storage.get("NvmeSupport", "unsupported") != "unsupported"
                else 0
            ),
            bare_metal=bool(item.get("BareMetal")),
            cpu_manufacturer=str(processor.get("Manufacturer") or ""),
            clock_mhz=round(float(processor.get("SustainedClockSpeedInGhz") or 0) * 1000),
            encryption_in_transit=bool(network.get("EncryptionInTransitSupported")),
            ebs_bandwidth_mbps=(
                int(ebs_optimized.get("MaximumBandwidthInMbps") or 0)
                if ebs.get("EbsOptimizedSupport") == "default"
                else 0
            ),
            network_bandwidth_mbps=round(bandwidth * 1000),
            nitro_enclaves=item.get("NitroEnclavesSupport") == "supported",
            network_cards=(
                tuple(card_sizes.get(i, 0) for i in range(max(card_sizes) + 1)) if len(card_sizes) > 1 else ()
            ),
            ena_supported=network.get("EnaSupport", "supported") != "unsupported",
            nested_virtualization="nested-virtualization" in (processor.get("SupportedFeatures") or ()),
            placement_strategies=tuple(
                sorted((item.get("PlacementGroupInfo") or {}).get("SupportedStrategies") or PLACEMENT_STRATEGIES)
            ),
        )

    def to_record(self) -> dict[str, Any]:
        """Compact JSON form for the bundled catalogue (defaults omitted)."""
        record: dict[str, Any] = {
            "cpu": self.vcpus,
            "mem": self.memory_mib,
            "arch": list(self.architectures),
            "eni": self.network_interfaces,
            "ipv4": self.ipv4_per_interface,
        }
        optional: dict[str, Any] = {
            "hv": self.hypervisor,
            "usage": list(self.usage_classes) if self.usage_classes != DEFAULT_USAGE_CLASSES else [],
            "gpu": [g.to_record() for g in self.gpus],
            "neuron": [n.to_record() for n in self.neuron],
            "infer": [a.to_record() for a in self.inference],
            "efa": self.efa_interfaces,
            "nvme": self.local_nvme_gb,
            "metal": self.bare_metal,
            "cpuMfr": self.cpu_manufacturer,
            "mhz": self.clock_mhz,
            "eit": self.encryption_in_transit,
            "ebsMbps": self.ebs_bandwidth_mbps,
            "netMbps": self.network_bandwidth_mbps,
            "enclaves": self.nitro_enclaves,
            "cards": list(self.network_cards),
            "noEna": not self.ena_supported,
            "nestedVirt": self.nested_virtualization,
            "pg": list(self.placement_strategies) if self.placement_strategies != PLACEMENT_STRATEGIES else [],
        }
        record.update({key: value for key, value in optional.items() if value})
        return record

    @classmethod
    def from_record(cls, name: str, record: Mapping[str, Any]) -> InstanceTypeInfo:
        return cls(
            name=name,
            vcpus=int(record["cpu"]),
            memory_mib=int(record["mem"]),
            architectures=tuple(record.get("arch") or ()),
            network_interfaces=int(record.get("eni") or 0),
            ipv4_per_interface=int(record.get("ipv4") or 0),
            hypervisor=str(record.get("hv") or ""),
            usage_classes=tuple(record.get("usage") or DEFAULT_USAGE_CLASSES),
            gpus=tuple(Accelerator.from_record(g) for g in record.get("gpu") or ()),
            neuron=tuple(Accelerator.from_record(n) for n in record.get("neuron") or ()),
            inference=tuple(Accelerator.from_record(a) for a in record.get("infer") or ()),
            efa_interfaces=int(record.get("efa") or 0),
            local_nvme_gb=int(record.get("nvme") or 0),
            bare_metal=bool(record.get("metal")),
            cpu_manufacturer=str(record.get("cpuMfr") or ""),
            clock_mhz=int(record.get("mhz") or 0),
            encryption_in_transit=bool(record.get("eit")),
            ebs_bandwidth_mbps=int(record.get("ebsMbps") or 0),
            network_bandwidth_mbps=int(record.get("netMbps") or 0),
            nitro_enclaves=bool(record.get("enclaves")),
            network_cards=tuple(int(n) for n in record.get("cards") or ()),
            ena_supported=not record.get("noEna"),
            nested_virtualization=bool(record.get("nestedVirt")),
            placement_strategies=tuple(record.get("pg") or PLACEMENT_STRATEGIES),
        )


def _accelerator(item: Mapping[str, Any]) -> Accelerator:
    return Accelerator(
        str(item.get("Name", "")),
        str(item.get("Manufacturer", "")),
        int(item.get("Count") or 0),
        int((item.get("MemoryInfo") or {}).get("SizeInMiB") or 0),
    )


def _kebab(text: str) -> str:
    return text.lower().replace(" ", "-")
