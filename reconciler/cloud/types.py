"""The cloud-provider port: instance types, offerings, launch requests, instances, errors.

Everything provider-specific (AWS, the simulator) hides behind ``CloudProvider``.
The engine only sees ``InstanceType``s with their ``Offering``s and asks the
provider to launch, look up and delete ``Instance``s for NodeClaims.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from reconciler.model import labels as wk
from reconciler.model.resources import EMPTY, Resources

# How long an offering that failed to launch (insufficient capacity) or whose spot instance was interrupted
# stays unavailable: Karpenter's unavailable-offerings TTL (aws/karpenter-provider-aws#1715). Every provider's
# cache uses it: the AWS one (cloud.aws.ice) and the simulated cloud's.
UNAVAILABLE_OFFERING_TTL_SECONDS = 180.0


@dataclass(slots=True, frozen=True)
class Offering:
    """One way to buy an instance type: a capacity type in a zone, at a price.

    ``zone_id`` is the zone's account-independent ID (``use1-az1``; "" when the catalogue does not
    know it); ``price_source`` says where ``price`` came from (see ``cloud/prices.py``).

    A ``reserved`` offering is one capacity reservation: ``reservation_id``, its type (``default`` or
    ``capacity-block``), whether it is interruptible, and ``reservation_capacity``, the instances still
    free in it (the scheduler never plans more claims into it than that)."""

    zone: str
    capacity_type: str
    price: float
    available: bool = True
    zone_id: str = ""
    price_source: str = ""
    reservation_id: str = ""
    reservation_type: str = ""
    reservation_capacity: int = 0
    interruptible: bool = False

    def reservation_labels(self) -> dict[str, str]:
        """The labels a node launched into this offering's reservation carries (none for other offerings)."""
        return wk.reservation_labels(self.reservation_id, self.reservation_type, self.interruptible)


