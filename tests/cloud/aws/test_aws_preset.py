"""The bundled us-east-1 catalogue: contents, determinism, generator freshness."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from reconciler.cloud.aws.catalog import InstanceTypeInfo
from reconciler.cloud.aws.instancetype import spot_fraction
from reconciler.cloud.aws.preset import PresetError, load_catalog, load_preset
from reconciler.model import labels as wk
from reconciler.model.quantity import parse_quantity

REPO = Path(__file__).resolve().parents[3]
PRICES = REPO.parent / "shared" / "data" / "ec2-on-demand-prices-us-east-1.json"


def by_name() -> dict:
    return {it.name: it for it in load_preset()}


def test_preset_has_real_types_with_aws_allocatable() -> None:
    types = by_name()
    assert len(types) > 1000
    m5 = types["m5.large"]
    assert m5.capacity["cpu"] == parse_quantity("2")
    assert m5.allocatable.to_manifest() == {
        "cpu": "1930m",
        "memory": "6903Mi",
        "pods": "29",
        "ephemeral-storage": "17Gi",
    }
    assert m5.labels[wk.INSTANCE_FAMILY] == "m5"
    assert m5.labels[wk.INSTANCE_CATEGORY] == "m"
    assert m5.labels[wk.INSTANCE_GENERATION] == "5"
    assert m5.labels[wk.INSTANCE_SIZE] == "large"
    assert m5.labels[wk.INSTANCE_CPU] == "2"
    assert m5.labels[wk.INSTANCE_MEMORY] == "8192"
    assert m5.labels[wk.INSTANCE_HYPERVISOR] == "nitro"
    assert m5.labels[wk.REGION] == "us-east-1"
    assert m5.labels[wk.ARCH] == "amd64"
    assert types["c7g.xlarge"].labels[wk.ARCH] == "arm64"


def test_gpu_neuron_and_efa_types_expose_extended_resources_and_labels() -> None:
    types = by_name()
    p4d = types["p4d.24xlarge"]
    assert p4d.capacity["nvidia.com/gpu"] == parse_quantity("8")
    assert p4d.capacity["vpc.amazonaws.com/efa"] == parse_quantity("4")
    assert p4d.capacity["pods"] == parse_quantity("737")
    assert p4d.labels[wk.INSTANCE_GPU_NAME] == "a100"
    assert p4d.labels[wk.INSTANCE_GPU_MANUFACTURER] == "nvidia"
    assert p4d.labels[wk.INSTANCE_GPU_MEMORY] == "40960"
    assert p4d.labels["karpenter.k8s.aws/instance-local-nvme"] == "8000"
    trn1 = types["trn1.32xlarge"]
    assert trn1.capacity["aws.amazon.com/neuron"] == parse_quantity("16")
    assert trn1.capacity["aws.amazon.com/neuroncore"] == parse_quantity("32")


def test_offerings_on_demand_at_list_price_and_spot_at_documented_fraction() -> None:
    m5 = by_name()["m5.large"]
    on_demand = [o for o in m5.offerings if o.capacity_type == "on-demand"]
    spot = [o for o in m5.offerings if o.capacity_type == "spot"]
    assert on_demand and all(o.price == 0.096 for o in on_demand)
    assert {o.zone for o in spot} == {o.zone for o in on_demand}
    for offering in spot:
        assert 0.30 * 0.096 <= offering.price < 0.45 * 0.096
        assert offering.price == round(0.096 * spot_fraction("m5.large", offering.zone), 6)
    assert len({o.price for o in spot}) > 1  # zones differ


def test_spot_fraction_is_deterministic_and_bounded() -> None:
    values = [spot_fraction(f"t{i}.large", "us-east-1a") for i in range(200)]
    assert all(0.30 <= v < 0.45 for v in values)
    # Pinned: the same figure on every machine and Python version (SHA-256 of "<type>/<zone>").
    assert spot_fraction("m5.large", "us-east-1a") == 0.3930183178382566
    assert spot_fraction("c5.xlarge", "us-east-1f") == 0.31000966005316344
    assert max(values) - min(values) > 0.1


def test_zone_filter_limits_offerings_and_drops_types_without_any() -> None:
    only_e = load_preset(zones=["us-east-1e"])
    assert 0 < len(only_e) < 200
    assert all(o.zone == "us-east-1e" for it in only_e for o in it.offerings)
    two = load_preset(zones=("us-east-1b", "us-east-1a"))
    assert {o.zone for it in two for o in it.offerings} == {"us-east-1a", "us-east-1b"}


def test_preset_errors_name_the_problem() -> None:
    with pytest.raises(PresetError, match="eu-west-9"):
        load_preset("eu-west-9")
    with pytest.raises(PresetError, match="us-east-1z"):
        load_preset(zones=["us-east-1z"])


def test_catalog_record_round_trips() -> None:
    catalog = load_catalog()
    for entry in catalog.entries[:50]:
        assert InstanceTypeInfo.from_record(entry.info.name, entry.info.to_record()) == entry.info
    assert catalog.zone_ids["us-east-1a"].startswith("use1-az")


def test_bundled_catalogues_are_what_the_generator_produces(tmp_path: Path) -> None:
    """Regenerating from moto data and the shared price table reproduces every committed file exactly."""
    if not PRICES.exists():
        pytest.skip(f"{PRICES} not available")
    spec = importlib.util.spec_from_file_location("gen_aws_catalog", REPO / "scripts" / "gen_aws_catalog.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_aws_catalog"] = module
    spec.loader.exec_module(module)
    out = tmp_path / "data"
    assert module.main(["--prices", str(PRICES), "--out-dir", str(out)]) == 0
    bundled = REPO / "reconciler" / "cloud" / "data"
    written = sorted(path.name for path in out.iterdir())
    assert written == sorted(p.name for p in bundled.glob("aws-*.json") if "supplement" not in p.name)
    for name in written:
        assert (out / name).read_bytes() == (bundled / name).read_bytes(), name
    prices = json.loads(PRICES.read_text())["prices"]
    us_east = json.loads((out / "aws-us-east-1.json").read_text())
    assert set(us_east["types"]) <= set(prices)
    assert us_east["prices"] == {"kind": "list", "region": "us-east-1", "asOf": "2026-07-20",
                                 "source": "AWS public on-demand list prices, Linux, shared tenancy, USD per hour"}
    assert sum(path.stat().st_size for path in out.iterdir()) < 1_600_000


def test_supplement_types_name_their_sources_and_fill_only_gaps() -> None:
    """Types moto's EC2 snapshot lacks (g4ad, dl1, p3) come from public specifications, each with its sources."""
    from importlib import resources

    data = resources.files("reconciler.cloud").joinpath("data")
    supplement = json.loads(data.joinpath("aws-us-east-1-supplement.json").read_text())
    generated = json.loads(data.joinpath("aws-us-east-1.json").read_text())["types"]
    assert not set(supplement["types"]) & set(json.loads(data.joinpath("aws-instance-types.json").read_text())["types"])
    sources = {name: record["source"] for name, record in supplement["types"].items()}
    assert sources == {
        **{f"g4ad.{size}": ["aws-spec", "karpenter-vpclimits", "karpenter-bandwidth", "karpenter-pricing"]
           for size in ("xlarge", "2xlarge", "4xlarge", "8xlarge")},
        "g4ad.16xlarge": ["karpenter-fake-ec2", "karpenter-vpclimits", "karpenter-bandwidth", "karpenter-pricing"],
        **{name: ["aws-spec", "karpenter-vpclimits", "karpenter-bandwidth", "karpenter-pricing"]
           for name in ("dl1.24xlarge", "p3.2xlarge", "p3.8xlarge", "p3.16xlarge")},
    }
    assert {s for used in sources.values() for s in used} <= set(supplement["sources"])
    assert not set(sources) & set(generated), "the generated catalogue now has these: drop them here"
    by_name = {t.name: t for t in load_preset()}
    g4ad = by_name["g4ad.xlarge"]
    assert g4ad.capacity.amount("amd.com/gpu") == 1000 and g4ad.capacity.amount("pods") == 8_000
    assert g4ad.labels[wk.INSTANCE_GPU_NAME] == "radeon-pro-v520"
    assert by_name["dl1.24xlarge"].capacity.amount("habana.ai/gaudi") == 8000
    assert by_name["p3.16xlarge"].labels[wk.INSTANCE_GPU_COUNT] == "8"
    assert {o.price for o in by_name["p3.2xlarge"].offerings if o.capacity_type == "on-demand"} == {3.06}


