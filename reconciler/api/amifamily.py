"""AMI families: the per-family switches that change capacity, overhead and bootstrap.

Karpenter treats AL2, AL2023, Bottlerocket, Windows and Custom differently in a
handful of places (ENI-limited pod density, which pod count kube-reserved memory
is computed from, podsPerCore support, the device holding ephemeral storage).
Those differences live here as data so the formulas in ``allocatable`` stay flat. They are part of the
EC2NodeClass API (``spec.amiFamily``): the field-support check reads them as the AWS provider does, so
they sit in ``api`` below both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.model.quantity import parse_quantity


@dataclass(slots=True, frozen=True)
class AMIFamily:
    name: str
    # ENIs x (IPv4/ENI - 1) + 2 pods unless maxPods is set; otherwise 110 (Windows).
    eni_limited_pod_density: bool
    # kube-reserved memory uses the ENI-limited pod count even when maxPods lowers the real count.
    eni_limited_memory_overhead: bool
    pods_per_core_enabled: bool
    # Device whose EBS volume backs the kubelet's ephemeral storage.
    ephemeral_device: str
    # Size of that volume when the NodeClass defines no block device mapping for it (milli-bytes).
    default_ephemeral_milli: int
    os: str = "linux"
    # ``node.kubernetes.io/windows-build`` of the family's nodes (Windows only; Karpenter's values).
    windows_build: str = ""
    # The bootstrap passes the whole ``spec.kubelet`` map through (nodeadm); else only MANAGED_KUBELET_FIELDS.
    arbitrary_kubelet_config: bool = False
    # The bootstrap can assemble the instance-store disks for ``instanceStorePolicy: RAID0``.
    raid0_supported: bool = True


GIB_MILLI = parse_quantity("1Gi")

AL2 = AMIFamily("AL2", True, True, True, "/dev/xvda", 20 * GIB_MILLI)
AL2023 = AMIFamily("AL2023", True, True, True, "/dev/xvda", 20 * GIB_MILLI, arbitrary_kubelet_config=True)
# Bottlerocket boots from a 4Gi OS volume; pods live on the 20Gi data volume.
BOTTLEROCKET = AMIFamily("Bottlerocket", True, False, False, "/dev/xvdb", 20 * GIB_MILLI)
WINDOWS2019 = AMIFamily(
    "Windows2019", False, False, True, "/dev/sda1", 50 * GIB_MILLI, os="windows", windows_build="10.0.17763",
    raid0_supported=False,
)
WINDOWS2022 = AMIFamily(
    "Windows2022", False, False, True, "/dev/sda1", 50 * GIB_MILLI, os="windows", windows_build="10.0.20348",
    raid0_supported=False,
)
WINDOWS2025 = AMIFamily(
    "Windows2025", False, False, True, "/dev/sda1", 50 * GIB_MILLI, os="windows", windows_build="10.0.26100",
    raid0_supported=False,
)
# Custom owns its user data: Karpenter renders nothing, so nothing it could drop.
CUSTOM = AMIFamily("Custom", True, True, True, "", 20 * GIB_MILLI, arbitrary_kubelet_config=True)

FAMILIES: dict[str, AMIFamily] = {
    family.name: family
    for family in (AL2, AL2023, BOTTLEROCKET, WINDOWS2019, WINDOWS2022, WINDOWS2025, CUSTOM)
}
# Alias prefixes in ``amiSelectorTerms[].alias`` (e.g. ``al2023@latest``) and the family each selects.
ALIAS_FAMILIES: dict[str, AMIFamily] = {
    "al2": AL2,
    "al2023": AL2023,
    "bottlerocket": BOTTLEROCKET,
    "windows2019": WINDOWS2019,
    "windows2022": WINDOWS2022,
    "windows2025": WINDOWS2025,
}
DEFAULT = AL2023


class UnknownAMIFamilyError(ValueError):
    pass


def get_family(name: str | None, *, path: str = "spec.amiFamily") -> AMIFamily:
    """The family called ``name`` (None = AL2023, Karpenter's default for v1 NodeClasses)."""
    if not name:
        return DEFAULT
    family = FAMILIES.get(name)
    if family is None:
        raise UnknownAMIFamilyError(f"{path}: unknown AMI family {name!r} (known: {', '.join(FAMILIES)})")
    return family


def family_of_nodeclass(nodeclass: dict | None) -> AMIFamily:
    """The family an EC2NodeClass resolves to: ``spec.amiFamily``, else its alias, else AL2023."""
    spec = (nodeclass or {}).get("spec") or {}
    if spec.get("amiFamily"):
        return get_family(spec["amiFamily"])
    for index, term in enumerate(spec.get("amiSelectorTerms") or []):
        alias = (term or {}).get("alias")
        if alias:
            prefix = str(alias).partition("@")[0].lower()
            family = ALIAS_FAMILIES.get(prefix)
            if family is None:
                raise UnknownAMIFamilyError(
                    f"spec.amiSelectorTerms[{index}].alias: unknown family {prefix!r} "
                    f"(known: {', '.join(ALIAS_FAMILIES)})"
                )
            return family
    return DEFAULT


# The ``spec.kubelet`` fields Karpenter maps into every family's bootstrap (upstream's ParsedKubeletConfig).
MANAGED_KUBELET_FIELDS = frozenset(
    {
        "clusterDNS",
        "maxPods",
        "podsPerCore",
        "systemReserved",
        "kubeReserved",
        "evictionHard",
        "evictionSoft",
        "evictionSoftGracePeriod",
        "evictionMaxPodGracePeriod",
        "imageGCHighThresholdPercent",
        "imageGCLowThresholdPercent",
        "cpuCFSQuota",
    }
)


def unsupported_settings(family: AMIFamily, spec: Mapping[str, Any] | None) -> list[str]:
    """Why ``spec`` asks for something ``family``'s nodes would not get, one message per problem.

    As upstream's validation: a family that only maps Karpenter's kubelet fields refuses any other
    field, and podsPerCore where it has no setting (Bottlerocket), and more than one clusterDNS entry
    (its bootstrap takes one). Beyond upstream: RAID0 on a family that cannot assemble the array
    (Windows), which Karpenter would still count as the node's ephemeral storage.
    """
    spec = spec or {}
    kubelet = spec.get("kubelet") or {}
    problems = []
    if kubelet and not family.arbitrary_kubelet_config:
        unsupported = sorted(set(kubelet) - MANAGED_KUBELET_FIELDS)
        if kubelet.get("podsPerCore") is not None and not family.pods_per_core_enabled:
            unsupported = sorted({*unsupported, "podsPerCore"})
        if unsupported:
            problems.append(
                f"spec.kubelet has fields not applied by the {family.name} AMI family that would be silently "
                f"dropped: {', '.join(unsupported)}"
            )
        dns = kubelet.get("clusterDNS") or []
        if len(dns) > 1:
            problems.append(
                f"spec.kubelet.clusterDNS: the {family.name} AMI family doesn't accept multiple entries, only one, "
                f"but {len(dns)} were set"
            )
    if spec.get("instanceStorePolicy") == "RAID0" and not family.raid0_supported:
        problems.append(
            f"spec.instanceStorePolicy: RAID0 is not supported by the {family.name} AMI family (its bootstrap "
            "cannot assemble the instance-store disks, so they would be counted as storage the node lacks)"
        )
    return problems
