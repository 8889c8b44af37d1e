#!/usr/bin/env python3
"""Generate the bundled EC2 catalogues: ``aws-instance-types.json`` and one ``aws-<region>.json`` per region.

Sources (all offline, all deterministic):

- instance-type facts: the DescribeInstanceTypes data that moto ships
  (``moto/ec2/resources/instance_types.json.gz``, a snapshot of real EC2 answers), written once for
  every region to ``aws-instance-types.json``;
- per region, the zones each type is offered in: moto's DescribeInstanceTypeOfferings data
  (``moto/ec2/resources/instance_type_offerings/availability-zone/<region>.json.gz``), for every region
  moto ships it for; zone IDs come from moto's availability-zone table (a zone moto lists offerings
  for but has no ID for is left out, and counted);
- on-demand prices: ``../shared/data/ec2-on-demand-prices-us-east-1.json`` (public Linux
  shared-tenancy list prices, USD/h, the same table Karpenter's AWS provider bundles as its
  initial prices). No bundled table exists for other regions: aws/karpenter-provider-aws generates
  its initial prices for us-east-1 only (plus the China and GovCloud partitions) and, like Karpenter,
  a region without its own table is priced from the us-east-1 table, which the region file marks
  as an estimate (``prices.kind``). ``--region-prices REGION=FILE`` adds a real table for a region.

Only types that have a price are kept. In us-east-1 a priced type that the offerings data does not
list in any zone is given ``DEFAULT_ZONES`` (documented below) so that it stays usable; elsewhere
such a type is left out of the region.

Re-run (from the repository root, with the dev virtualenv):

    .venv/bin/python scripts/gen_aws_catalog.py
    .venv/bin/python scripts/gen_aws_catalog.py --prices PATH --out-dir DIR --region us-west-2

The output is sorted and written one instance type per line, so re-running with the same inputs
gives byte-identical files and diffs stay readable.
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
DEFAULT_OUT_DIR = REPO_ROOT / "reconciler" / "cloud" / "data"
FACTS_FILE = "aws-instance-types.json"
PRICES_REGION = "us-east-1"
# us-east-1e only offers a few legacy types, so the fallback leaves it out.
DEFAULT_ZONES = ("us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1f")
FORMAT_VERSION = 2
INSTANCE_TYPE_SOURCE = "moto ec2/resources (DescribeInstanceTypes, DescribeInstanceTypeOfferings)"


def moto_resources() -> Path:
    try:
        import moto.ec2
    except ImportError:  # pragma: no cover - moto is a test/dev dependency
        sys.exit("moto is not installed: run `.venv/bin/pip install -e '.[dev]'` first")
    return Path(moto.ec2.__file__).resolve().parent / "resources"


def moto_regions(resources: Path) -> list[str]:
    folder = resources / "instance_type_offerings" / "availability-zone"
    return sorted(path.name.removesuffix(".json.gz") for path in folder.glob("*.json.gz"))


def load_zone_ids(region: str) -> dict[str, str]:
    from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend

    return {zone.name: zone.zone_id for zone in RegionsAndZonesBackend.zones.get(region, [])}


def region_document(
    region: str,
    offerings: list[Mapping[str, str]],
    prices: Mapping[str, Any],
    prices_region: str,
    zone_ids: Mapping[str, str],
    known_types: set[str],
) -> tuple[dict[str, Any], int, int]:
    """One region's document, how many types fell back to ``DEFAULT_ZONES`` and how many zone rows had no ID."""
    zones_by_type: dict[str, set[str]] = {}
    unknown_zone_rows = 0
    for row in offerings:
        if row["Location"] not in zone_ids:
            unknown_zone_rows += 1
            continue
        zones_by_type.setdefault(row["InstanceType"], set()).add(row["Location"])
    price_table: Mapping[str, float] = prices["prices"]
    types: dict[str, Any] = {}
    defaulted = 0
    for name in sorted(price_table):
        if name not in known_types:
            continue
        zones = sorted(zones_by_type.get(name) or ())
        if not zones and region == "us-east-1":
            zones = list(DEFAULT_ZONES)
            defaulted += 1
        if not zones:
            continue
        # Zones as their one-letter suffixes ("abcdf") keep the file small.
        types[name] = {"od": float(price_table[name]), "zones": "".join(z.removeprefix(region) for z in zones)}
    estimate = prices_region != region
    document = {
        "formatVersion": FORMAT_VERSION,
        "region": region,
        "generatedBy": "scripts/gen_aws_catalog.py",
        "instanceTypeSource": INSTANCE_TYPE_SOURCE,
        "prices": {
            "kind": "estimate" if estimate else "list",
            "region": prices_region,
            "asOf": str(prices.get("as_of", "")),
            "source": str(prices.get("source", ""))
            or f"AWS public on-demand list prices for {prices_region}, Linux, shared tenancy, USD per hour",
        },
        "zones": {zone: zone_ids[zone] for zone in sorted(zone_ids)},
        "types": types,
    }
    return document, defaulted, unknown_zone_rows


