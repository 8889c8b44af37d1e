"""Pure AWS capacity and overhead formulas (what the EKS kubelet will report).

allocatable = capacity - kube-reserved - system-reserved - eviction threshold,
with the numbers Karpenter's AWS provider uses, so that the engine's bin-packing
agrees with what the kubelet later advertises:

- memory capacity: DescribeInstanceTypes ``SizeInMiB`` minus 64 MiB on arm64
  (Graviton CMA) minus ``ceil(7.5 %)`` for the hypervisor (VM_MEMORY_OVERHEAD_PERCENT);
- pods: ``maxPods`` if set; else ENIs x (IPv4 per ENI - 1) + 2 for ENI-limited
  families; else 110; then capped at ``podsPerCore x vCPU`` when set;
- kube-reserved: CPU 6 % of the first core, 1 % of the second, 0.5 % of cores 3-4,
  0.25 % of the rest; memory 11 MiB x pods + 255 MiB; ephemeral storage 1Gi;
  ``kubelet.kubeReserved`` keys replace the computed ones;
- eviction threshold: memory 100Mi and 10 % of ephemeral storage, replaced by
  ``kubelet.evictionHard`` ``memory.available`` / ``nodefs.available``.

All amounts are exact integer milli-units (see ``reconciler.model.quantity``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.api.amifamily import AL2023, AMIFamily
from reconciler.model.quantity import MILLI, QuantityError, parse_quantity
from reconciler.model.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources

MIB = 2**20
MIB_MILLI = MIB * MILLI
DEFAULT_VM_MEMORY_OVERHEAD_PERCENT = 0.075
ARM64_CMA_RESERVED_MIB = 64
WINDOWS_DEFAULT_MAX_PODS = 110
EVICTION_MEMORY_DEFAULT_MILLI = 100 * MIB_MILLI
EVICTION_STORAGE_DEFAULT_PERCENT = 10.0
KUBE_RESERVED_STORAGE_MILLI = parse_quantity("1Gi")
MEMORY_AVAILABLE = "memory.available"
NODEFS_AVAILABLE = "nodefs.available"

# (start millicores, end millicores, fraction reserved) — the EKS AMI/Bottlerocket ladder.
_CPU_RESERVED_LADDER: tuple[tuple[int, int, float], ...] = (
    (0, 1000, 0.06),
    (1000, 2000, 0.01),
    (2000, 4000, 0.005),
    (4000, 1 << 31, 0.0025),
)


class KubeletConfigError(ValueError):
    """A bad ``spec.kubelet`` value; the message names the field path."""


@dataclass(slots=True, frozen=True)
class KubeletOverrides:
    """The parts of an EC2NodeClass's ``spec.kubelet`` that change allocatable."""

    max_pods: int | None = None
    pods_per_core: int | None = None
    kube_reserved: Mapping[str, str] = field(default_factory=dict)
    system_reserved: Mapping[str, str] = field(default_factory=dict)
    eviction_hard: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_manifest(
        cls, kubelet: Mapping[str, Any] | None, *, path: str = "spec.kubelet"
    ) -> KubeletOverrides:
        if not kubelet:
            return cls()
        if not isinstance(kubelet, Mapping):
            raise KubeletConfigError(f"{path}: expected a map")
        values: dict[str, Any] = {}
        for key, attr in (("maxPods", "max_pods"), ("podsPerCore", "pods_per_core")):
            raw = kubelet.get(key)
            if raw is None:
                continue
            if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
                raise KubeletConfigError(f"{path}.{key}: {raw!r} must be a non-negative integer")
            values[attr] = raw
        for key, attr in (("kubeReserved", "kube_reserved"), ("systemReserved", "system_reserved")):
            raw = kubelet.get(key) or {}
            if not isinstance(raw, Mapping):
                raise KubeletConfigError(f"{path}.{key}: expected a map of resource name to quantity")
            for name, value in raw.items():
                _check_quantity(value, f"{path}.{key}.{name}")
            values[attr] = {str(k): str(v) for k, v in raw.items()}
        raw_eviction = kubelet.get("evictionHard") or {}
        if not isinstance(raw_eviction, Mapping):
            raise KubeletConfigError(f"{path}.evictionHard: expected a map of signal to threshold")
        for name, value in raw_eviction.items():
            if str(value).endswith("%"):
                _percentage(str(value), f"{path}.evictionHard.{name}")
            else:
                _check_quantity(value, f"{path}.evictionHard.{name}")
        values["eviction_hard"] = {str(k): str(v) for k, v in raw_eviction.items()}
        return cls(**values)


