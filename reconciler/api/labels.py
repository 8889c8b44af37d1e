"""Label keys and values: Kubernetes syntax, Karpenter's well-known and restricted labels.

Follows Karpenter v1 (core ``pkg/apis/v1/labels.go`` plus the AWS provider's
additions): the ``karpenter.sh`` and ``karpenter.k8s.aws`` domains and their
sub-domains are reserved except for the well-known labels below, and
``kubernetes.io/hostname`` is restricted. Since Karpenter v1.9 the
``kubernetes.io``/``k8s.io`` domains are no longer restricted.
"""

from __future__ import annotations

import functools
import re

# Kubernetes label syntax (k8s.io/apimachinery validation.IsQualifiedName / IsValidLabelValue).
NAME_PART = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
DNS1123_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
QUALIFIED_NAME_PATTERN = rf"^({DNS1123_SUBDOMAIN}(\/))?{NAME_PART}$"
LABEL_VALUE_PATTERN = rf"^({NAME_PART})?$"
LABEL_KEY_MAX_LENGTH = 316  # 253 (prefix) + 1 + 62, as in Karpenter's CRD
LABEL_VALUE_MAX_LENGTH = 63

_NAME_PART = re.compile(rf"^{NAME_PART}$")
_PREFIX = re.compile(rf"^{DNS1123_SUBDOMAIN}$")
_LABEL_VALUE = re.compile(LABEL_VALUE_PATTERN)

KARPENTER_GROUP = "karpenter.sh"
AWS_GROUP = "karpenter.k8s.aws"

NODEPOOL_LABEL = "karpenter.sh/nodepool"
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
ARCH_LABEL = "kubernetes.io/arch"
OS_LABEL = "kubernetes.io/os"
WINDOWS_BUILD_LABEL = "node.kubernetes.io/windows-build"
EC2NODECLASS_LABEL = "karpenter.k8s.aws/ec2nodeclass"

CAPACITY_TYPES = ("on-demand", "spot", "reserved")

AWS_WELL_KNOWN_LABELS = frozenset(
    f"{AWS_GROUP}/{name}"
    for name in (
        "capacity-reservation-id",
        "capacity-reservation-type",
        "capacity-reservation-interruptible",
        "instance-hypervisor",
        "instance-encryption-in-transit-supported",
        "nitro-sandbox",
        "instance-category",
        "instance-capability-flex",
        "instance-family",
        "instance-generation",
        "instance-size",
        "instance-local-nvme",
        "instance-cpu",
        "instance-cpu-manufacturer",
        "instance-cpu-sustained-clock-speed-mhz",
        "instance-memory",
        "instance-ebs-bandwidth",
        "instance-network-bandwidth",
        "instance-gpu-name",
        "instance-gpu-manufacturer",
        "instance-gpu-count",
        "instance-gpu-memory",
        "instance-accelerator-name",
        "instance-accelerator-manufacturer",
        "instance-accelerator-count",
        "instance-tenancy",
        "placement-group-id",
        "placement-group-partition",
    )
) | {"topology.k8s.aws/zone-id"}

WELL_KNOWN_LABELS = (
    frozenset(
        {
            NODEPOOL_LABEL,
            ZONE_LABEL,
            REGION_LABEL,
            INSTANCE_TYPE_LABEL,
            ARCH_LABEL,
            OS_LABEL,
            CAPACITY_TYPE_LABEL,
            WINDOWS_BUILD_LABEL,
        }
    )
    | AWS_WELL_KNOWN_LABELS
)

RESTRICTED_LABEL_DOMAINS = (KARPENTER_GROUP, AWS_GROUP)
RESTRICTED_LABELS = frozenset({HOSTNAME_LABEL})

# Legacy keys Karpenter translates to their stable names wherever it builds requirements.
NORMALIZED_LABELS = {
    "failure-domain.beta.kubernetes.io/zone": ZONE_LABEL,
    "failure-domain.beta.kubernetes.io/region": REGION_LABEL,
    "beta.kubernetes.io/arch": ARCH_LABEL,
    "beta.kubernetes.io/os": OS_LABEL,
    "beta.kubernetes.io/instance-type": INSTANCE_TYPE_LABEL,
}

# Values a requirement on these keys must draw from (at least one known value per In requirement).
WELL_KNOWN_VALUES = {
    CAPACITY_TYPE_LABEL: frozenset(CAPACITY_TYPES),
    f"{AWS_GROUP}/instance-tenancy": frozenset({"default", "dedicated"}),
}


