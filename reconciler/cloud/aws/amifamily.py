"""AMI families: the per-family switches that change capacity, overhead and bootstrap.

Karpenter treats AL2, AL2023, Bottlerocket, Windows and Custom differently in a
handful of places (ENI-limited pod density, which pod count kube-reserved memory
is computed from, podsPerCore support, the device holding ephemeral storage).
Those differences live here as data so the formulas in ``allocatable`` stay flat.
"""

from __future__ import annotations

from dataclasses import dataclass

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


GIB_MILLI = parse_quantity("1Gi")

AL2 = AMIFamily("AL2", True, True, True, "/dev/xvda", 20 * GIB_MILLI)
AL2023 = AMIFamily("AL2023", True, True, True, "/dev/xvda", 20 * GIB_MILLI)
# Bottlerocket boots from a 4Gi OS volume; pods live on the 20Gi data volume.
BOTTLEROCKET = AMIFamily("Bottlerocket", True, False, False, "/dev/xvdb", 20 * GIB_MILLI)
WINDOWS2019 = AMIFamily(
    "Windows2019", False, False, True, "/dev/sda1", 50 * GIB_MILLI, os="windows", windows_build="10.0.17763"
)
WINDOWS2022 = AMIFamily(
    "Windows2022", False, False, True, "/dev/sda1", 50 * GIB_MILLI, os="windows", windows_build="10.0.20348"
)
WINDOWS2025 = AMIFamily(
    "Windows2025", False, False, True, "/dev/sda1", 50 * GIB_MILLI, os="windows", windows_build="10.0.26100"
)
CUSTOM = AMIFamily("Custom", True, True, True, "", 20 * GIB_MILLI)

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