@dataclass(slots=True)
class InstanceType:
    """A launchable machine shape.

    ``labels`` holds the single-valued well-known labels of the type
    (instance-type, arch, os, region, ``karpenter.k8s.aws/instance-*``); zone and
    capacity type come from ``offerings``. ``overhead`` is kube-reserved +
    system-reserved + eviction threshold, so ``allocatable = capacity - overhead``.
    """

    name: str
    capacity: Resources
    overhead: Resources = EMPTY
    offerings: tuple[Offering, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    # A NodeOverlay changed offering prices / added capacity (the claim's overlay annotations say so).
    price_overlaid: bool = False
    capacity_overlaid: bool = False

    @property
    def allocatable(self) -> Resources:
        return (self.capacity - self.overhead).clamp_non_negative()

    @property
    def arch(self) -> str:
        return self.labels.get(wk.ARCH, "amd64")

    def available_offerings(self) -> list[Offering]:
        return [o for o in self.offerings if o.available]

    def offering(self, zone: str | None, capacity_type: str | None) -> Offering | None:
        """The offering a machine of this type in ``zone`` with ``capacity_type`` was launched from."""
        return next((o for o in self.offerings if o.zone == zone and o.capacity_type == capacity_type), None)

    def cheapest_offering(
        self, zones: Sequence[str] | None = None, capacity_types: Sequence[str] | None = None
    ) -> Offering | None:
        """Cheapest available offering within the allowed zones and capacity types (None = any)."""
        best: Offering | None = None
        for offering in self.offerings:
            if not offering.available:
                continue
            if zones is not None and offering.zone not in zones:
                continue
            if capacity_types is not None and offering.capacity_type not in capacity_types:
                continue
            if best is None or (offering.price, offering.zone, offering.capacity_type) < (
                best.price,
                best.zone,
                best.capacity_type,
            ):
                best = offering
        return best


# Capacity that marks a type as special-purpose: GPUs and ML accelerators (the names Karpenter's AWS
# provider checks; other providers' types simply never carry them).
EXOTIC_RESOURCES = (
    "nvidia.com/gpu",
    "amd.com/gpu",
    "habana.ai/gaudi",
    "aws.amazon.com/neuron",
    "aws.amazon.com/neuroncore",
)


def is_exotic(instance_type: InstanceType) -> bool:
    """Bare metal, GPU or accelerator types: launched only when nothing generic would do."""
    return _is_exotic(instance_type.name, instance_type.labels.get(wk.INSTANCE_SIZE), instance_type.capacity)


@functools.lru_cache(maxsize=8192)
def _is_exotic(name: str, size: str | None, capacity: Resources) -> bool:
    # Cached by value: every launch asks this of every option (hundreds per claim).
    if "metal" in (size if size is not None else name.partition(".")[2]):
        return True
    return any(capacity.amount(resource) > 0 for resource in EXOTIC_RESOURCES)


def prefer_generic(instance_types: Sequence[InstanceType]) -> list[InstanceType]:
    """The generic types when any remain, else all of them (upstream's exotic instance-type filter).

    Applied at launch to the options that can launch, so a pod that fits on a c6a never gets a
    metal or GPU machine merely because it happened to be listed, while a pool or pod that asks
    for GPUs keeps them."""
    generic = [t for t in instance_types if not is_exotic(t)]
    return generic or list(instance_types)


@dataclass(slots=True)
class LaunchRequest:
    """What a NodeClaim asks of the cloud: one instance from these options.

    ``instance_types`` is ordered cheapest first (as the scheduler left it);
    ``zones``/``capacity_types`` are the allowed values (None = unconstrained) and
    ``excluded_zones``/``excluded_capacity_types`` the values a NotIn rules out, which
    hold even when no In list exists (a pod's ``zone NotIn [z3]`` alone must keep z3 out).
    Offering choice goes through ``allows`` so every provider reads the same fields.
    """

    nodeclaim: str
    nodepool: str
    nodeclass: str
    instance_types: Sequence[str]
    capacity_types: Sequence[str] | None = None
    zones: Sequence[str] | None = None
    requests: Resources = EMPTY
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Mapping[str, Any]] = ()
    startup_taints: Sequence[Mapping[str, Any]] = ()
    tags: Mapping[str, str] = field(default_factory=dict)
    excluded_zones: frozenset[str] = frozenset()
    excluded_capacity_types: frozenset[str] = frozenset()
    zone_ids: Sequence[str] | None = None
    excluded_zone_ids: frozenset[str] = frozenset()
    # Idempotency token of this launch attempt (EC2's ClientToken): the same for every try of one attempt, so
    # a request repeated after a crash or a lost answer returns the instance already launched, not a second one.
    client_token: str = ""
    # ``karpenter.k8s.aws/capacity-reservation-id``: the reservations the scheduler reserved for this claim
    # (None = unconstrained); an offering outside a reservation is allowed only when the key may be absent.
    reservation_ids: Sequence[str] | None = None
    excluded_reservation_ids: frozenset[str] = frozenset()
    # ``karpenter.sh/price-overlay-applied``: NodeOverlays set the prices the claim was planned with, so the
    # provider launches by those prices (its ``price_overlays``) rather than by the catalogue's.
    price_overlaid: bool = False

    def allows_zone(self, zone: str) -> bool:
        return zone not in self.excluded_zones and (self.zones is None or zone in self.zones)

    def allows_zone_id(self, zone_id: str) -> bool:
        """An offering whose zone ID the catalogue does not know ("") is not judged by it."""
        if not zone_id:
            return True
        return zone_id not in self.excluded_zone_ids and (self.zone_ids is None or zone_id in self.zone_ids)

    def allows_capacity_type(self, capacity_type: str) -> bool:
        return capacity_type not in self.excluded_capacity_types and (
            self.capacity_types is None or capacity_type in self.capacity_types
        )

    def allows_reservation(self, reservation_id: str) -> bool:
        """An offering outside any reservation ("") passes unless the claim names reservations (In); an
        empty list is ``DoesNotExist``: only offerings outside reservations."""
        if not reservation_id:
            return not self.reservation_ids
        return reservation_id not in self.excluded_reservation_ids and (
            self.reservation_ids is None or reservation_id in self.reservation_ids
        )

    def allows(self, offering: Offering) -> bool:
        """Whether the claim's zone, zone-ID, capacity-type and reservation requirements admit this offering."""
        return (
            self.allows_zone(offering.zone)
            and self.allows_zone_id(offering.zone_id)
            and self.allows_capacity_type(offering.capacity_type)
            and self.allows_reservation(offering.reservation_id)
        )

    @classmethod
    def from_nodeclaim(cls, manifest: Mapping[str, Any]) -> LaunchRequest:
        """Read a ``karpenter.sh/v1`` NodeClaim manifest (as stored in the API server)."""
        metadata = manifest.get("metadata") or {}
        spec = manifest.get("spec") or {}
        labels = dict(metadata.get("labels") or {})
        allowed: dict[str, list[str] | None] = {
            wk.INSTANCE_TYPE: None, wk.CAPACITY_TYPE: None, wk.ZONE: None, wk.ZONE_ID: None,
            wk.CAPACITY_RESERVATION_ID: None,
        }
        excluded: dict[str, set[str]] = {key: set() for key in allowed}
        for requirement in spec.get("requirements") or []:
            key = wk.NORMALIZED_LABELS.get(requirement.get("key", ""), requirement.get("key", ""))
            if key not in allowed:
                continue
            values = [str(v) for v in requirement.get("values") or []]
            operator = requirement.get("operator")
            if operator == "In":
                current = allowed[key]
                allowed[key] = values if current is None else [v for v in current if v in values]
            elif operator == "NotIn":
                excluded[key].update(values)
            elif operator == "DoesNotExist":
                allowed[key] = []
        for key, permitted in allowed.items():
            if permitted is not None:
                allowed[key] = [v for v in permitted if v not in excluded[key]]
        ref = spec.get("nodeClassRef") or {}
        annotations = metadata.get("annotations") or {}
        return cls(
            price_overlaid=annotations.get(wk.PRICE_OVERLAY_APPLIED) == "true",
            nodeclaim=str(metadata.get("name", "")),
            nodepool=str(labels.get(wk.NODEPOOL, "")),
            nodeclass=str(ref.get("name", "")),
            instance_types=allowed[wk.INSTANCE_TYPE] or [],
            capacity_types=allowed[wk.CAPACITY_TYPE],
            zones=allowed[wk.ZONE],
            requests=Resources.from_manifest((spec.get("resources") or {}).get("requests")),
            labels=labels,
            taints=list(spec.get("taints") or []),
            startup_taints=list(spec.get("startupTaints") or []),
            excluded_zones=frozenset(excluded[wk.ZONE]),
            excluded_capacity_types=frozenset(excluded[wk.CAPACITY_TYPE]),
            zone_ids=allowed[wk.ZONE_ID],
            excluded_zone_ids=frozenset(excluded[wk.ZONE_ID]),
            reservation_ids=allowed[wk.CAPACITY_RESERVATION_ID],
            excluded_reservation_ids=frozenset(excluded[wk.CAPACITY_RESERVATION_ID]),
        )


