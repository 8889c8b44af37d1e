"""The bundled real-EC2 catalogues as engine ``InstanceType``s (``catalog.preset: aws-<region>``).

Data (see ``scripts/gen_aws_catalog.py``): ``reconciler/cloud/data/aws-instance-types.json`` holds
each type's hardware facts once; ``aws-<region>.json`` the zones (with zone IDs) each type is
offered in there and its on-demand price. Every region moto ships offerings for has a file. Only
us-east-1 has its own list prices; the other regions carry the us-east-1 table marked as an
estimate (Karpenter's own fallback), and every offering says which (``Offering.price_source``).

Per zone a type is offered in:

- an on-demand offering at the bundled price;
- a spot offering (when the type supports spot) at ``spot_fraction(type, zone)`` x on-demand,
  a deterministic fraction in [0.30, 0.45) — an estimate, labelled so (see ``instancetype``).

``load_preset`` builds the types as an AL2023 NodeClass gets them; ``PresetShaper`` rebuilds them
for any other EC2NodeClass (AMI family, kubelet, block devices, RAID0) through the same
``NodeClassShape`` the live provider uses.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from typing import Any

from reconciler.cloud import pricesource
from reconciler.cloud.aws.catalog import InstanceTypeInfo
from reconciler.cloud.aws.instancetype import NodeClassShape, spot_fraction
from reconciler.cloud.types import InstanceType, Offering

FACTS_FILE = "aws-instance-types.json"
# Current types that moto's DescribeInstanceTypes snapshot lacks, from public specifications; every
# record names its sources (see the file). The generated catalogue wins where both list a type.
SUPPLEMENTS = {"us-east-1": "aws-us-east-1-supplement.json"}
PRICE_DECIMALS = 6


class PresetError(ValueError):
    pass


def _data() -> Any:
    return resources.files("reconciler.cloud").joinpath("data")


@lru_cache(maxsize=1)
def regions() -> tuple[str, ...]:
    """Every region with a bundled catalogue."""
    names = (entry.name for entry in _data().iterdir())
    return tuple(
        sorted(
            name.removeprefix("aws-").removesuffix(".json")
            for name in names
            if name.startswith("aws-") and name.endswith(".json") and name != FACTS_FILE and "supplement" not in name
        )
    )


PRESETS = {region: f"aws-{region}.json" for region in regions()}


@dataclass(slots=True, frozen=True)
class CatalogEntry:
    info: InstanceTypeInfo
    on_demand_price: float
    zones: tuple[str, ...]


@dataclass(slots=True, frozen=True)
class Catalog:
    region: str
    zone_ids: dict[str, str]
    prices_as_of: str
    entries: tuple[CatalogEntry, ...]
    prices_region: str = ""  # the region whose list prices these are (itself, or us-east-1 as an estimate)

    @property
    def prices_estimated(self) -> bool:
        return self.prices_region != self.region

    @property
    def on_demand_source(self) -> str:
        if self.prices_estimated:
            return pricesource.region_estimate(self.region, self.prices_region, self.prices_as_of)
        return pricesource.bundled_list(self.region, self.prices_as_of)

    def on_demand_prices(self) -> dict[str, float]:
        return {entry.info.name: entry.on_demand_price for entry in self.entries}


@lru_cache(maxsize=1)
def _facts() -> dict[str, Any]:
    return dict(json.loads(_data().joinpath(FACTS_FILE).read_text())["types"])


@lru_cache(maxsize=8)
def load_catalog(region: str = "us-east-1") -> Catalog:
    """Parse a region's bundled catalogue once per process."""
    filename = PRESETS.get(region)
    if filename is None:
        raise PresetError(f"no bundled catalogue for region {region!r} (available: {', '.join(PRESETS)})")
    document: dict[str, Any] = json.loads(_data().joinpath(filename).read_text())
    facts = _facts()
    records = {name: {**facts[name], **offered} for name, offered in document["types"].items()}
    if region in SUPPLEMENTS:
        supplement = json.loads(_data().joinpath(SUPPLEMENTS[region]).read_text())["types"]
        records.update({name: record for name, record in supplement.items() if name not in records})
    entries = []
    for name, record in records.items():
        zones = tuple(f"{region}{suffix}" for suffix in record["zones"])
        entries.append(CatalogEntry(InstanceTypeInfo.from_record(name, record), float(record["od"]), zones))
    prices = document.get("prices") or {}
    return Catalog(
        region,
        dict(document.get("zones") or {}),
        str(prices.get("asOf", "")),
        tuple(entries),
        str(prices.get("region") or region),
    )