def normalize_label_key(key: str) -> str:
    """The stable key for a legacy (beta) label key; other keys are returned unchanged."""
    return NORMALIZED_LABELS.get(key, key)


def label_domain(key: str) -> str:
    prefix, slash, _ = key.partition("/")
    return prefix if slash else ""


@functools.lru_cache(maxsize=65536)  # a snapshot repeats the same keys and values thousands of times
def qualified_name_problem(key: str) -> str | None:
    """Why ``key`` is not a valid label key (``[prefix/]name``), or ``None``."""
    prefix, slash, name = key.rpartition("/")
    if not key:
        return "label key must not be empty"
    if slash and not prefix:
        return f"label key {key!r} has an empty prefix"
    if len(name) > 63:
        return f"label key {key!r}: name part must be at most 63 characters"
    if not _NAME_PART.match(name):
        return (
            f"label key {key!r}: name part must consist of alphanumerics, '-', '_' or '.', "
            "and start and end with an alphanumeric"
        )
    if slash:
        if len(prefix) > 253:
            return f"label key {key!r}: prefix must be at most 253 characters"
        if not _PREFIX.match(prefix):
            return f"label key {key!r}: prefix must be a DNS subdomain (lowercase alphanumerics, '-' and '.')"
    return None


@functools.lru_cache(maxsize=65536)
def label_value_problem(value: str) -> str | None:
    """Why ``value`` is not a valid label value, or ``None``."""
    if len(value) > LABEL_VALUE_MAX_LENGTH:
        return f"label value {value[:20]!r}... must be at most {LABEL_VALUE_MAX_LENGTH} characters"
    if not _LABEL_VALUE.match(value):
        return (
            f"label value {value!r} must be empty or consist of alphanumerics, '-', '_' or '.', "
            "and start and end with an alphanumeric"
        )
    return None


def restricted_label_problem(
    key: str, *, allow_nodepool: bool, extra_allowed: frozenset[str] = frozenset()
) -> str | None:
    """Why Karpenter forbids ``key`` in a NodePool (or, with ``allow_nodepool``, a NodeClaim), or ``None``."""
    if key == NODEPOOL_LABEL and not allow_nodepool:
        return f"label {key!r} is restricted (Karpenter sets it)"
    if key in WELL_KNOWN_LABELS or key in extra_allowed:
        return None
    domain = label_domain(key)
    for restricted in RESTRICTED_LABEL_DOMAINS:
        if _in_domain(domain, restricted):
            return (
                f"label domain {restricted!r} is restricted; use a well-known label "
                f"or a custom label outside {', '.join(RESTRICTED_LABEL_DOMAINS)} (got {key!r})"
            )
    if key in RESTRICTED_LABELS:
        return f"label {key!r} is restricted"
    return None


def _in_domain(domain: str, restricted: str) -> bool:
    return domain == restricted or domain.endswith("." + restricted)


def label_key_problem(key: str, *, allow_nodepool: bool, extra_allowed: frozenset[str] = frozenset()) -> str | None:
    return qualified_name_problem(key) or restricted_label_problem(
        key, allow_nodepool=allow_nodepool, extra_allowed=extra_allowed
    )


def restricted_key_cel(
    *, allow_nodepool: bool, extra_allowed: frozenset[str] = frozenset(), var: str = "self"
) -> list[tuple[str, str]]:
    """CEL rules (over the key ``var``) equivalent to :func:`restricted_label_problem`."""
    excluded = set() if allow_nodepool else {NODEPOOL_LABEL}
    allowed = (WELL_KNOWN_LABELS | extra_allowed) - excluded
    rules = []
    for domain in RESTRICTED_LABEL_DOMAINS:
        in_domain = sorted(key for key in allowed if _in_domain(label_domain(key), domain))
        allowed_list = ", ".join(f"'{key}'" for key in in_domain)
        escaped = domain.replace(".", "\\\\.")
        rules.append(
            (
                f"{var} in [{allowed_list}] || !{var}.matches('^([^/]+\\\\.)?{escaped}/')",
                f'label domain "{domain}" is restricted',
            )
        )
    if not allow_nodepool:
        rules.append((f"{var} != '{NODEPOOL_LABEL}'", f'label "{NODEPOOL_LABEL}" is restricted'))
    rules.append((f"{var} != '{HOSTNAME_LABEL}'", f'label "{HOSTNAME_LABEL}" is restricted'))
    return rules