@dataclass(slots=True)
class Instance:
    """A launched machine as the cloud reports it."""

    provider_id: str
    instance_type: str
    zone: str
    capacity_type: str
    price: float
    nodeclaim: str = ""
    nodepool: str = ""
    image_id: str = ""
    state: str = "running"
    launched_at: datetime | None = None
    capacity: Resources = EMPTY
    allocatable: Resources = EMPTY
    labels: Mapping[str, str] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)
    price_source: str = ""


class CloudError(Exception):
    """Base class for errors a provider reports to the engine."""


class InsufficientCapacityError(CloudError):
    """No requested offering could be launched; ``offerings`` are (instance type, zone, capacity type)."""

    def __init__(self, message: str, offerings: Sequence[tuple[str, str, str]] = ()) -> None:
        super().__init__(message)
        self.offerings = list(offerings)


class NodeClassNotReadyError(CloudError):
    """The NodeClaim's node class is missing or not Ready; the claim is deleted and pods retried."""


class InstanceNotFoundError(CloudError):
    """The instance does not exist (any more); for delete this means done."""


class LaunchPendingError(CloudError):
    """A launch of this NodeClaim was already made (its idempotency token was used) but its instance cannot be
    seen yet (EC2's eventual consistency): wait for it instead of launching another."""


class LaunchOutcomeUnknown(CloudError):
    """The launch request went out but no answer came back (connection lost, timeout): an instance may exist.
    The next try must reuse the same idempotency token."""


class CloudProvider(Protocol):
    """What the engine needs from a cloud. Methods are async: adapters do I/O."""

    name: str

    async def instance_types(self, nodeclass: Mapping[str, Any] | None) -> list[InstanceType]:
        """All instance types usable with ``nodeclass`` (an EC2NodeClass manifest, or None).

        Availability lives on offerings: unavailable types are returned with no
        available offering rather than left out.
        """
        ...

    async def create(self, request: LaunchRequest, nodeclass: Mapping[str, Any] | None) -> Instance:
        """Launch one instance for a NodeClaim; raise ``InsufficientCapacityError`` when none can."""
        ...

    async def delete(self, provider_id: str) -> None:
        """Terminate; idempotent. Raises ``InstanceNotFoundError`` when it is already gone."""
        ...

    async def get(self, provider_id: str) -> Instance:
        ...

    async def list(self) -> list[Instance]:
        """Every instance this cluster's reconciler owns (by tag), for garbage collection."""
        ...

    async def is_drifted(self, instance: Instance, nodeclass: Mapping[str, Any] | None) -> str | None:
        """A drift reason (e.g. ``AMIDrifted``) when the instance no longer matches its node class."""
        ...
