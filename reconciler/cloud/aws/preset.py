"""The bundled real-EC2 catalogue as engine ``InstanceType``s (``catalog.preset: aws-us-east-1``).

Data: ``reconciler/cloud/data/aws-<region>.json`` (see ``scripts/gen_aws_catalog.py``).
Every type gets AL2023 defaults: capacity after VM memory overhead, ENI-limited
max pods, kube-reserved + eviction overhead (``allocatable``), all
``karpenter.k8s.aws/instance-*`` labels, and per zone it is offered in:

- an on-demand offering at the bundled list price;
- a spot offering (when the type supports spot) at ``spot_fraction(type, zone)``
  x on-demand, a deterministic fraction in [0.30, 0.45) — see ``instancetype``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from reconciler.cloud.aws.catalog import InstanceTypeInfo
from reconciler.cloud.aws.instancetype import build_instance_type, spot_fraction
from reconciler.cloud.types import InstanceType, Offering

PRESETS = {"us-east-1": "aws-us-east-1.json"}
# Current types that moto's DescribeInstanceTypes snapshot lacks, from public specifications; every
# record names its sources (see the file). The generated catalogue wins where both list a type.
SUPPLEMENTS = {"us-east-1": "aws-us-east-1-supplement.json"}
PRICE_DECIMALS = 6


class PresetError(ValueError):
    pass


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

    def on_demand_prices(self) -> dict[str, float]:
        return {entry.info.name: entry.on_demand_price for entry in self.entries}


@lru_cache(maxsize=4)
def load_catalog(region: str = "us-east-1") -> Catalog:
    """Parse the bundled catalogue once per process."""
    filename = PRESETS.get(region)
    if filename is None:
        raise PresetError(f"no bundled catalogue for region {region!r} (available: {', '.join(PRESETS)})")
    data = resources.files("reconciler.cloud").joinpath("data")
    document: dict[str, Any] = json.loads(data.joinpath(filename).read_text())
    records = dict(document["types"])
    if region in SUPPLEMENTS:
        supplement = json.loads(data.joinpath(SUPPLEMENTS[region]).read_text())["types"]
        records.update({name: record for name, record in supplement.items() if name not in records})
    entries = []
    for name, record in records.items():
        zones = tuple(f"{region}{suffix}" for suffix in record["zones"])
        entries.append(CatalogEntry(InstanceTypeInfo.from_record(name, record), float(record["od"]), zones))
    return Catalog(
        region, dict(document.get("zones") or {}), str(document.get("pricesAsOf", "")), tuple(entries)
    )


def preset_offerings(entry: CatalogEntry, zones: tuple[str, ...]) -> list[Offering]:
    offerings = []
    for zone in zones:
        if "spot" in entry.info.usage_classes:
            price = round(entry.on_demand_price * spot_fraction(entry.info.name, zone), PRICE_DECIMALS)
            offerings.append(Offering(zone=zone, capacity_type="spot", price=price))
        if "on-demand" in entry.info.usage_classes:
            offerings.append(Offering(zone=zone, capacity_type="on-demand", price=entry.on_demand_price))
    return offerings


@lru_cache(maxsize=8)
def _build(region: str, zones: tuple[str, ...] | None) -> tuple[InstanceType, ...]:
    catalog = load_catalog(region)
    if zones is not None:
        unknown = sorted(set(zones) - set(catalog.zone_ids))
        if unknown:
            raise PresetError(
                f"zones {unknown} are not in {region} (known: {', '.join(sorted(catalog.zone_ids))})"
            )
    built = []
    for entry in catalog.entries:
        allowed = entry.zones if zones is None else tuple(z for z in entry.zones if z in zones)
        if not allowed:
            continue
        instance_type = build_instance_type(entry.info, preset_offerings(entry, allowed), region=region)
        if instance_type is not None:
            built.append(instance_type)
    return tuple(built)


def load_preset(
    region: str = "us-east-1", zones: list[str] | tuple[str, ...] | None = None
) -> list[InstanceType]:
    """All bundled types for ``region`` with offerings in ``zones`` (None = every zone offered).

    Types with no offering left in ``zones`` are left out. The ``InstanceType``
    objects are cached and shared between callers: treat them as read-only.
    """
    key = None if zones is None else tuple(sorted(set(zones)))
    return list(_build(region, key))
