"""Well-known label, annotation, taint and finalizer names (Karpenter v1 and Kubernetes)."""

from __future__ import annotations

from collections.abc import Mapping

# Kubernetes well-known labels.
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
WINDOWS_BUILD = "node.kubernetes.io/windows-build"
EXCLUDE_FROM_LB = "node.kubernetes.io/exclude-from-external-load-balancers"

# Karpenter core.
GROUP = "karpenter.sh"
NODEPOOL = "karpenter.sh/nodepool"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
REGISTERED = "karpenter.sh/registered"
INITIALIZED = "karpenter.sh/initialized"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
DO_NOT_SYNC_TAINTS = "karpenter.sh/do-not-sync-taints"
NODEPOOL_HASH = "karpenter.sh/nodepool-hash"
NODEPOOL_HASH_VERSION = "karpenter.sh/nodepool-hash-version"
NODECLAIM_TERMINATION_TIMESTAMP = "karpenter.sh/nodeclaim-termination-timestamp"
MIN_VALUES_RELAXED = "karpenter.sh/nodeclaim-min-values-relaxed"
TERMINATION_FINALIZER = "karpenter.sh/termination"
# The EC2NodeClass's: held until no NodeClaim uses the class and its launch templates and profiles are gone.
NODECLASS_TERMINATION_FINALIZER = "karpenter.k8s.aws/termination"
DISRUPTED_TAINT_KEY = "karpenter.sh/disrupted"
UNREGISTERED_TAINT_KEY = "karpenter.sh/unregistered"
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"

CAPACITY_TYPE_SPOT = "spot"
CAPACITY_TYPE_ON_DEMAND = "on-demand"
CAPACITY_TYPE_RESERVED = "reserved"
CAPACITY_TYPES = (CAPACITY_TYPE_RESERVED, CAPACITY_TYPE_SPOT, CAPACITY_TYPE_ON_DEMAND)

# EKS managed node groups label their nodes' capacity type under their own key and spelling.
EKS_CAPACITY_TYPE = "eks.amazonaws.com/capacityType"
_EKS_CAPACITY_TYPES = {"ON_DEMAND": CAPACITY_TYPE_ON_DEMAND, "SPOT": CAPACITY_TYPE_SPOT,
                       "CAPACITY_BLOCK": CAPACITY_TYPE_RESERVED}


def capacity_type_of(labels: Mapping[str, str]) -> str:
    """``karpenter.sh/capacity-type``, else a managed node group's ``eks.amazonaws.com/capacityType``
    (``ON_DEMAND``, ``SPOT``, ``CAPACITY_BLOCK``) in Karpenter's spelling; "" when neither says."""
    value = labels.get(CAPACITY_TYPE)
    if value:
        return value
    return _EKS_CAPACITY_TYPES.get(labels.get(EKS_CAPACITY_TYPE, ""), "")

# Karpenter AWS provider.
AWS_GROUP = "karpenter.k8s.aws"
EC2NODECLASS = "karpenter.k8s.aws/ec2nodeclass"
INSTANCE_CATEGORY = "karpenter.k8s.aws/instance-category"
INSTANCE_FAMILY = "karpenter.k8s.aws/instance-family"
INSTANCE_GENERATION = "karpenter.k8s.aws/instance-generation"
INSTANCE_SIZE = "karpenter.k8s.aws/instance-size"
INSTANCE_CPU = "karpenter.k8s.aws/instance-cpu"
INSTANCE_MEMORY = "karpenter.k8s.aws/instance-memory"
INSTANCE_HYPERVISOR = "karpenter.k8s.aws/instance-hypervisor"
INSTANCE_GPU_NAME = "karpenter.k8s.aws/instance-gpu-name"
INSTANCE_GPU_MANUFACTURER = "karpenter.k8s.aws/instance-gpu-manufacturer"
INSTANCE_GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"
INSTANCE_GPU_MEMORY = "karpenter.k8s.aws/instance-gpu-memory"
ZONE_ID = "topology.k8s.aws/zone-id"
NITRO_SANDBOX = "karpenter.k8s.aws/nitro-sandbox"  # Nitro Enclaves support, "true"/"false"
# Capacity reservations (the ``reserved`` capacity type): set on reserved offerings and the nodes launched into them.
CAPACITY_RESERVATION_ID = "karpenter.k8s.aws/capacity-reservation-id"
CAPACITY_RESERVATION_TYPE = "karpenter.k8s.aws/capacity-reservation-type"  # default | capacity-block
CAPACITY_RESERVATION_INTERRUPTIBLE = "karpenter.k8s.aws/capacity-reservation-interruptible"  # "true" | "false"
RESERVATION_LABELS = (CAPACITY_RESERVATION_ID, CAPACITY_RESERVATION_TYPE, CAPACITY_RESERVATION_INTERRUPTIBLE)
RESERVATION_TYPE_DEFAULT = "default"
RESERVATION_TYPE_CAPACITY_BLOCK = "capacity-block"


