"""Instance-type discovery: DescribeInstanceTypes + zone offerings, priced, filtered per NodeClass.

EC2 data is fetched on first use and refreshed every 12 hours. Per NodeClass,
the capacity/overhead/labels of each type are cached by the settings that
change them (AMI family, kubelet, block devices, instance-store policy); the
offerings are rebuilt on every call so that prices and the
unavailable-offerings cache are always current. A type the NodeClass cannot
run (no compatible AMI, no zone with a subnet) is returned with every
offering unavailable rather than left out.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconciler.api.amifamily import AL2023
from reconciler.cloud.aws import placementgroup
from reconciler.cloud.aws.capacityreservation import CapacityReservation, reserved_offerings
from reconciler.cloud.aws.catalog import InstanceTypeInfo
from reconciler.cloud.aws.clients import AwsCaller
from reconciler.cloud.aws.ice import UnavailableOfferings
from reconciler.cloud.aws.instancetype import LAUNCHABLE_CAPACITY_TYPES, NodeClassShape
from reconciler.cloud.aws.metrics import AWSMetrics
from reconciler.cloud.aws.nodeclass import ResolvedNodeClass
from reconciler.cloud.aws.pricing import PriceSource
from reconciler.cloud.aws.reservations import CapacityReservationProvider
from reconciler.cloud.types import InstanceType, Offering

REFRESH_SECONDS = 12 * 3600.0
DESCRIBE_PAGE_SIZE = 100  # DescribeInstanceTypes answers at most 100 types per page
BASE_FILTERS: tuple[dict[str, Any], ...] = (
    {"Name": "supported-virtualization-type", "Values": ["hvm"]},
    {"Name": "processor-info.supported-architecture", "Values": ["x86_64", "arm64"]},
)


@dataclass(slots=True, frozen=True)
class _Shape:
    """The capacity/overhead/labels part of an InstanceType (offerings added per call)."""

    instance_type: InstanceType
    zones: tuple[str, ...]
    runs: bool  # the NodeClass's AMI family boots on this type


class InstanceTypeProvider:
    def __init__(
        self,
        caller: AwsCaller,
        ec2: Any,
        prices: PriceSource,
        unavailable: UnavailableOfferings,
        *,
        region: str,
        extra_filters: Sequence[Mapping[str, Any]] = (),
        vm_memory_overhead_percent: float = 0.075,
        reserved_enis: int = 0,
        clock: Callable[[], float] = time.monotonic,
        zone_ids: Mapping[str, str] | None = None,
        metrics: AWSMetrics | None = None,
        reservations: CapacityReservationProvider | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._reservations = reservations
        self._now = now
        self._caller = caller
        self._metrics = metrics
        self._ec2 = ec2
        self._prices = prices
        self._unavailable = unavailable
        self.region = region
        self._filters = [*BASE_FILTERS, *extra_filters]
        self._vm_overhead = vm_memory_overhead_percent
        self._reserved_enis = reserved_enis
        self._clock = clock
        self._infos: dict[str, InstanceTypeInfo] = {}
        self._zones: dict[str, tuple[str, ...]] = {}
        self._fetched_at: float | None = None
        self._shapes: dict[str, dict[str, _Shape]] = {}
        # Zone name -> zone ID when no NodeClass says (its subnets carry the IDs, as upstream reads them).
        self._zone_ids: dict[str, str] = dict(zone_ids or {})

    @property
    def infos(self) -> Mapping[str, InstanceTypeInfo]:
        return self._infos

    async def refresh(self) -> None:
        # Pages of 100 (the API's maximum; also what AWS sends unasked), each converted as it arrives: the ~900
        # raw types are ~20 MB of parsed XML at once, a transient that set the process's peak RSS at start-up.
        listed: list[InstanceTypeInfo] = await self._caller.paginate(
            self._ec2, "describe_instance_types", "InstanceTypes", convert=InstanceTypeInfo.from_ec2,
            Filters=self._filters, PaginationConfig={"PageSize": DESCRIBE_PAGE_SIZE},
        )
        infos = {info.name: info for info in listed if info.architectures and info.vcpus}
        # With narrowed discovery, ask only for the offerings of the discovered types (fewer rows to parse).
        narrowed = any(f.get("Name") == "instance-type" for f in self._filters) and 0 < len(infos) <= 200
        narrowing: dict[str, Any] = {}
        if narrowed:
            narrowing["Filters"] = [{"Name": "instance-type", "Values": sorted(infos)}]
        offerings = await self._caller.paginate(
            self._ec2, "describe_instance_type_offerings", "InstanceTypeOfferings",
            LocationType="availability-zone", **narrowing,
        )
        zones: dict[str, set[str]] = {}
        for row in offerings:
            zones.setdefault(str(row["InstanceType"]), set()).add(str(row["Location"]))
        if infos != self._infos or zones != {k: set(v) for k, v in self._zones.items()}:
            self._shapes.clear()
        self._infos = infos
        self._zones = {name: tuple(sorted(z)) for name, z in zones.items()}
        if self._metrics is not None:
            for info in infos.values():
                self._metrics.instance_type_cpu.labels(instance_type=info.name).set(info.vcpus)
                self._metrics.instance_type_memory.labels(instance_type=info.name).set(info.memory_mib * 1024 * 1024)
        self._fetched_at = self._clock()

    async def ensure_fresh(self) -> None:
        if self._fetched_at is None or self._clock() - self._fetched_at >= REFRESH_SECONDS:
            await self.refresh()

    async def list(self, nodeclass: ResolvedNodeClass | None) -> list[InstanceType]:
        await self.ensure_fresh()
        shapes = self._shapes_for(nodeclass)
        subnet_zones = nodeclass.zones if nodeclass is not None else None
        zone_ids = dict(self._zone_ids)
        if nodeclass is not None:
            zone_ids.update({s.zone: s.zone_id for s in nodeclass.subnets if s.zone_id})
        placement = nodeclass.placement_group if nodeclass is not None else None
        result = []
        for name, shape in shapes.items():
            base = shape.instance_type
            labels = {**base.labels, placementgroup.LABEL: placement.id} if placement else base.labels
            runnable = shape.runs and (
                nodeclass is None
                or nodeclass.amis is None
                or nodeclass.amis.for_labels(base.labels) is not None
            )
            offerings = self._offerings(name, shape.zones, subnet_zones, runnable, zone_ids)
            if nodeclass is not None and nodeclass.capacity_reservations:
                offerings.extend(self._reserved(name, shape.zones, subnet_zones, runnable, zone_ids,
                                                nodeclass.capacity_reservations))
            result.append(InstanceType(base.name, base.capacity, base.overhead, tuple(offerings), labels))
        return result

    def _shapes_for(self, nodeclass: ResolvedNodeClass | None) -> dict[str, _Shape]:
        shaper = NodeClassShape(
            nodeclass.spec if nodeclass else None,
            nodeclass.family if nodeclass else AL2023,
            nodeclass.kubelet if nodeclass else None,
            vm_overhead_percent=self._vm_overhead,
            reserved_enis=self._reserved_enis,
            placement_strategy=nodeclass.placement_group.strategy if nodeclass and nodeclass.placement_group else None,
        )
        cached = self._shapes.get(shaper.key)
        if cached is not None:
            return cached
        shapes = {}
        for name, info in sorted(self._infos.items()):
            built = shaper.build(info, (), region=self.region)
            if built is not None:
                shapes[name] = _Shape(built, self._zones.get(name, ()), shaper.runs(info))
        self._shapes[shaper.key] = shapes
        return shapes

    def _reserved(
        self,
        name: str,
        zones: Sequence[str],
        subnet_zones: set[str] | None,
        runnable: bool,
        zone_ids: Mapping[str, str],
        reservations: Sequence[CapacityReservation],
    ) -> builtins.list[Offering]:
        """Reserved offerings of the NodeClass's reservations of this type (rebuilt every call: counts move)."""
        provider = self._reservations

        def left(reservation: CapacityReservation) -> int:
            if self._unavailable.is_reservation_unavailable(reservation.id):
                return 0
            return provider.available(reservation.id) if provider is not None else reservation.available

        launchable = [z for z in zones if subnet_zones is None or z in subnet_zones]
        prices = [p for z in launchable if (p := self._prices.on_demand_price(name, z)) is not None]
        return reserved_offerings(
            name, reservations, on_demand_price=min(prices, default=None), zones=launchable, zone_ids=zone_ids,
            available_count=left, runnable=runnable, now=self._now(),
        )

    def _offerings(
        self,
        name: str,
        zones: Sequence[str],
        subnet_zones: set[str] | None,
        runnable: bool,
        zone_ids: Mapping[str, str],
    ) -> builtins.list[Offering]:  # ``list`` in this class is the method
        info = self._infos[name]
        offerings = []
        for zone in zones:
            if subnet_zones is not None and zone not in subnet_zones:
                continue
            for capacity_type in LAUNCHABLE_CAPACITY_TYPES:
                if capacity_type not in info.usage_classes:
                    continue
                price = (
                    self._prices.spot_price(name, zone)
                    if capacity_type == "spot"
                    else self._prices.on_demand_price(name, zone)
                )
                available = (
                    runnable
                    and price is not None
                    and not self._unavailable.is_unavailable(capacity_type, name, zone)
                )
                # An unpriced offering is never launched (unavailable); its 0.0 is never shown as a cost.
                offerings.append(
                    Offering(
                        zone,
                        capacity_type,
                        price or 0.0,
                        available,
                        zone_id=zone_ids.get(zone, ""),
                        price_source=self._prices.source_of(capacity_type, name, zone) if price is not None else "",
                    )
                )
        return offerings

