"""The AWS ``CloudProvider``: EC2NodeClass resolution, instance types, CreateFleet launches.

Launch path for one NodeClaim (``create``):

1. adopt an instance already tagged with this NodeClaim (a launch that
   succeeded just before a crash) instead of launching a second one;
2. resolve the NodeClass (subnets, security groups, AMIs, instance profile);
3. pick offerings (allowed types x zones x capacity type, ICE-cached ones out,
   cheapest 60 types), one subnet per zone (most free IPs);
4. ensure one content-addressed launch template per (AMI, max pods);
5. CreateFleet ``instant``; fleet errors feed the unavailable-offerings cache;
   no instance + only capacity errors = ``InsufficientCapacityError`` so the
   provisioner re-plans without those offerings.
"""

from __future__ import annotations

import builtins
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from reconciler.cloud.aws import fleet as fleets
from reconciler.cloud.aws import tags as owned
from reconciler.cloud.aws.capacityreservation import PRICE_SOURCE as RESERVED_PRICE_SOURCE
from reconciler.cloud.aws.capacityreservation import (
    RESERVED_PRICE_DIVISOR,
    CapacityReservation,
)
from reconciler.cloud.aws.clients import AwsCaller, AwsClients, ClientOptions, Gate, error_code
from reconciler.cloud.aws.drift import drift_reason
from reconciler.cloud.aws.ice import UnavailableOfferings
from reconciler.cloud.aws.instances import (
    ACTIVE_STATES,
    InstanceRecord,
    parse_provider_id,
    provider_id,
    records_from_reservations,
)
from reconciler.cloud.aws.launch import Launcher, TemplateGone
from reconciler.cloud.aws.launchtemplate import LaunchTemplateProvider
from reconciler.cloud.aws.metrics import AWSMetrics
from reconciler.cloud.aws.netinterfaces import EFA_RESOURCE
from reconciler.cloud.aws.nodeclass import NodeClassResolver, ResolvedNodeClass, subnets_for_launch
from reconciler.cloud.aws.preset import load_catalog
from reconciler.cloud.aws.pricing import PriceSource, PricingProvider
from reconciler.cloud.aws.reservations import CapacityReservationProvider
from reconciler.cloud.aws.typeprovider import InstanceTypeProvider
from reconciler.cloud.aws.userdata import ClusterInfo
from reconciler.cloud.aws.validation import DryRunValidator
from reconciler.cloud.overlay import OverlayBook, launch_price
from reconciler.cloud.types import (
    CloudError,
    Instance,
    InstanceNotFoundError,
    InstanceType,
    InsufficientCapacityError,
    LaunchRequest,
    NodeClassNotReadyError,
)
from reconciler.model import labels as wk
from reconciler.model.resources import EMPTY, Resources
from reconciler.observability import Metrics

NODECLASS_CACHE_SECONDS = 60.0


def efa_attached(request: LaunchRequest, spec: Mapping[str, Any]) -> bool:
    """A launch gets EFA interfaces when the NodeClaim requests EFA or the NodeClass lists interfaces."""
    return request.requests.amount(EFA_RESOURCE) > 0 or spec.get("networkInterfaces") is not None


def without(resources: Resources, name: str) -> Resources:
    return Resources({k: v for k, v in resources.items() if k != name}) if name in resources else resources


@dataclass(slots=True, frozen=True)
class AWSProviderConfig:
    cluster: ClusterInfo
    region: str
    endpoint_url: str | None = None
    # Extra DescribeInstanceTypes filters, e.g. to narrow discovery (tests, restricted accounts).
    instance_type_filters: tuple[Mapping[str, Any], ...] = ()
    vm_memory_overhead_percent: float = 0.075
    reserved_enis: int = 0
    max_concurrency: int = 16
    retry_mode: str = "adaptive"
    max_attempts: int = 8
    access_key_id: str | None = None
    secret_access_key: str | None = None
    # DISABLE_DRY_RUN: skip the CreateLaunchTemplate/CreateFleet/RunInstances authorization dry runs.
    disable_dry_run: bool = False
    # The ReservedCapacity gate: resolve capacityReservationSelectorTerms, offer and launch into reservations.
    reserved_capacity: bool = True

    def client_options(self) -> ClientOptions:
        return ClientOptions(
            region=self.region,
            endpoint_url=self.endpoint_url,
            retry_mode=self.retry_mode,
            max_attempts=self.max_attempts,
            max_concurrency=self.max_concurrency,
            access_key_id=self.access_key_id,
            secret_access_key=self.secret_access_key,
        )