def facts_document(instance_types: Mapping[str, Mapping[str, Any]], names: set[str]) -> dict[str, Any]:
    types = {}
    for name in sorted(names):
        info = InstanceTypeInfo.from_ec2(instance_types[name])
        types[name] = info.to_record()
    return {
        "formatVersion": FORMAT_VERSION,
        "generatedBy": "scripts/gen_aws_catalog.py",
        "instanceTypeSource": INSTANCE_TYPE_SOURCE,
        "types": types,
    }


def usable_types(instance_types: Mapping[str, Mapping[str, Any]]) -> set[str]:
    usable = set()
    for name, item in instance_types.items():
        info = InstanceTypeInfo.from_ec2(item)
        if info.architectures and info.vcpus:
            usable.add(name)
    return usable


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


def _region_prices(values: list[str]) -> dict[str, Path]:
    tables = {}
    for value in values:
        region, _, path = value.partition("=")
        if not region or not path:
            sys.exit(f"--region-prices {value!r}: expected REGION=FILE")
        tables[region] = Path(path)
    return tables


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prices", type=Path, default=DEFAULT_PRICES, help="us-east-1 on-demand price JSON")
    parser.add_argument(
        "--region-prices", action="append", default=[], metavar="REGION=FILE",
        help="a region's own on-demand price JSON (same shape as --prices); repeatable",
    )
    parser.add_argument("--out-dir", type=Path, default=DEFAULT_OUT_DIR, help="folder to write the catalogues to")
    parser.add_argument("--region", action="append", default=[], help="only these regions (default: all moto has)")
    args = parser.parse_args(argv)
    resources = moto_resources()
    with gzip.open(resources / "instance_types.json.gz", "rt") as handle:
        instance_types = json.load(handle)
    base_prices = json.loads(args.prices.read_text())
    if base_prices.get("region", PRICES_REGION) != PRICES_REGION:
        sys.exit(f"{args.prices}: prices are for {base_prices.get('region')!r}, expected {PRICES_REGION}")
    own_prices = {region: json.loads(path.read_text()) for region, path in _region_prices(args.region_prices).items()}
    known = usable_types(instance_types)
    regions = args.region or moto_regions(resources)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    listed: set[str] = set()
    for region in regions:
        source = resources / "instance_type_offerings" / "availability-zone" / f"{region}.json.gz"
        if not source.exists():
            sys.exit(f"--region {region}: moto has no instance-type offerings for it")
        with gzip.open(source, "rt") as handle:
            offerings = json.load(handle)
        prices, prices_region = (own_prices[region], region) if region in own_prices else (base_prices, PRICES_REGION)
        document, defaulted, unknown_rows = region_document(
            region, offerings, prices, prices_region, load_zone_ids(region), known
        )
        listed.update(document["types"])
        text = render(document)
        (args.out_dir / f"aws-{region}.json").write_text(text)
        print(
            f"{region}: {len(document['types'])} types ({document['prices']['kind']} prices), "
            f"{defaulted} with default zones, {unknown_rows} offering rows in zones without an ID",
            file=sys.stderr,
        )
    facts_path = args.out_dir / FACTS_FILE
    if not args.region:  # the facts file covers every region, so only a full run rewrites it
        facts_path.write_text(render(facts_document(instance_types, listed)))
        print(f"wrote {facts_path}: {len(listed)} instance types", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