def reservation_labels(reservation_id: str, reservation_type: str, interruptible: bool) -> dict[str, str]:
    """The labels of a node launched into a capacity reservation (none when ``reservation_id`` is empty)."""
    if not reservation_id:
        return {}
    return {
        CAPACITY_RESERVATION_ID: reservation_id,
        CAPACITY_RESERVATION_TYPE: reservation_type or RESERVATION_TYPE_DEFAULT,
        CAPACITY_RESERVATION_INTERRUPTIBLE: "true" if interruptible else "false",
    }

# NodeClaim annotations saying a NodeOverlay changed the prices / capacity it was planned with.
PRICE_OVERLAY_APPLIED = "karpenter.sh/price-overlay-applied"
CAPACITY_OVERLAY_APPLIED = "karpenter.sh/capacity-overlay-applied"

# Labels whose values come from instance types/offerings, so a NodePool need not define them.
WELL_KNOWN_LABELS = frozenset(
    {
        NODEPOOL,
        ZONE,
        REGION,
        INSTANCE_TYPE,
        ARCH,
        OS,
        CAPACITY_TYPE,
        WINDOWS_BUILD,
        ZONE_ID,
        INSTANCE_CATEGORY,
        INSTANCE_FAMILY,
        INSTANCE_GENERATION,
        INSTANCE_SIZE,
        INSTANCE_CPU,
        INSTANCE_MEMORY,
        INSTANCE_HYPERVISOR,
        INSTANCE_GPU_NAME,
        INSTANCE_GPU_MANUFACTURER,
        INSTANCE_GPU_COUNT,
        INSTANCE_GPU_MEMORY,
        "karpenter.k8s.aws/instance-cpu-manufacturer",
        "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
        "karpenter.k8s.aws/instance-encryption-in-transit-supported",
        "karpenter.k8s.aws/instance-local-nvme",
        "karpenter.k8s.aws/instance-ebs-bandwidth",
        "karpenter.k8s.aws/instance-network-bandwidth",
        "karpenter.k8s.aws/instance-accelerator-name",
        "karpenter.k8s.aws/instance-accelerator-manufacturer",
        "karpenter.k8s.aws/instance-accelerator-count",
        "karpenter.k8s.aws/instance-capability-flex",
        "karpenter.k8s.aws/instance-tenancy",
        NITRO_SANDBOX,
        "karpenter.k8s.aws/placement-group-id",  # types of a NodeClass with a placement group carry it
        # Types without a reserved offering declare these DoesNotExist; reserved offerings carry them.
        CAPACITY_RESERVATION_ID,
        CAPACITY_RESERVATION_TYPE,
        CAPACITY_RESERVATION_INTERRUPTIBLE,
    }
)

# Pre-v1 label keys that Karpenter rewrites to their stable names.
NORMALIZED_LABELS = {
    "failure-domain.beta.kubernetes.io/zone": ZONE,
    "failure-domain.beta.kubernetes.io/region": REGION,
    "beta.kubernetes.io/arch": ARCH,
    "beta.kubernetes.io/os": OS,
    "beta.kubernetes.io/instance-type": INSTANCE_TYPE,
    "topology.ebs.csi.aws.com/zone": ZONE,
}

# Taints that uninitialized managed nodes carry for a while and that scheduling ignores there.
EPHEMERAL_TAINT_KEYS = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.cloudprovider.kubernetes.io/uninitialized",
        UNREGISTERED_TAINT_KEY,
    }
)
EPHEMERAL_TAINT_PREFIX = "readiness.k8s.io/"

CRITICAL_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
