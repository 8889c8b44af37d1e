"""Which instance types and prices a preview uses: the bundled preset, or EC2 itself (``--catalog live``).

Either way the result is a scenario ``catalog:`` section, so the preview is reproducible from the
documents it was computed from. Live types are written out in full (capacity, overhead, labels,
every offering with its price), exactly as the simulator would rebuild them.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.cloud.types import InstanceType
from reconciler.insight.errors import InsightError
from reconciler.model import labels as wk

PRESET_REGION = "us-east-1"  # the preset of a snapshot that shows no region (no nodes yet)
PRESET_NAME = f"aws-{PRESET_REGION}"
# Set by the simulator from the type's own fields; not repeated under ``labels``.
_DERIVED_LABELS = frozenset({wk.INSTANCE_TYPE, wk.ARCH, wk.OS, wk.REGION})


def preset_catalog(zones: Sequence[str], region: str | None = None) -> dict[str, Any]:
    """The bundled catalogue of the cluster's region, restricted to the zones it uses when known.

    The region is the nodes' ``topology.kubernetes.io/region`` (``region``), else the one their zones
    belong to; a region without a bundled catalogue, or zones of several regions, is an error rather
    than a silent fall-back to another region's types, zones and prices."""
    from reconciler.cloud.aws.preset import load_catalog, regions

    bundled = regions()
    if not region and zones:
        owners = {next((r for r in bundled if z.startswith(r) and z[len(r):].isalpha()), z) for z in zones}
        if len(owners) > 1:
            raise InsightError(f"nodes run in zones of several regions ({', '.join(sorted(owners))}): "
                               "give --catalog live or a snapshot of one region")
        region = owners.pop()
    region = region or PRESET_REGION
    if region not in bundled:
        raise InsightError(
            f"nodes run in {region}, which has no bundled catalogue (bundled: {', '.join(bundled)}); "
            "use --catalog live"
        )
    known = set(load_catalog(region).zone_ids)
    usable = [zone for zone in zones if zone in known]
    catalog: dict[str, Any] = {"preset": f"aws-{region}"}
    if usable:
        catalog["zones"] = usable
    return catalog


def catalog_from_instance_types(types: Sequence[InstanceType], region: str) -> dict[str, Any]:
    """A scenario ``catalog:`` section that rebuilds exactly these instance types."""
    entries = []
    for instance_type in sorted(types, key=lambda t: t.name):
        offerings = [
            {
                "capacityType": o.capacity_type, "zone": o.zone, "price": o.price, "available": o.available,
                **({"zoneID": o.zone_id} if o.zone_id else {}),
                **({"priceSource": o.price_source} if o.price_source else {}),
            }
            for o in sorted(instance_type.offerings, key=lambda o: (o.zone, o.capacity_type))
        ]
        if not offerings:
            continue
        entry: dict[str, Any] = {
            "name": instance_type.name,
            "arch": instance_type.labels.get(wk.ARCH, "amd64"),
            "os": instance_type.labels.get(wk.OS, "linux"),
            "capacity": instance_type.capacity.to_manifest(),
            "overhead": instance_type.overhead.to_manifest(),
            "offerings": offerings,
        }
        extra = {k: v for k, v in sorted(instance_type.labels.items()) if k not in _DERIVED_LABELS}
        if extra:
            entry["labels"] = extra
        entries.append(entry)
    if not entries:
        raise InsightError(f"--catalog live: EC2 in {region} offered no instance types")
    return {"region": region, "instanceTypes": entries}


