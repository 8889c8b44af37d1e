"""``simulate --cloud moto``: the scenario run with the real AWS provider against an in-process moto.

The scenario's catalogue decides what the account offers (instance types, zones, prices), exactly as
it does for the simulated cloud; everything else is the live code path: EC2NodeClass resolution
(subnets, security groups, SSM AMI aliases, instance profile), launch templates, CreateFleet with
its overrides, instance tags, DescribeInstances, TerminateInstances. moto is seeded like an EKS
account (``cloud/aws/offline.py``): one subnet per catalogue zone, the scenario's EC2NodeClass
selector tags and roles.

What the simulated cloud gets from the catalogue, moto gets this way:

- prices: the catalogue's offerings price the provider (``CataloguePrices``), so costs and the
  cheapest-first CreateFleet overrides are the same numbers; moto's own spot history is a
  placeholder and its Pricing API does not exist;
- capacity and allocatable: the provider's, from EC2's instance data and the NodeClass (a
  hand-written catalogue must use real type names; its declared capacity is not used);
- insufficient capacity (``available: false``, ``unavailable`` steps, interruptions): moto's
  CreateFleet answers InsufficientInstanceCapacity for the offering from then on, and the provider
  learns it as it learns a real fleet error (its unavailable-offerings cache, 3 minutes); after
  that it tries again, fails again and re-learns, where the simulated cloud never offers it again —
  the one place the two runs may differ (an extra InsufficientCapacityError event, and the options
  of a claim launched after the cache expired);
- scenario Nodes with a providerID: launched in moto (RunInstances with the ownership tags) and
  known by their scenario ID, so disruption terminates a real instance.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from reconciler.cloud.aws import tags as owned
from reconciler.cloud.aws.capacityreservation import PRICE_SOURCE as RESERVED_PRICE_SOURCE
from reconciler.cloud.aws.capacityreservation import RESERVED_PRICE_DIVISOR, CapacityReservation
from reconciler.cloud.aws.ice import UnavailableOfferings
from reconciler.cloud.aws.instances import provider_id
from reconciler.cloud.aws.offline import DISCOVERY_TAG, MotoCloud, open_moto_cloud
from reconciler.cloud.overlay import OverlayBook, priced
from reconciler.cloud.types import Instance, InstanceType, LaunchRequest, Offering
from reconciler.sim.catalog import build_catalog, build_reservations, preset_region
from reconciler.sim.scenario import ScenarioError

DEFAULT_NODECLASS = "adze-default"
_ICE = "InsufficientInstanceCapacity"


class CataloguePrices:
    """A ``PriceSource`` reading the scenario catalogue's offerings (what the simulated cloud charges)."""

    def __init__(self, types: Sequence[InstanceType]) -> None:
        self._offerings: dict[tuple[str, str, str], Offering] = {
            (t.name, o.capacity_type, o.zone): o for t in types for o in t.offerings
        }

    def offering(self, capacity_type: str, instance_type: str, zone: str | None) -> Offering | None:
        if zone is not None:
            return self._offerings.get((instance_type, capacity_type, zone))
        return next((o for (n, c, _), o in self._offerings.items() if (n, c) == (instance_type, capacity_type)), None)

    def on_demand_price(self, instance_type: str, zone: str | None = None) -> float | None:
        found = self.offering("on-demand", instance_type, zone)
        return None if found is None else found.price

    def spot_price(self, instance_type: str, zone: str) -> float | None:
        found = self.offering("spot", instance_type, zone)
        return None if found is None else found.price

    def source_of(self, capacity_type: str, instance_type: str, zone: str) -> str:
        found = self.offering(capacity_type, instance_type, zone)
        return "" if found is None else found.price_source


