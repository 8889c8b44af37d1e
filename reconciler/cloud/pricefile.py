"""User price files (``--prices FILE``): negotiated, Savings Plan or any other rates, per type and zone.

A file overrides the prices of the catalogue in use, bundled preset or live APIs alike, and every
overridden offering says so (``user price file <name>``). JSON or CSV, one entry per price:

JSON (a list, or ``{"prices": [...]}``)::

    [{"instanceType": "m5.large", "capacityType": "on-demand", "price": 0.081},
     {"instanceType": "m5.large", "capacityType": "spot", "zone": "us-east-1a", "price": 0.031}]

CSV (header row; ``zone`` may be empty or left out)::

    instanceType,capacityType,zone,price
    m5.large,on-demand,,0.081
    m5.large,spot,us-east-1a,0.031

An entry without a zone applies to every zone; one with a zone wins over it there. The file is read
once by the command and carried in the scenario's ``catalog.prices`` (``{"source": NAME, "entries":
[...]}``), so a snapshot written with it reproduces the same figures.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from reconciler.cloud import pricesource
from reconciler.cloud.types import InstanceType
from reconciler.model import labels as wk

FIELDS = ("instanceType", "capacityType", "zone", "price")


class PriceFileError(ValueError):
    """A price file or ``catalog.prices`` section is malformed; the message names the entry."""


@dataclass(slots=True, frozen=True)
class PriceOverrides:
    source: str
    by_offering: Mapping[tuple[str, str, str], float]  # (type, capacity type, zone or "") -> USD/h

    def price(self, instance_type: str, capacity_type: str, zone: str) -> float | None:
        exact = self.by_offering.get((instance_type, capacity_type, zone))
        return exact if exact is not None else self.by_offering.get((instance_type, capacity_type, ""))

    @property
    def label(self) -> str:
        return pricesource.user_file(self.source)


def load_price_file(path: str | Path) -> dict[str, Any]:
    """Read ``path`` (JSON or CSV by content) into a ``catalog.prices`` section; errors name the entry."""
    file = Path(path)
    try:
        text = file.read_text()
    except OSError as err:
        raise PriceFileError(f"{path}: cannot read ({err.strerror or err})") from None
    stripped = text.lstrip()
    if stripped.startswith(("[", "{")):
        try:
            document = json.loads(text)
        except json.JSONDecodeError as err:
            raise PriceFileError(f"{path}: not valid JSON (line {err.lineno}: {err.msg})") from None
        entries = document.get("prices") if isinstance(document, Mapping) else document
        if not isinstance(entries, list):
            raise PriceFileError(f"{path}: expected a list of prices or {{\"prices\": [...]}}")
    else:
        entries = _csv_entries(text, str(path))
    section = {"source": file.name, "entries": entries}
    overrides_from_catalog(section, where=str(path))  # validate now, with the file's name in errors
    return section


def _csv_entries(text: str, where: str) -> list[dict[str, Any]]:
    reader = csv.DictReader(io.StringIO(text))
    header = [name.strip() for name in reader.fieldnames or []]
    missing = [name for name in ("instanceType", "capacityType", "price") if name not in header]
    if missing:
        raise PriceFileError(f"{where}: CSV header needs {', '.join(FIELDS)} (missing {', '.join(missing)})")
    entries = []
    for row in reader:
        entry: dict[str, Any] = {key.strip(): (value or "").strip() for key, value in row.items() if key}
        if not any(entry.values()):
            continue
        entries.append(entry)
    return entries


def overrides_from_catalog(section: Any, *, where: str = "") -> PriceOverrides:
    """Validate a ``catalog.prices`` section (as ``load_price_file`` writes it)."""
    if not isinstance(section, Mapping) or not isinstance(section.get("entries"), list):
        raise PriceFileError(f"{where or 'prices'}: expected {{source: NAME, entries: [...]}}")
    source = str(section.get("source") or "prices")
    table: dict[tuple[str, str, str], float] = {}
    for index, entry in enumerate(section["entries"]):
        path = f"{where or 'entries'}[{index}]" if where else f"entries[{index}]"
        if not isinstance(entry, Mapping):
            raise PriceFileError(f"{path}: expected a map with {', '.join(FIELDS)}")
        unknown = sorted(set(entry) - set(FIELDS))
        if unknown:
            raise PriceFileError(f"{path}.{unknown[0]}: unknown key (expected {', '.join(FIELDS)})")
        name = entry.get("instanceType")
        if not isinstance(name, str) or not name:
            raise PriceFileError(f"{path}.instanceType: required")
        capacity_type = entry.get("capacityType")
        if capacity_type not in wk.CAPACITY_TYPES:
            allowed = ", ".join(wk.CAPACITY_TYPES)
            raise PriceFileError(f"{path}.capacityType: {capacity_type!r} must be one of {allowed}")
        zone = entry.get("zone") or ""
        if not isinstance(zone, str):
            raise PriceFileError(f"{path}.zone: expected a zone name")
        price = _price(entry.get("price"), f"{path}.price")
        key = (name, str(capacity_type), zone)
        if key in table:
            raise PriceFileError(f"{path}: duplicate price for {name} {capacity_type} in {zone or 'every zone'}")
        table[key] = price
    if not table:
        raise PriceFileError(f"{where or 'prices'}: no prices")
    return PriceOverrides(source, table)


def _price(raw: Any, path: str) -> float:
    if isinstance(raw, bool):
        raise PriceFileError(f"{path}: {raw!r} is not a price")
    try:
        price = float(raw)
    except (TypeError, ValueError):
        raise PriceFileError(f"{path}: {raw!r} is not a price (USD per hour)") from None
    if not math.isfinite(price) or price <= 0:
        raise PriceFileError(f"{path}: {raw!r} must be a positive number of USD per hour")
    return price


def apply_overrides(types: Sequence[InstanceType], overrides: PriceOverrides) -> list[InstanceType]:
    """The types with every matching offering repriced and labelled with the file; the rest untouched.

    A file none of whose entries matches any offering is an error (a wrong region or a typo would
    otherwise change nothing, silently)."""
    result = []
    matched = False
    for instance_type in types:
        offerings = []
        changed = False
        for offering in instance_type.offerings:
            price = overrides.price(instance_type.name, offering.capacity_type, offering.zone)
            if price is None:
                offerings.append(offering)
                continue
            offerings.append(replace(offering, price=price, price_source=overrides.label))
            changed = True
        matched = matched or changed
        result.append(replace(instance_type, offerings=tuple(offerings)) if changed else instance_type)
    if not matched:
        raise PriceFileError(f"{overrides.source}: no entry matches an offering of the catalogue (wrong region?)")
    return result