@dataclass(slots=True)
class _CachedNodeClass:
    key: str
    resolved: ResolvedNodeClass
    expires: float


class AWSCloudProvider:
    name = "aws"

    def __init__(
        self,
        config: AWSProviderConfig,
        *,
        clients: AwsClients | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
        prices: PriceSource | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.config = config
        self.cluster = config.cluster.name
        self.metrics = AWSMetrics.of(metrics)
        self.clients = clients or AwsClients(config.client_options())
        self.clients.instrument(self.metrics)
        self.caller = AwsCaller(config.max_concurrency)
        self._now = now
        self._monotonic = monotonic
        self.pricing = startup_pricing(config.region, clock=lambda: self._now().timestamp(), metrics=self.metrics)
        # What offerings and instances are priced with: the refreshed pricing provider, or a fixed table
        # (``simulate --cloud moto`` feeds the scenario's prices, as the simulated cloud has them).
        self.prices: PriceSource = prices or self.pricing
        self.unavailable = UnavailableOfferings(clock=monotonic, metrics=self.metrics)
        self.reservations = CapacityReservationProvider(self.caller, self.clients.ec2, now)
        self.instance_type_provider = InstanceTypeProvider(
            self.caller,
            self.clients.ec2,
            self.prices,
            self.unavailable,
            region=config.region,
            extra_filters=config.instance_type_filters,
            vm_memory_overhead_percent=config.vm_memory_overhead_percent,
            reserved_enis=config.reserved_enis,
            clock=monotonic,
            metrics=self.metrics,
            reservations=self.reservations,
            now=now,
        )
        self.nodeclasses = NodeClassResolver(
            self.caller,
            self.clients.ec2,
            self.clients.ssm,
            self.clients.iam,
            cluster=self.cluster,
            region=config.region,
            kubernetes_version=config.cluster.kubernetes_version,
            reservations=self.reservations if config.reserved_capacity else None,
        )
        self.launch_templates = LaunchTemplateProvider(self.caller, self.clients.ec2, clock=monotonic)
        self.launcher = Launcher(
            self.caller, self.clients.ec2, config.cluster, self.unavailable, self.launch_templates, now, self.metrics,
            reservations=self.reservations, targeted=config.reserved_capacity,
        )
        self.validator = DryRunValidator(self.caller, self.clients.ec2, self.launcher, self.cluster, clock=monotonic)
        self._nodeclass_cache: dict[str, _CachedNodeClass] = {}
        # The NodeOverlays in effect (``cloud.overlay.publish``): claims planned with them launch by them.
        self.price_overlays: OverlayBook | None = None

    def close(self) -> None:
        self.caller.close()

    def guard(self, gate: Gate) -> None:
        """Ask ``gate`` before every AWS call and every HTTP attempt of it (retries, pages): the leader's
        ``LeadershipGate.check``, so nothing is sent to AWS once leadership may be lost."""
        self.caller.gate = gate
        self.clients.gate = gate

    # --- NodeClass ---------------------------------------------------------------------------------

    async def resolve_nodeclass(self, nodeclass: Mapping[str, Any]) -> ResolvedNodeClass:
        """Resolved view of an EC2NodeClass, cached for a minute per spec."""
        name = str((nodeclass.get("metadata") or {}).get("name", ""))
        key = json.dumps(nodeclass.get("spec") or {}, sort_keys=True)
        cached = self._nodeclass_cache.get(name)
        if cached and cached.key == key and cached.expires > self._monotonic():
            return cached.resolved
        resolved = await self.nodeclasses.resolve(nodeclass, self._now())
        if resolved.ready and not self.config.disable_dry_run:
            failure = await self.validator.validate(resolved, await self.instance_type_provider.list(resolved))
            if failure is not None:
                resolved.errors["ValidationSucceeded"] = failure.message
                resolved.reasons["ValidationSucceeded"] = failure.reason
        if resolved.ready:
            self._nodeclass_cache[name] = _CachedNodeClass(
                key, resolved, self._monotonic() + NODECLASS_CACHE_SECONDS
            )
        return resolved

    async def nodeclass_status(self, nodeclass: Mapping[str, Any]) -> dict[str, Any]:
        """The ``status`` to write on the EC2NodeClass (subnets, SGs, AMIs, profile, conditions)."""
        resolved = await self.resolve_nodeclass(nodeclass)
        generation = int((nodeclass.get("metadata") or {}).get("generation") or 0)
        return resolved.status(self._now(), generation)

    async def delete_nodeclass_resources(self, nodeclass: Mapping[str, Any]) -> dict[str, list[str]]:
        """What the EC2NodeClass finalizer removes: the class's launch templates and the instance profiles
        managed for it (never a profile named in ``spec.instanceProfile``). Idempotent."""
        metadata = nodeclass.get("metadata") or {}
        name = str(metadata.get("name", ""))
        templates = await self.launch_templates.delete_for_nodeclass(self.cluster, name)
        profiles = await self.nodeclasses.delete_nodeclass_profiles(str(metadata.get("uid", "")))
        self._nodeclass_cache.pop(name, None)
        return {"launch-templates": templates, "instance-profiles": profiles}

    async def _ready_nodeclass(self, nodeclass: Mapping[str, Any] | None) -> ResolvedNodeClass:
        if not nodeclass:
            raise NodeClassNotReadyError("EC2NodeClass not found")
        if (nodeclass.get("metadata") or {}).get("deletionTimestamp"):
            # Launching would recreate what the class's finalizer is deleting (Karpenter refuses too).
            raise NodeClassNotReadyError(f"EC2NodeClass {nodeclass['metadata'].get('name')} is being deleted")
        resolved = await self.resolve_nodeclass(nodeclass)
        if not resolved.ready:
            problems = "; ".join(f"{k}: {v}" for k, v in resolved.errors.items())
            raise NodeClassNotReadyError(f"EC2NodeClass {resolved.name} is not ready: {problems}")
        return resolved

    # --- CloudProvider -------------------------------------------------------------------------------

    async def instance_types(self, nodeclass: Mapping[str, Any] | None) -> list[InstanceType]:
        resolved = await self.resolve_nodeclass(nodeclass) if nodeclass else None
        if resolved is not None and not resolved.ready:
            return []
        return await self.instance_type_provider.list(resolved)

    async def create(self, request: LaunchRequest, nodeclass: Mapping[str, Any] | None) -> Instance:
        resolved = await self._ready_nodeclass(nodeclass)
        existing = await self._find_by_nodeclaim(request.nodeclaim)
        types = {it.name: it for it in await self.instance_type_provider.list(resolved)}
        if existing is not None:
            return self._instance(existing, types.get(existing.instance_type), request)
        launchable = {
            s.zone
            for s in subnets_for_launch(
                resolved.subnets, resolved.zones, self.unavailable.is_subnet_unavailable
            ).values()
        }
        candidates = fleets.candidates_for(request, types, launchable)
        if request.price_overlaid and self.price_overlays is not None:  # offerings at the prices it was planned by
            candidates = [
                fleets.Candidate(c.instance_type, replace(
                    c.offering, price=launch_price(self.price_overlays, request, c.instance_type.name, c.offering)))
                for c in candidates
            ]
        capacity_type, chosen = fleets.select_offerings(request, candidates)
        if not chosen:
            raise InsufficientCapacityError(
                f"NodeClaim {request.nodeclaim}: no available offering among {len(request.instance_types)} "
                "instance types in the allowed zones and capacity types"
            )
        for attempt in range(2):
            groups = await self.launcher.launch_templates_for(request, resolved, capacity_type, chosen)
            try:
                record, zone_id = await self.launcher.create_fleet(request, resolved, capacity_type, groups, chosen)
            except TemplateGone as gone:
                self.launch_templates.invalidate(gone.name)
                if attempt:
                    raise CloudError(f"launch template {gone.name} disappeared twice") from None
                continue
            instance = self._instance(record, types.get(record.instance_type), request)
            if zone_id:
                instance.labels = {**instance.labels, wk.ZONE_ID: zone_id}
            if not efa_attached(request, resolved.spec):  # the node only advertises EFAs it was given
                instance.capacity = without(instance.capacity, EFA_RESOURCE)
                instance.allocatable = without(instance.allocatable, EFA_RESOURCE)
            return instance
        raise AssertionError("unreachable")

    async def delete(self, provider_id: str) -> None:
        record = await self._describe_one(provider_id)
        if record.state == "shutting-down":
            return
        try:
            await self.caller.call(self.clients.ec2.terminate_instances, InstanceIds=[record.id])
        except Exception as err:
            if error_code(err) == "InvalidInstanceID.NotFound":
                raise InstanceNotFoundError(f"instance {record.id} not found") from None
            self.metrics.instance_termination_failures.labels(zone=record.zone, zone_id=record.zone_id).inc()
            raise
        if record.capacity_reservation_id:  # its instance goes back to the reservation
            self.reservations.mark_terminated(record.capacity_reservation_id)

    async def get(self, provider_id: str) -> Instance:
        record = await self._describe_one(provider_id)
        return self._instance(record, None, None)

    async def list(self) -> list[Instance]:
        records = await self.list_records()
        return [self._instance(record, None, None) for record in records]

    async def list_records(self) -> builtins.list[InstanceRecord]:  # ``list`` here is the method above
        reservations = await self.caller.paginate(
            self.clients.ec2,
            "describe_instances",
            "Reservations",
            Filters=[
                {"Name": "tag-key", "Values": [owned.NODEPOOL_TAG]},
                {"Name": "tag-key", "Values": [owned.NODECLASS_TAG]},
                {"Name": f"tag:{owned.EKS_CLUSTER_NAME_TAG}", "Values": [self.cluster]},
                {"Name": "instance-state-name", "Values": list(ACTIVE_STATES)},
            ],
        )
        return records_from_reservations(reservations)

    async def is_drifted(self, instance: Instance, nodeclass: Mapping[str, Any] | None) -> str | None:
        if not nodeclass:
            return None
        resolved = await self.resolve_nodeclass(nodeclass)
        if not resolved.ready:
            return None
        record = await self._describe_one(instance.provider_id)
        info = self.instance_type_provider.infos.get(record.instance_type)
        labels = info.labels(self.config.region, os=resolved.family.os) if info else {}
        return drift_reason(record, resolved, labels)

    # --- capacity reservations -----------------------------------------------------------------------

    async def capacity_reservations(self, ids: builtins.list[str]) -> dict[str, CapacityReservation]:
        """These reservations as EC2 describes them now (capacity-block expiry reads their end times)."""
        return await self.reservations.by_ids(ids)

    # --- pricing -------------------------------------------------------------------------------------

    async def refresh_prices(self) -> None:
        """Refresh on-demand (Pricing API) and spot (price history) prices; each failure is independent."""
        for refresh in (
            lambda: self.pricing.refresh_on_demand(self.caller, self.clients.pricing),
            lambda: self.pricing.refresh_spot(self.caller, self.clients.ec2, self._now()),
        ):
            try:
                await refresh()
            except Exception:  # counted in pricing_refresh_failures; keep the previous prices
                continue

    # --- internals -----------------------------------------------------------------------------------

    async def _describe_one(self, value: str) -> InstanceRecord:
        try:
            _, instance_id = parse_provider_id(value)
        except ValueError as err:
            raise InstanceNotFoundError(str(err)) from None
        try:
            answer = await self.caller.call(self.clients.ec2.describe_instances, InstanceIds=[instance_id])
        except Exception as err:
            if error_code(err) == "InvalidInstanceID.NotFound":
                raise InstanceNotFoundError(f"instance {instance_id} not found") from None
            raise
        records = records_from_reservations(answer.get("Reservations") or [])
        if not records or records[0].state == "terminated":
            raise InstanceNotFoundError(f"instance {instance_id} is terminated")
        return records[0]

    async def _find_by_nodeclaim(self, nodeclaim: str) -> InstanceRecord | None:
        if not nodeclaim:
            return None
        answer = await self.caller.call(
            self.clients.ec2.describe_instances,
            Filters=[
                {"Name": f"tag:{owned.NODECLAIM_TAG}", "Values": [nodeclaim]},
                {"Name": f"tag:{owned.EKS_CLUSTER_NAME_TAG}", "Values": [self.cluster]},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ],
        )
        records = records_from_reservations(answer.get("Reservations") or [])
        return min(records, key=lambda r: r.id) if records else None

    def _instance(
        self, record: InstanceRecord, instance_type: InstanceType | None, request: LaunchRequest | None
    ) -> Instance:
        if instance_type is None:
            info = self.instance_type_provider.infos.get(record.instance_type)
            labels: dict[str, str] = info.labels(self.config.region) if info else {}
        else:
            labels = dict(instance_type.labels)
        labels.update({wk.ZONE: record.zone, wk.CAPACITY_TYPE: record.capacity_type})
        labels.update(record.reservation_labels())
        nodepool = record.nodepool or (request.nodepool if request else "")
        if nodepool:
            labels[wk.NODEPOOL] = nodepool
        if record.tags.get(owned.NODECLASS_TAG):
            labels[wk.EC2NODECLASS] = record.tags[owned.NODECLASS_TAG]
        price = (
            self.prices.spot_price(record.instance_type, record.zone)
            if record.capacity_type == "spot"
            else self.prices.on_demand_price(record.instance_type, record.zone)
        )
        source = self.prices.source_of(record.capacity_type, record.instance_type, record.zone) if price else ""
        if record.capacity_type == wk.CAPACITY_TYPE_RESERVED and price:
            price, source = price / RESERVED_PRICE_DIVISOR, RESERVED_PRICE_SOURCE
        return Instance(
            provider_id=provider_id(record.zone, record.id),
            instance_type=record.instance_type,
            zone=record.zone,
            capacity_type=record.capacity_type,
            price=price or 0.0,
            nodeclaim=record.nodeclaim or (request.nodeclaim if request else ""),
            nodepool=nodepool,
            image_id=record.image_id,
            state=record.state,
            launched_at=record.launch_time,
            capacity=instance_type.capacity if instance_type else EMPTY,
            allocatable=instance_type.allocatable if instance_type else EMPTY,
            labels=labels,
            tags=dict(record.tags),
            price_source=source,
        )


def startup_pricing(region: str, *, clock: Callable[[], float], metrics: AWSMetrics | None = None) -> PricingProvider:
    """Prices before the first refresh: the region's bundled table (us-east-1's as an estimate where the
    region has none, as Karpenter does), or nothing for a region without a bundled catalogue."""
    from reconciler.cloud.aws.preset import PRESETS

    catalog = load_catalog(region if region in PRESETS else "us-east-1")
    on_demand = catalog.on_demand_prices() if region in PRESETS else {}
    return PricingProvider(
        region,
        on_demand,
        bundled_as_of=datetime.fromisoformat(catalog.prices_as_of).replace(tzinfo=UTC),
        bundled_source=catalog.on_demand_source,
        clock=clock,
        metrics=metrics,
    )
