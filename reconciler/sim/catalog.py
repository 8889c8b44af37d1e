"""The scenario ``catalog:`` section -> the simulated cloud's instance types."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from reconciler.cloud import pricesource
from reconciler.cloud.aws.capacityreservation import CapacityReservation
from reconciler.cloud.types import InstanceType, Offering
from reconciler.model import labels as wk
from reconciler.model.meta import parse_time
from reconciler.model.resources import Resources
from reconciler.sim.scenario import ScenarioError

if TYPE_CHECKING:
    from reconciler.cloud.aws.preset import PresetShaper

PRESET_PREFIX = "aws-"
_TYPE_KEYS = {"name", "arch", "os", "capacity", "labels", "overhead", "offerings"}
_CATALOG_KEYS = {"preset", "zones", "region", "overhead", "instanceTypes", "prices", "shutdownDuration",
                 "capacityReservations"}
_RESERVATION_KEYS = {
    "id", "instanceType", "zone", "availableInstanceCount", "totalInstanceCount", "reservationType",
    "instanceMatchCriteria", "ownerID", "tags", "endTime", "interruptible",
}
DEFAULT_OWNER = "123456789012"
_OFFERING_KEYS = {"capacityType", "zone", "price", "available", "zoneID", "priceSource"}


def presets() -> tuple[str, ...]:
    """``aws-<region>`` for every region with a bundled catalogue."""
    from reconciler.cloud.aws.preset import regions

    return tuple(f"{PRESET_PREFIX}{region}" for region in regions())


def preset_region(catalog: Mapping[str, Any]) -> str | None:
    """The region of ``catalog.preset`` (validated), or None without a preset."""
    preset = catalog.get("preset")
    if preset is None:
        return None
    known = presets()
    if not isinstance(preset, str) or preset not in known:
        raise ScenarioError(f"catalog.preset: {preset!r} is not a known preset (known: aws-<region> for "
                            f"{', '.join(p.removeprefix(PRESET_PREFIX) for p in known)})")
    region = preset.removeprefix(PRESET_PREFIX)
    if catalog.get("region") not in (None, "", region):
        raise ScenarioError(f"catalog.region: {catalog['region']!r} differs from the preset's region {region}")
    return region


def build_catalog(catalog: Mapping[str, Any]) -> list[InstanceType]:
    for key in catalog:
        if key not in _CATALOG_KEYS:
            raise ScenarioError(f"catalog.{key}: unknown key (expected one of {', '.join(sorted(_CATALOG_KEYS))})")
    if catalog.get("region") is not None and not isinstance(catalog["region"], str):
        raise ScenarioError("catalog.region: expected a region name")
    zones = catalog.get("zones")
    if zones is not None and (not isinstance(zones, list) or not all(isinstance(z, str) for z in zones)):
        raise ScenarioError("catalog.zones: expected a list of zone names")
    default_overhead = _resources(catalog.get("overhead"), "catalog.overhead") if "overhead" in catalog else None
    types: dict[str, InstanceType] = {}
    region = preset_region(catalog)
    if region is not None:
        from reconciler.cloud.aws.preset import PresetError, load_preset

        try:
            for instance_type in load_preset(region=region, zones=zones):
                types[instance_type.name] = instance_type
        except PresetError as err:
            raise ScenarioError(f"catalog.{'zones' if str(err).startswith('zones') else 'region'}: {err}") from None
    region = region or str(catalog.get("region") or "")
    zone_ids = _bundled_zone_ids(region)
    raw_types = catalog.get("instanceTypes") or []
    if not isinstance(raw_types, list):
        raise ScenarioError("catalog.instanceTypes: expected a list")
    for index, raw in enumerate(raw_types):
        instance_type = _instance_type(raw, f"catalog.instanceTypes[{index}]", region, default_overhead, zone_ids)
        types[instance_type.name] = instance_type
    if not types:
        raise ScenarioError("catalog: no instance types (give preset: aws-us-east-1 or instanceTypes)")
    if catalog.get("prices") is not None:
        from reconciler.cloud.pricefile import PriceFileError, apply_overrides, overrides_from_catalog

        try:
            return apply_overrides(list(types.values()), overrides_from_catalog(catalog["prices"]))
        except PriceFileError as err:
            raise ScenarioError(f"catalog.prices: {err}") from None
    return list(types.values())


def shutdown_seconds(catalog: Mapping[str, Any]) -> float:
    """``catalog.shutdownDuration`` (optional, default 0s): how long a terminated instance stays
    ``shutting-down`` before the simulated cloud reports it gone (its NodeClaim waits for that)."""
    raw = catalog.get("shutdownDuration")
    if raw is None:
        return 0.0
    from reconciler.model.durations import DurationError, parse_length

    try:
        return parse_length(str(raw))
    except DurationError as err:
        raise ScenarioError(f"catalog.shutdownDuration: {err}") from None


def catalog_shaper(catalog: Mapping[str, Any]) -> PresetShaper | None:
    """What rebuilds the preset types per EC2NodeClass (None for a catalogue without a preset)."""
    region = preset_region(catalog)
    if region is None:
        return None
    from reconciler.cloud.aws.preset import PresetShaper

    written = {str(raw.get("name")) for raw in catalog.get("instanceTypes") or [] if isinstance(raw, Mapping)}
    return PresetShaper(region, catalog.get("zones"), exclude=written)


def _bundled_zone_ids(region: str) -> dict[str, str]:
    """Zone IDs of a real AWS region (from its bundled catalogue), so ``zone-id`` selectors work on
    hand-written catalogues of real zones too; empty for made-up regions."""
    from reconciler.cloud.aws.preset import PRESETS, load_catalog

    return dict(load_catalog(region).zone_ids) if region in PRESETS else {}


def _instance_type(
    raw: Any, path: str, region: str, default_overhead: Resources | None, zone_ids: Mapping[str, str]
) -> InstanceType:
    if not isinstance(raw, Mapping):
        raise ScenarioError(f"{path}: expected a map")
    for key in raw:
        if key not in _TYPE_KEYS:
            raise ScenarioError(f"{path}.{key}: unknown key")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ScenarioError(f"{path}.name: required")
    arch = raw.get("arch", "amd64")
    if arch not in ("amd64", "arm64"):
        raise ScenarioError(f"{path}.arch: {arch!r} must be amd64 or arm64")
    os_name = raw.get("os", "linux")
    if os_name not in ("linux", "windows"):
        raise ScenarioError(f"{path}.os: {os_name!r} must be linux or windows")
    capacity = _resources(raw.get("capacity"), f"{path}.capacity")
    for required in ("cpu", "memory", "pods"):
        if capacity.amount(required) <= 0:
            raise ScenarioError(f"{path}.capacity.{required}: required and positive")
    if "overhead" in raw:
        overhead = _resources(raw.get("overhead"), f"{path}.overhead")
    elif default_overhead is not None:
        overhead = default_overhead
    else:
        from reconciler.cloud.aws.allocatable import overhead_for

        overhead = overhead_for(capacity, arch)
    extra_labels = raw.get("labels") or {}
    if not isinstance(extra_labels, Mapping):
        raise ScenarioError(f"{path}.labels: expected a map of label to value")
    labels = {wk.INSTANCE_TYPE: name, wk.ARCH: arch, wk.OS: os_name}
    if region:
        labels[wk.REGION] = region
    labels.update({str(k): str(v) for k, v in extra_labels.items()})
    offerings = _offerings(raw.get("offerings"), f"{path}.offerings", zone_ids)
    return InstanceType(name=name, capacity=capacity, overhead=overhead, offerings=offerings, labels=labels)


def _offerings(raw: Any, path: str, zone_ids: Mapping[str, str]) -> tuple[Offering, ...]:
    if not isinstance(raw, list) or not raw:
        raise ScenarioError(f"{path}: required, a list of {{capacityType, zone, price}}")
    offerings = []
    seen: set[tuple[str, str]] = set()
    for index, item in enumerate(raw):
        where = f"{path}[{index}]"
        if not isinstance(item, Mapping):
            raise ScenarioError(f"{where}: expected a map")
        unknown = set(item) - _OFFERING_KEYS
        if unknown:
            raise ScenarioError(f"{where}.{sorted(unknown)[0]}: unknown key")
        capacity_type = item.get("capacityType")
        if capacity_type not in wk.CAPACITY_TYPES:
            allowed = ", ".join(wk.CAPACITY_TYPES)
            raise ScenarioError(f"{where}.capacityType: {capacity_type!r} must be one of {allowed}")
        zone = item.get("zone")
        if not isinstance(zone, str) or not zone:
            raise ScenarioError(f"{where}.zone: required")
        price = item.get("price")
        if isinstance(price, bool) or not isinstance(price, int | float) or not math.isfinite(price) or price < 0:
            raise ScenarioError(f"{where}.price: required, a non-negative number (USD per hour)")
        available = item.get("available", True)
        if not isinstance(available, bool):
            raise ScenarioError(f"{where}.available: must be true or false")
        if (capacity_type, zone) in seen:
            raise ScenarioError(f"{where}: duplicate offering {capacity_type} in {zone}")
        seen.add((capacity_type, zone))
        zone_id = item.get("zoneID", zone_ids.get(zone, ""))
        source = item.get("priceSource", pricesource.SCENARIO)
        for key, value in (("zoneID", zone_id), ("priceSource", source)):
            if not isinstance(value, str):
                raise ScenarioError(f"{where}.{key}: expected a string")
        offerings.append(
            Offering(zone=zone, capacity_type=capacity_type, price=float(price), available=available,
                     zone_id=zone_id, price_source=source)
        )
    return tuple(offerings)


def build_reservations(catalog: Mapping[str, Any], types: Sequence[InstanceType]) -> list[CapacityReservation]:
    """``catalog.capacityReservations``: the account's capacity reservations (an optional key of the format).

    Each: ``id`` (cr-...), ``instanceType``, ``zone``, ``availableInstanceCount`` (instances left; default
    ``totalInstanceCount``), ``reservationType`` (default | capacity-block), ``instanceMatchCriteria``
    (targeted | open), ``ownerID``, ``tags``, ``endTime`` (RFC 3339; a capacity block needs one),
    ``interruptible``. EC2NodeClasses select them with ``capacityReservationSelectorTerms``."""
    raw = catalog.get("capacityReservations")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ScenarioError("catalog.capacityReservations: expected a list")
    known = {t.name for t in types}
    found: list[CapacityReservation] = []
    for index, item in enumerate(raw):
        found.append(_reservation(item, f"catalog.capacityReservations[{index}]", known))
    ids = [r.id for r in found]
    duplicate = next((i for i in ids if ids.count(i) > 1), None)
    if duplicate:
        raise ScenarioError(f"catalog.capacityReservations: duplicate id {duplicate!r}")
    return found


def _reservation(item: Any, where: str, known: set[str]) -> CapacityReservation:
    if not isinstance(item, Mapping):
        raise ScenarioError(f"{where}: expected a map")
    unknown = sorted(set(item) - _RESERVATION_KEYS)
    if unknown:
        expected = ", ".join(sorted(_RESERVATION_KEYS))
        raise ScenarioError(f"{where}.{unknown[0]}: unknown key (expected one of {expected})")
    reservation_id = item.get("id")
    if not isinstance(reservation_id, str) or not re.fullmatch(r"cr-[0-9a-z]+", reservation_id):
        raise ScenarioError(f"{where}.id: required, a capacity reservation ID like cr-0123456789abcdef0")
    name = item.get("instanceType")
    if name not in known:
        raise ScenarioError(f"{where}.instanceType: {name!r} is not in the catalog")
    zone = item.get("zone")
    if not isinstance(zone, str) or not zone:
        raise ScenarioError(f"{where}.zone: required")
    counts = {}
    for key in ("availableInstanceCount", "totalInstanceCount"):
        value = item.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ScenarioError(f"{where}.{key}: a whole number >= 0")
        counts[key] = value
    total = counts["totalInstanceCount"] if counts["totalInstanceCount"] is not None else counts[
        "availableInstanceCount"]
    if total is None:
        raise ScenarioError(f"{where}: give availableInstanceCount or totalInstanceCount")
    available = counts["availableInstanceCount"] if counts["availableInstanceCount"] is not None else total
    if available > total:
        raise ScenarioError(f"{where}.availableInstanceCount: {available} exceeds totalInstanceCount {total}")
    kind = item.get("reservationType", wk.RESERVATION_TYPE_DEFAULT)
    if kind not in (wk.RESERVATION_TYPE_DEFAULT, wk.RESERVATION_TYPE_CAPACITY_BLOCK):
        raise ScenarioError(f"{where}.reservationType: {kind!r} must be default or capacity-block")
    criteria = item.get("instanceMatchCriteria", "targeted")
    if criteria not in ("targeted", "open"):
        raise ScenarioError(f"{where}.instanceMatchCriteria: {criteria!r} must be targeted or open")
    tags = item.get("tags") or {}
    if not isinstance(tags, Mapping):
        raise ScenarioError(f"{where}.tags: expected a map of tag to value")
    end = item.get("endTime")
    end_time = None
    if end is not None:
        try:
            end_time = parse_time(end)
        except ValueError:
            raise ScenarioError(f"{where}.endTime: {end!r} is not an RFC 3339 time") from None
    if kind == wk.RESERVATION_TYPE_CAPACITY_BLOCK and end_time is None:
        raise ScenarioError(f"{where}.endTime: required for a capacity-block reservation")
    interruptible = item.get("interruptible", False)
    if not isinstance(interruptible, bool):
        raise ScenarioError(f"{where}.interruptible: must be true or false")
    owner = item.get("ownerID", DEFAULT_OWNER)
    return CapacityReservation(
        id=reservation_id, instance_type=str(name), zone=zone, owner_id=str(owner), instance_match_criteria=criteria,
        reservation_type=kind, interruptible=interruptible, end_time=end_time, available=available, total=total,
        tags={str(k): str(v) for k, v in tags.items()},
    )


def _resources(raw: Any, path: str) -> Resources:
    try:
        return Resources.from_manifest(raw, path=path)
    except ValueError as err:
        raise ScenarioError(str(err)) from None
