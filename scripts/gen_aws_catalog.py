#!/usr/bin/env python3
"""Generate the bundled EC2 catalogue ``reconciler/cloud/data/aws-<region>.json``.

Sources (both offline, both deterministic):

- instance-type facts: the DescribeInstanceTypes data that moto ships
  (``moto/ec2/resources/instance_types.json.gz``, a snapshot of real EC2 answers)
  and its per-zone DescribeInstanceTypeOfferings data
  (``moto/ec2/resources/instance_type_offerings/availability-zone/<region>.json.gz``);
  zone IDs come from moto's availability-zone table;
- on-demand prices: ``../shared/data/ec2-on-demand-prices-us-east-1.json``
  (public Linux shared-tenancy list prices, USD/h).

Only types that have a price are kept. A priced type that the offerings data
does not list in any zone is given ``DEFAULT_ZONES`` (documented below) so that
it stays usable; the count of such types is printed.

Re-run (from the repository root, with the dev virtualenv):

    .venv/bin/python scripts/gen_aws_catalog.py
    .venv/bin/python scripts/gen_aws_catalog.py --prices PATH --out PATH   # other inputs

The output is sorted and written one instance type per line, so re-running with
the same inputs gives a byte-identical file and diffs stay readable.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from reconciler.cloud.aws.catalog import InstanceTypeInfo  # noqa: E402

DEFAULT_PRICES = REPO_ROOT.parent / "shared" / "data" / "ec2-on-demand-prices-us-east-1.json"
DEFAULT_OUT = REPO_ROOT / "reconciler" / "cloud" / "data" / "aws-us-east-1.json"
REGION = "us-east-1"
# us-east-1e only offers a few legacy types, so the fallback leaves it out.
DEFAULT_ZONES = ("us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1f")
FORMAT_VERSION = 1


def moto_resources() -> Path:
    try:
        import moto.ec2
    except ImportError:  # pragma: no cover - moto is a test/dev dependency
        sys.exit("moto is not installed: run `.venv/bin/pip install -e '.[dev]'` first")
    return Path(moto.ec2.__file__).resolve().parent / "resources"


def load_zone_ids(region: str) -> dict[str, str]:
    from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend

    return {zone.name: zone.zone_id for zone in RegionsAndZonesBackend.zones.get(region, [])}


def build_catalog(
    instance_types: Mapping[str, Mapping[str, Any]],
    offerings: list[Mapping[str, str]],
    prices: Mapping[str, Any],
    zone_ids: Mapping[str, str],
    region: str = REGION,
) -> tuple[dict[str, Any], int]:
    """The catalogue document and how many types fell back to ``DEFAULT_ZONES``."""
    zones_by_type: dict[str, set[str]] = {}
    for row in offerings:
        zones_by_type.setdefault(row["InstanceType"], set()).add(row["Location"])
    price_table: Mapping[str, float] = prices["prices"]
    types: dict[str, Any] = {}
    defaulted = 0
    for name in sorted(price_table):
        item = instance_types.get(name)
        if item is None:
            continue
        info = InstanceTypeInfo.from_ec2(item)
        if not info.architectures or not info.vcpus:
            continue
        zones = sorted(zones_by_type.get(name) or ())
        if not zones:
            zones = list(DEFAULT_ZONES)
            defaulted += 1
        record = info.to_record()
        record["od"] = float(price_table[name])
        # Zones as their one-letter suffixes ("abcdf") keep the file small.
        record["zones"] = "".join(zone.removeprefix(region) for zone in zones)
        types[name] = record
    document = {
        "formatVersion": FORMAT_VERSION,
        "region": region,
        "generatedBy": "scripts/gen_aws_catalog.py",
        "instanceTypeSource": "moto ec2/resources (DescribeInstanceTypes, DescribeInstanceTypeOfferings)",
        "priceSource": str(prices.get("source", "")),
        "pricesAsOf": str(prices.get("as_of", "")),
        "zones": {zone: zone_ids[zone] for zone in sorted(zone_ids)},
        "types": types,
    }
    return document, defaulted


def render(document: Mapping[str, Any]) -> str:
    """Deterministic JSON with one instance type per line."""
    header = {key: value for key, value in document.items() if key != "types"}
    lines = ["{"]
    for key, value in header.items():
        lines.append(f"{json.dumps(key)}: {json.dumps(value, sort_keys=True)},")
    lines.append('"types": {')
    entries = [
        f"{json.dumps(name)}: {json.dumps(record, sort_keys=True, separators=(',', ':'))}"
        for name, record in sorted(document["types"].items())
    ]
    lines.append(",\n".join(entries))
    lines.append("}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prices", type=Path, default=DEFAULT_PRICES, help="on-demand price JSON")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="catalogue to write")
    args = parser.parse_args(argv)
    resources = moto_resources()
    with gzip.open(resources / "instance_types.json.gz", "rt") as handle:
        instance_types = json.load(handle)
    with gzip.open(
        resources / "instance_type_offerings" / "availability-zone" / f"{REGION}.json.gz", "rt"
    ) as handle:
        offerings = json.load(handle)
    prices = json.loads(args.prices.read_text())
    if prices.get("region", REGION) != REGION:
        sys.exit(f"{args.prices}: prices are for {prices.get('region')!r}, expected {REGION}")
    document, defaulted = build_catalog(instance_types, offerings, prices, load_zone_ids(REGION))
    text = render(document)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    unpriced = len(prices["prices"]) - len(document["types"])
    print(
        f"wrote {args.out} ({len(text) // 1024} KiB): {len(document['types'])} types, "
        f"{defaulted} with default zones, {unpriced} priced types without EC2 data skipped",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