class MotoSimulatedCloud:
    """The real ``AWSCloudProvider`` on a seeded moto, plus what the simulator asks of its cloud."""

    name = "aws-moto"

    def __init__(
        self,
        catalog: Mapping[str, Any],
        objects: Sequence[Mapping[str, Any]],
        clock: Callable[[], datetime],
        *,
        cluster: str = "adze-sim",
        reserved_capacity: bool = True,
    ) -> None:
        self._types = {t.name: t for t in build_catalog(catalog)}
        reservations = build_reservations(catalog, list(self._types.values()))
        # Hand-written types must be real; preset types moto's EC2 data lacks (the supplement) just never launch.
        self._written = {str(raw.get("name")) for raw in catalog.get("instanceTypes") or [] if isinstance(raw, Mapping)}
        region = preset_region(catalog) or str(catalog.get("region") or "")
        zones = tuple(sorted({o.zone for t in self._types.values() for o in t.offerings}))
        _check_region(region, zones)
        self._prices = CataloguePrices(list(self._types.values()))
        self._clock = clock
        nodeclasses = [o for o in objects if o.get("kind") == "EC2NodeClass"]
        cluster = _discovery_value(nodeclasses) or cluster
        narrowed = None if preset_region(catalog) else tuple(sorted(self._types))
        try:
            self.moto: MotoCloud = open_moto_cloud(
                cluster=cluster,
                region=region,
                zones=zones,
                instance_types=narrowed,
                now=clock,
                monotonic=lambda: clock().timestamp(),
                prices=self._prices,
                nodeclasses=nodeclasses,
                own_account=True,
                capacity_reservations=reservations,
                reserved_capacity=reserved_capacity,
            )
        except ValueError as err:
            raise ScenarioError(f"--cloud moto: {err}") from None
        self.provider = self.moto.provider
        self.price_overlays: OverlayBook | None = None  # see SimulatedCloud.price_overlays
        self._default_nodeclass = self.moto.env.nodeclass(DEFAULT_NODECLASS)
        self._aliases: dict[str, str] = {}  # scenario providerID -> moto providerID
        for instance_type in self._types.values():
            for offering in instance_type.offerings:
                if not offering.available:
                    self.mark_unavailable(instance_type.name, offering.zone, offering.capacity_type)

    async def check_types(self) -> None:
        """Every catalogue type must be one EC2 (moto's data) knows: the provider launches real types."""
        known = {t.name for t in await self.provider.instance_types(self._default_nodeclass)}
        unknown = sorted(self._written - known)
        if unknown:
            raise ScenarioError(
                f"catalog.instanceTypes: {', '.join(unknown[:5])} not EC2 instance types moto knows "
                "(--cloud moto launches real types)"
            )

    # -- what the simulator asks beyond CloudProvider -------------------------------------------
    def _offering(self, instance_type: str, zone: str, capacity_type: str) -> Offering | None:
        if capacity_type == "reserved":  # prepaid: Karpenter's on-demand / 10^7, as the provider prices it
            on_demand = self._prices.offering("on-demand", instance_type, zone)
            return None if on_demand is None else replace(
                on_demand, capacity_type="reserved", price=on_demand.price / RESERVED_PRICE_DIVISOR,
                price_source=RESERVED_PRICE_SOURCE)
        return self._prices.offering(capacity_type, instance_type, zone)

    def price_of(self, instance_type: str, zone: str, capacity_type: str, nodepool: str | None = None) -> float | None:
        found = self._offering(instance_type, zone, capacity_type)
        return None if found is None else priced(self.price_overlays, nodepool, instance_type, found)[0]

    def price_source_of(self, instance_type: str, zone: str, capacity_type: str, nodepool: str | None = None) -> str:
        found = self._offering(instance_type, zone, capacity_type)
        return "" if found is None else priced(self.price_overlays, nodepool, instance_type, found)[1]

    async def capacity_reservations(self, ids: list[str]) -> dict[str, CapacityReservation]:
        return await self.provider.capacity_reservations(ids)

    async def reservation_status(self, nodeclass: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        """What the provider resolves the EC2NodeClass's reservations to (``SimulatedCloud.reservation_status``)."""
        if not (nodeclass.get("spec") or {}).get("capacityReservationSelectorTerms"):
            return None
        resolved = await self.provider.resolve_nodeclass(nodeclass)
        return [r.to_status(self._clock()) for r in resolved.capacity_reservations or []]

    def mark_unavailable(
        self, instance_type: str, zone: str | None, capacity_type: str | None, *, until: datetime | None = None
    ) -> int:
        """CreateFleet answers InsufficientInstanceCapacity for these offerings from now on (``until``:
        for the provider's 3-minute memory only, an interrupted spot offering), and the provider learns
        it as from a fleet error."""
        known = self._types.get(instance_type)
        if known is None:
            raise KeyError(instance_type)
        changed = 0
        for offering in known.offerings:
            matches = zone is None or offering.zone == zone
            if matches and (capacity_type is None or offering.capacity_type == capacity_type):
                if until is None:
                    self.moto.mark_unavailable(instance_type, offering.zone, offering.capacity_type)
                self.provider.unavailable.mark_unavailable(offering.capacity_type, instance_type, offering.zone, _ICE)
                changed += 1
        return changed

    @property
    def unavailable(self) -> UnavailableOfferings:
        """The provider's unavailable-offerings cache: what an interruption marks, as on the live path."""
        return self.provider.unavailable

    def register_existing(self, instance: Instance) -> None:
        """A scenario Node already running: launch it in moto, owned by the cluster, known by its ID."""
        ec2 = self.moto.env.client("ec2")
        subnet = self.moto.env.subnet_ids.get(instance.zone)
        if subnet is None:
            raise ScenarioError(
                f"--cloud moto: node {instance.provider_id} runs in {instance.zone}, not a catalogue zone"
            )
        arch = "arm64" if instance.labels.get("kubernetes.io/arch") == "arm64" else "amd64"
        tags = owned.launch_tags(
            self.moto.env.cluster, instance.nodepool or "", instance.labels.get(owned.NODECLASS_TAG, ""),
            nodeclaim=instance.nodeclaim,
        )
        answer = ec2.run_instances(
            ImageId=self.moto.env.ami_ids[f"{arch}/standard"], InstanceType=instance.instance_type,
            MinCount=1, MaxCount=1, SubnetId=subnet,
            TagSpecifications=owned.tag_specifications(["instance"], tags),
            **({"InstanceMarketOptions": {"MarketType": "spot"}} if instance.capacity_type == "spot" else {}),
        )
        launched = answer["Instances"][0]
        self._aliases[instance.provider_id] = provider_id(instance.zone, launched["InstanceId"])

    def _moto_id(self, value: str) -> str:
        return self._aliases.get(value, value)

    # -- CloudProvider ----------------------------------------------------------------------------
    async def instance_types(self, nodeclass: Mapping[str, Any] | None) -> list[InstanceType]:
        return await self.provider.instance_types(nodeclass or self._default_nodeclass)

    async def create(self, request: LaunchRequest, nodeclass: Mapping[str, Any] | None) -> Instance:
        instance = await self.provider.create(request, nodeclass or self._default_nodeclass)
        if not instance.price_source:
            instance.price_source = self.price_source_of(instance.instance_type, instance.zone, instance.capacity_type)
        return instance

    async def delete(self, value: str) -> None:
        await self.provider.delete(self._moto_id(value))

    async def get(self, value: str) -> Instance:
        return await self.provider.get(self._moto_id(value))

    async def list(self) -> list[Instance]:
        return await self.provider.list()

    async def is_drifted(self, instance: Instance, nodeclass: Mapping[str, Any] | None) -> str | None:
        return await self.provider.is_drifted(instance, nodeclass or self._default_nodeclass)

    def close(self) -> None:
        self.moto.close()


def _discovery_value(nodeclasses: Sequence[Mapping[str, Any]]) -> str | None:
    """The cluster name the scenario's NodeClasses discover subnets by (``karpenter.sh/discovery``), if any."""
    for nodeclass in nodeclasses:
        for term in (nodeclass.get("spec") or {}).get("subnetSelectorTerms") or []:
            value = ((term or {}).get("tags") or {}).get(DISCOVERY_TAG)
            if value and value != "*":
                return str(value)
    return None


def _check_region(region: str, zones: tuple[str, ...]) -> None:
    from reconciler.cloud.aws.preset import PRESETS, load_catalog

    if region not in PRESETS:
        raise ScenarioError(
            f"catalog.region: {region or '(none)'!r} is not an AWS region moto offers instance types in "
            "(--cloud moto needs a real region and zones)"
        )
    known = load_catalog(region).zone_ids
    unknown = [zone for zone in zones if zone not in known]
    if unknown:
        raise ScenarioError(f"catalog: zones {unknown} are not zones of {region} (--cloud moto needs real zones)")
    if len(zones) > 6:
        raise ScenarioError(f"catalog: --cloud moto seeds at most 6 zones ({len(zones)} given)")