def _check_quantity(value: Any, where: str) -> None:
    try:
        parse_quantity(value)
    except QuantityError as err:
        raise KubeletConfigError(f"{where}: {err}") from None


def _percentage(value: str, where: str) -> float:
    try:
        percent = float(value.rstrip("%"))
    except ValueError:
        raise KubeletConfigError(f"{where}: {value!r} is not a percentage") from None
    if not 0 <= percent <= 100:
        raise KubeletConfigError(f"{where}: {value!r} must be between 0% and 100%")
    # The kubelet treats 100% as "threshold disabled".
    return 0.0 if percent == 100 else percent


def memory_capacity(
    size_in_mib: int, arch: str, vm_overhead_percent: float = DEFAULT_VM_MEMORY_OVERHEAD_PERCENT
) -> int:
    """Memory the kubelet will report, in milli-bytes (SizeInMiB minus CMA and hypervisor overhead)."""
    usable_mib = size_in_mib - (ARM64_CMA_RESERVED_MIB if arch in ("arm64", "aarch64") else 0)
    overhead_mib = math.ceil(usable_mib * MIB * vm_overhead_percent / MIB)
    return (usable_mib - overhead_mib) * MIB_MILLI


def eni_limited_pods(network_interfaces: int, ipv4_per_interface: int, reserved_enis: int = 0) -> int:
    """ENIs x (IPv4 per ENI - 1) + 2 on the default network card; 0 when no ENI is left."""
    usable = max(network_interfaces - reserved_enis, 0)
    if usable == 0:
        return 0
    return usable * (ipv4_per_interface - 1) + 2


def max_pods(
    eni_pods: int, vcpus: int, family: AMIFamily = AL2023, kubelet: KubeletOverrides | None = None
) -> int:
    """Pod capacity: kubelet maxPods, else ENI-limited (or 110), capped by podsPerCore x vCPU."""
    kubelet = kubelet or KubeletOverrides()
    if kubelet.max_pods is not None:
        count = kubelet.max_pods
    elif family.eni_limited_pod_density:
        count = eni_pods
    else:
        count = WINDOWS_DEFAULT_MAX_PODS
    if kubelet.pods_per_core and family.pods_per_core_enabled:
        count = min(count, kubelet.pods_per_core * vcpus)
    return count


def kube_reserved_cpu(cpu_milli: int) -> int:
    """Millicores kube-reserved for ``cpu_milli`` of capacity (per-range truncation, as Karpenter does)."""
    reserved = 0
    for start, end, fraction in _CPU_RESERVED_LADDER:
        if cpu_milli >= start:
            span = min(cpu_milli, end) - start
            reserved += int(span * fraction)
    return reserved


def kube_reserved(
    cpu_milli: int, pods: int, kube_reserved_overrides: Mapping[str, str] | None = None
) -> Resources:
    """kube-reserved CPU/memory/ephemeral-storage (milli-units); explicit keys replace computed ones.

    ``cpu_milli`` is the capacity in milli-CPU; ``pods`` the pod count memory is sized for.
    """
    computed = {
        CPU: kube_reserved_cpu(cpu_milli),  # millicores are already the milli-unit representation
        MEMORY: (11 * pods + 255) * MIB_MILLI,
        EPHEMERAL_STORAGE: KUBE_RESERVED_STORAGE_MILLI,
    }
    for name, value in (kube_reserved_overrides or {}).items():
        computed[name] = parse_quantity(value)
    return Resources(computed)


def system_reserved(overrides: Mapping[str, str] | None) -> Resources:
    return Resources({name: parse_quantity(value) for name, value in (overrides or {}).items()})