async def fetch_live_instance_types(
    region: str, endpoint_url: str | None = None, *, credentials: Mapping[str, str] | None = None
) -> list[InstanceType]:
    """DescribeInstanceTypes/-Offerings plus Pricing API and spot price history, via the AWS adapter.

    Every offering says where its price came from: the Pricing API and spot history when they
    answered, else the bundled table the live provider starts from (an estimate outside us-east-1).
    Zone IDs come from DescribeAvailabilityZones when the credentials allow it."""
    from botocore.exceptions import BotoCoreError, ClientError

    from reconciler.cloud.aws.clients import AwsCaller, AwsClients, ClientOptions
    from reconciler.cloud.aws.ice import UnavailableOfferings
    from reconciler.cloud.aws.provider import startup_pricing
    from reconciler.cloud.aws.typeprovider import InstanceTypeProvider

    keys = credentials or {}
    clients = AwsClients(
        ClientOptions(
            region=region, endpoint_url=endpoint_url, max_attempts=3,
            access_key_id=keys.get("aws_access_key_id"), secret_access_key=keys.get("aws_secret_access_key"),
        )
    )
    caller = AwsCaller()
    prices = startup_pricing(region, clock=time.time)
    try:
        for refresh in (
            lambda: prices.refresh_on_demand(caller, clients.pricing),
            lambda: prices.refresh_spot(caller, clients.ec2),
        ):
            try:
                await refresh()
            except (BotoCoreError, ClientError) as err:  # the other source and the bundled table still price
                print(f"warning: --catalog live: {err}; using the bundled prices for what it would have priced",
                      file=sys.stderr)
        provider = InstanceTypeProvider(
            caller, clients.ec2, prices, UnavailableOfferings(), region=region,
            zone_ids=await _zone_ids(caller, clients.ec2),
        )
        return await provider.list(None)
    except (BotoCoreError, ClientError) as err:
        message = f"--catalog live: cannot read instance types in {region}: {err}"
        raise InsightError(message) from None
    finally:
        caller.close()


async def _zone_ids(caller: Any, ec2: Any) -> dict[str, str]:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        answer = await caller.call(ec2.describe_availability_zones)
    except (BotoCoreError, ClientError):
        return {}  # zone-id selectors then judge nothing here; the live controller reads them from subnets
    return {str(z["ZoneName"]): str(z.get("ZoneId") or "") for z in answer.get("AvailabilityZones") or []}


def with_catalog(document: Mapping[str, Any], catalog: Mapping[str, Any]) -> dict[str, Any]:
    return {**document, "catalog": dict(catalog)}


# Below this many types a catalogue is used as is (narrowing would not pay for itself).
NARROW_ABOVE = 60


def narrowed_catalog(catalog: Mapping[str, Any], objects: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The catalogue cut down to the types some NodePool in ``objects`` can launch, plus those nodes run.

    A type no NodePool template accepts (requirements and an available offering, the same test the
    scheduler's templates apply) is never a launch option, so dropping it changes no decision; the
    scheduler then indexes a few dozen types per pass instead of the whole EC2 catalogue. Running
    nodes keep their type so they are still priced.
    """
    from reconciler.model.nodepool import NodePool
    from reconciler.scheduling.instancetypes import TypeIndex
    from reconciler.scheduling.templates import template_requirements
    from reconciler.sim.catalog import build_catalog

    types = build_catalog(catalog)
    if len(types) <= NARROW_ABOVE:
        return dict(catalog)
    keep = {
        str((m.get("metadata") or {}).get("labels", {}).get(wk.INSTANCE_TYPE))
        for m in objects
        if m.get("kind") in ("Node", "NodeClaim")
    }
    index = TypeIndex()
    for manifest in objects:
        if manifest.get("kind") != "NodePool":
            continue
        requirements, _ = template_requirements(NodePool.from_manifest(manifest))
        for instance_type in types:
            info = index.info(instance_type)
            if info.compatible(requirements) and info.has_offering(requirements):
                keep.add(instance_type.name)
    reservations = catalog.get("capacityReservations")
    keep.update(str(r.get("instanceType")) for r in reservations or () if isinstance(r, Mapping))
    region = str(catalog.get("region") or PRESET_REGION)
    narrowed = catalog_from_instance_types([t for t in types if t.name in keep], region)
    if reservations is not None:  # the account's reservations go with its catalogue
        narrowed["capacityReservations"] = reservations
    return narrowed
