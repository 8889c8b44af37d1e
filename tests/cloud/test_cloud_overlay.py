"""NodeOverlay evaluation and application (``reconciler.cloud.overlay``), on hand-made types and the real
us-east-1 catalogue: price / priceAdjustment (absolute and percentage), extended capacity, selection by
requirements (well-known labels, capacity type, NodePool and its labels), weight order and conflicts."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.cloud.overlay import Overlay, adjusted_price, by_weight
from reconciler.cloud.types import InstanceType, Offering
from reconciler.model import labels as wk
from reconciler.model.nodepool import NodePool
from reconciler.model.resources import Resources
from reconciler.scheduling.overlay_evaluation import evaluate


def overlay(name: str, requirements: list[dict[str, Any]] | None = None, *, weight: int | None = None,
            price: str | None = None, adjustment: str | None = None,
            capacity: dict[str, str] | None = None) -> Overlay:
    spec: dict[str, Any] = {"requirements": requirements or []}
    if weight is not None:
        spec["weight"] = weight
    if price is not None:
        spec["price"] = price
    if adjustment is not None:
        spec["priceAdjustment"] = adjustment
    if capacity is not None:
        spec["capacity"] = capacity
    return Overlay.from_manifest({"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
                                  "metadata": {"name": name}, "spec": spec})


def pool(name: str = "default", labels: dict[str, str] | None = None) -> NodePool:
    template: dict[str, Any] = {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                          "name": "default"}, "requirements": []}}
    if labels:
        template["metadata"] = {"labels": labels}
    return NodePool.from_manifest({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
                                   "spec": {"template": template}})


def itype(name: str, family: str, od: float) -> InstanceType:
    return InstanceType(
        name, Resources.of(cpu="2", memory="8Gi", pods="29"),
        offerings=(Offering("z1", "on-demand", od), Offering("z1", "spot", round(od * 0.4, 6)),
                   Offering("z2", "on-demand", od)),
        labels={wk.INSTANCE_TYPE: name, wk.INSTANCE_FAMILY: family, wk.ARCH: "amd64", wk.OS: "linux"},
    )


TYPES = [itype("m5.large", "m5", 0.096), itype("c5.large", "c5", 0.085)]


def prices(types: list[InstanceType] | Any, name: str) -> dict[tuple[str, str], float]:
    found = next(t for t in types if t.name == name)
    return {(o.zone, o.capacity_type): o.price for o in found.offerings}


@pytest.mark.parametrize(("price", "change", "expected"), [
    (0.1, "", 0.1), (0.1, "5.00", 5.0), (0.1, "+0.05", 0.15), (0.1, "-0.05", 0.05), (0.1, "-10%", 0.09),
    (0.1, "+15%", 0.115), (0.1, "-100%", 0.0), (0.1, "-1.5", 0.0),
])
def test_adjusted_price(price: float, change: str, expected: float) -> None:
    assert adjusted_price(price, change) == pytest.approx(expected)


def test_a_percentage_overlay_on_a_family_and_capacity_type() -> None:
    savings = overlay("sp", [{"key": wk.INSTANCE_FAMILY, "operator": "In", "values": ["m5"]},
                             {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}], adjustment="-30%")
    book = evaluate([savings], {"default": pool()}, {"default": TYPES})
    applied = book.apply("default", TYPES)
    assert prices(applied, "m5.large") == {("z1", "on-demand"): pytest.approx(0.0672), ("z1", "spot"): 0.0384,
                                           ("z2", "on-demand"): pytest.approx(0.0672)}
    assert prices(applied, "c5.large") == prices(TYPES, "c5.large")
    m5 = next(t for t in applied if t.name == "m5.large")
    assert m5.price_overlaid and not m5.capacity_overlaid
    assert m5.offerings[0].price_source.startswith("NodeOverlay sp (priceAdjustment -30%)")
    assert book.condition(savings) == (
        True, "ValidationSucceeded", "applies to 1 instance type(s) across the NodePools")


def test_overlays_select_by_nodepool_and_its_labels() -> None:
    by_pool = overlay("team-a", [{"key": "team", "operator": "In", "values": ["a"]}], price="1.00")
    by_name = overlay("pool-b", [{"key": wk.NODEPOOL, "operator": "In", "values": ["b"]}], price="2.00")
    pools = {"a": pool("a", {"team": "a"}), "b": pool("b")}
    book = evaluate([by_pool, by_name], pools, {"a": TYPES, "b": TYPES})
    assert set(prices(book.apply("a", TYPES), "m5.large").values()) == {1.0}
    assert set(prices(book.apply("b", TYPES), "m5.large").values()) == {2.0}
    # A custom key the pool does not define selects nothing there (only negative operators pass).
    assert book.apply("b", TYPES) is not TYPES and prices(book.apply("b", TYPES), "c5.large")[("z1", "spot")] == 2.0


def test_capacity_adds_extended_resources_merged_by_weight() -> None:
    base = overlay("base", capacity={"smarter-devices/fuse": "1", "hugepages-2Mi": "100Mi"})
    heavy = overlay("heavy", [{"key": wk.INSTANCE_FAMILY, "operator": "In", "values": ["m5"]}], weight=5,
                    capacity={"hugepages-2Mi": "1Gi"})
    book = evaluate([base, heavy], {"default": pool()}, {"default": TYPES})
    applied = {t.name: t for t in book.apply("default", TYPES)}
    assert applied["m5.large"].capacity.amount("hugepages-2Mi") == 2**30 * 1000
    assert applied["m5.large"].capacity.amount("smarter-devices/fuse") == 1000
    assert applied["c5.large"].capacity.amount("hugepages-2Mi") == 100 * 2**20 * 1000
    assert applied["m5.large"].capacity.amount("cpu") == 2000 and applied["m5.large"].capacity_overlaid


def test_the_heavier_overlay_sets_the_price() -> None:
    light = overlay("light", adjustment="-10%", weight=1)
    heavy = overlay("heavy", [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]}], price="0.01",
                    weight=100)
    book = evaluate([light, heavy], {"default": pool()}, {"default": TYPES})
    applied = book.apply("default", TYPES)
    assert set(prices(applied, "m5.large").values()) == {0.01}
    assert prices(applied, "c5.large")[("z1", "on-demand")] == pytest.approx(0.0765)


def test_same_weight_overlapping_prices_conflict_and_the_later_name_wins() -> None:
    alpha = overlay("alpha", adjustment="-10%")
    beta = overlay("beta", [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}], adjustment="-50%")
    assert [o.name for o in by_weight([alpha, beta])] == ["beta", "alpha"]
    book = evaluate([alpha, beta], {"default": pool()}, {"default": TYPES})
    ok, reason, message = book.condition(alpha)
    assert (ok, reason) == (False, "Conflict") and "NodeOverlay beta" in message
    assert book.condition(beta)[0]
    applied = book.apply("default", TYPES)  # alpha is not applied at all, not even where beta is silent
    assert prices(applied, "m5.large")[("z1", "on-demand")] == 0.096
    assert prices(applied, "m5.large")[("z1", "spot")] == pytest.approx(0.0192)


def test_disjoint_same_weight_overlays_do_not_conflict() -> None:
    spot = overlay("spot", [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}], adjustment="-1%")
    od = overlay("od", [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}], adjustment="-2%")
    book = evaluate([spot, od], {"default": pool()}, {"default": TYPES})
    assert book.conflicts == {}


def test_an_invalid_overlay_is_refused_by_name() -> None:
    bad = overlay("bad", price="1", adjustment="-1%")
    restricted = overlay("cpu", capacity={"cpu": "1"})
    book = evaluate([bad, restricted], {"default": pool()}, {"default": TYPES})
    for item in (bad, restricted):
        ok, reason, message = book.condition(item)
        assert (ok, reason) == (False, "RuntimeValidation") and message
    assert "price" in book.condition(bad)[2] and "cpu" in book.condition(restricted)[2]
    assert book.apply("default", TYPES) is TYPES


def test_on_the_real_catalogue_a_savings_plan_reorders_the_cheapest_type() -> None:
    from reconciler.cloud.aws.preset import load_preset

    catalogue = [t for t in load_preset(region="us-east-1", zones=["us-east-1a"])
                 if t.name in ("m7i.xlarge", "c6a.xlarge", "m6a.xlarge")]

    def cheapest(types: Any) -> str:
        return min(types, key=lambda t: min(o.price for o in t.offerings if o.capacity_type == "on-demand")).name

    assert cheapest(catalogue) == "c6a.xlarge"
    savings = overlay("m7i-sp", [{"key": wk.INSTANCE_FAMILY, "operator": "In", "values": ["m7i"]}],
                      adjustment="-28%")
    book = evaluate([savings], {"default": pool()}, {"default": catalogue})
    assert cheapest(book.apply("default", catalogue)) == "m7i.xlarge"