def preset_offerings(entry: CatalogEntry, zones: tuple[str, ...], catalog: Catalog) -> list[Offering]:
    offerings = []
    for zone in zones:
        zone_id = catalog.zone_ids.get(zone, "")
        if "spot" in entry.info.usage_classes:
            price = round(entry.on_demand_price * spot_fraction(entry.info.name, zone), PRICE_DECIMALS)
            offerings.append(Offering(zone, "spot", price, zone_id=zone_id, price_source=pricesource.SPOT_ESTIMATE))
        if "on-demand" in entry.info.usage_classes:
            offerings.append(
                Offering(zone, "on-demand", entry.on_demand_price, zone_id=zone_id,
                         price_source=catalog.on_demand_source)
            )
    return offerings


def _check_zones(catalog: Catalog, zones: tuple[str, ...] | None) -> None:
    if zones is None:
        return
    unknown = sorted(set(zones) - set(catalog.zone_ids))
    if unknown:
        known = ", ".join(sorted(catalog.zone_ids))
        raise PresetError(f"zones {unknown} are not in {catalog.region} (known: {known})")


_BUILT: dict[tuple[str, tuple[str, ...] | None, str], tuple[InstanceType, ...]] = {}
_BUILT_MAX = 16


def _build(region: str, zones: tuple[str, ...] | None, shaper: NodeClassShape) -> tuple[InstanceType, ...]:
    key = (region, zones, shaper.key)
    found = _BUILT.get(key)
    if found is None:
        if len(_BUILT) >= _BUILT_MAX:
            _BUILT.clear()
        found = _BUILT[key] = _build_uncached(region, zones, shaper)
    return found


def _build_uncached(region: str, zones: tuple[str, ...] | None, shaper: NodeClassShape) -> tuple[InstanceType, ...]:
    catalog = load_catalog(region)
    _check_zones(catalog, zones)
    built = []
    for entry in catalog.entries:
        allowed = entry.zones if zones is None else tuple(z for z in entry.zones if z in zones)
        if not allowed:
            continue
        offerings = preset_offerings(entry, allowed, catalog)
        if not shaper.runs(entry.info):
            offerings = [replace(o, available=False) for o in offerings]
        instance_type = shaper.build(entry.info, offerings, region=region)
        if instance_type is not None:
            built.append(instance_type)
    return tuple(built)


def _zones_key(zones: Sequence[str] | None) -> tuple[str, ...] | None:
    return None if zones is None else tuple(sorted(set(zones)))


def load_preset(
    region: str = "us-east-1",
    zones: Sequence[str] | None = None,
    nodeclass: Mapping[str, Any] | None = None,
) -> list[InstanceType]:
    """All bundled types for ``region`` with offerings in ``zones`` (None = every zone offered), as
    ``nodeclass`` (an EC2NodeClass manifest; None = AL2023 defaults) gets them.

    Types with no offering left in ``zones`` are left out; types the NodeClass's AMI family cannot run
    keep their offerings, unavailable (as the live provider reports them). The ``InstanceType``
    objects are cached and shared between callers: treat them as read-only.
    """
    shaper = NodeClassShape.of_manifest(nodeclass)
    return list(_build(region, _zones_key(zones), shaper))


class PresetShaper:
    """Rebuilds a simulated catalogue's preset types for an EC2NodeClass, keeping each offering's
    availability and price (so insufficient-capacity marks and price files apply to every NodeClass)."""

    def __init__(self, region: str, zones: Sequence[str] | None, exclude: Iterable[str] = ()) -> None:
        """``exclude``: types the scenario writes out itself (they keep their own shape)."""
        self.region = region
        self.zones = _zones_key(zones)
        skipped = set(exclude)
        self._infos = {e.info.name: e.info for e in load_catalog(region).entries if e.info.name not in skipped}

    def covers(self, name: str) -> bool:
        return name in self._infos

    def reshape(self, base: InstanceType, shaper: NodeClassShape) -> InstanceType | None:
        """``base`` (a preset type as built for AL2023) as ``shaper``'s NodeClass gets it."""
        info = self._infos[base.name]
        offerings = base.offerings if shaper.runs(info) else tuple(replace(o, available=False) for o in base.offerings)
        return shaper.build(info, offerings, region=self.region)