def test_every_karpenter_example_workload_is_covered(shared_dir: Path) -> None:
    """All 11 published workloads are exercised by test_prov_examples (gpu-amd needs the g4ad supplement)."""
    names = sorted(p.name for p in (shared_dir / "data" / "karpenter-examples" / "workloads").glob("*.yaml"))
    assert len(names) == 11 and "gpu-amd.yaml" in names


@pytest.mark.parametrize(
    ("region", "zone", "zone_id"),
    [("us-west-2", "us-west-2a", "usw2-az"), ("eu-west-1", "eu-west-1a", "euw1-az"),
     ("ap-northeast-2", "ap-northeast-2a", "apne2-az"), ("us-east-1", "us-east-1b", "use1-az1")],
)
def test_every_stack_region_has_a_preset_with_its_zones_and_priced_types(region: str, zone: str, zone_id: str) -> None:
    """The stacks' regions (Pulumi.*.yaml: us-west-2, us-east-1), eu-west-1 and the seeds' ap-northeast-2."""
    from reconciler.cloud import pricesource
    from reconciler.cloud.aws.preset import regions

    assert len(regions()) >= 30 and region in regions()
    catalog = load_catalog(region)
    assert zone in catalog.zone_ids and catalog.zone_ids[zone].startswith(zone_id)
    types = {t.name: t for t in load_preset(region)}
    assert len(types) > 500 and "m5.large" in types
    offerings = types["m5.large"].offerings
    assert {o.zone for o in offerings} <= set(catalog.zone_ids) and all(o.price > 0 for o in offerings)
    assert all(o.zone_id == catalog.zone_ids[o.zone] for o in offerings)
    assert types["m5.large"].labels[wk.REGION] == region
    on_demand = {o.price_source for o in offerings if o.capacity_type == "on-demand"}
    if region == "us-east-1":
        assert on_demand == {pricesource.bundled_list("us-east-1", "2026-07-20")}
    else:  # no bundled table for the region: Karpenter's fallback, said to be an estimate
        assert on_demand == {pricesource.region_estimate(region, "us-east-1", "2026-07-20")}
        assert catalog.prices_estimated
    assert {o.price_source for o in offerings if o.capacity_type == "spot"} == {pricesource.SPOT_ESTIMATE}


def test_live_provider_starts_from_the_regions_table_and_says_what_it_is() -> None:
    from reconciler.cloud import pricesource
    from reconciler.cloud.aws.provider import startup_pricing

    west = startup_pricing("us-west-2", clock=lambda: 0.0)
    assert west.on_demand_price("m5.large") == 0.096
    assert west.source_of("on-demand", "m5.large", "us-west-2a") == pricesource.region_estimate(
        "us-west-2", "us-east-1", "2026-07-20")
    assert west.source_of("spot", "m5.large", "us-west-2a") == pricesource.SPOT_UNTIL_REFRESH
    assert startup_pricing("mars-north-1", clock=lambda: 0.0).on_demand_price("m5.large") is None