def eviction_threshold(
    memory_milli: int, storage_milli: int, eviction_hard: Mapping[str, str] | None = None
) -> Resources:
    """Hard eviction reserve: 100Mi memory and 10 % of ephemeral storage, or what evictionHard says."""
    threshold = {
        MEMORY: EVICTION_MEMORY_DEFAULT_MILLI,
        EPHEMERAL_STORAGE: _percent_of(storage_milli, EVICTION_STORAGE_DEFAULT_PERCENT),
    }
    for signal, resource, capacity in (
        (MEMORY_AVAILABLE, MEMORY, memory_milli),
        (NODEFS_AVAILABLE, EPHEMERAL_STORAGE, storage_milli),
    ):
        value = (eviction_hard or {}).get(signal)
        if value is None:
            continue
        if value.endswith("%"):
            threshold[resource] = _percent_of(capacity, _percentage(value, f"evictionHard.{signal}"))
        else:
            threshold[resource] = parse_quantity(value)
    return Resources(threshold)


def _percent_of(capacity_milli: int, percent: float) -> int:
    """ceil(capacity x percent / 100) in whole units (the kubelet thresholds are whole bytes)."""
    whole_units = math.ceil(capacity_milli / MILLI / 100 * percent)
    return whole_units * MILLI


@dataclass(slots=True, frozen=True)
class Shape:
    """The raw hardware numbers the formulas need (from DescribeInstanceTypes or a catalogue)."""

    vcpus: int
    memory_mib: int
    arch: str  # kubernetes arch: amd64 | arm64
    network_interfaces: int  # on the default network card
    ipv4_per_interface: int


def capacity_and_overhead(
    shape: Shape,
    *,
    family: AMIFamily = AL2023,
    kubelet: KubeletOverrides | None = None,
    ephemeral_storage_milli: int | None = None,
    vm_overhead_percent: float = DEFAULT_VM_MEMORY_OVERHEAD_PERCENT,
    reserved_enis: int = 0,
) -> tuple[Resources, Resources]:
    """(capacity, overhead) for CPU, memory, ephemeral storage and pods of one instance type."""
    kubelet = kubelet or KubeletOverrides()
    cpu_milli = shape.vcpus * MILLI
    memory_milli = memory_capacity(shape.memory_mib, shape.arch, vm_overhead_percent)
    storage_milli = (
        family.default_ephemeral_milli if ephemeral_storage_milli is None else ephemeral_storage_milli
    )
    eni_pods = eni_limited_pods(shape.network_interfaces, shape.ipv4_per_interface, reserved_enis)
    pods = max_pods(eni_pods, shape.vcpus, family, kubelet)
    # kube-reserved memory follows the ENI-limited density (with no reserved ENIs) for AL2/AL2023/Custom.
    reserved_for_pods = (
        eni_limited_pods(shape.network_interfaces, shape.ipv4_per_interface, 0)
        if family.eni_limited_memory_overhead
        else pods
    )
    capacity = Resources(
        {CPU: cpu_milli, MEMORY: memory_milli, EPHEMERAL_STORAGE: storage_milli, PODS: pods * MILLI}
    )
    overhead = (
        kube_reserved(cpu_milli, reserved_for_pods, kubelet.kube_reserved)
        + system_reserved(kubelet.system_reserved)
        + eviction_threshold(memory_milli, storage_milli, kubelet.eviction_hard)
    )
    return capacity, overhead


def overhead_for(capacity: Mapping[str, int], arch: str = "amd64") -> Resources:
    """Default AWS overhead for a catalogue entry that states capacity but no overhead.

    kube-reserved (CPU ladder; memory from ``capacity["pods"]``) plus the hard
    eviction threshold; ephemeral storage only when the capacity lists it. ``arch``
    is accepted for symmetry with the capacity formulas: the overhead itself does
    not depend on it (the arm64 CMA reserve is already out of ``capacity``).
    """
    del arch
    pods = capacity.get(PODS, 0) // MILLI
    overhead = kube_reserved(capacity.get(CPU, 0), pods) + eviction_threshold(
        capacity.get(MEMORY, 0), capacity.get(EPHEMERAL_STORAGE, 0)
    )
    if not capacity.get(EPHEMERAL_STORAGE):
        overhead = Resources({name: value for name, value in overhead.items() if name != EPHEMERAL_STORAGE})
    return overhead
