"""``status``: the eks-node-viewer-style terminal view, and the catalogue conversions behind ``--catalog``."""

from __future__ import annotations

import dataclasses
import io
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from insight_support import example_cluster, run_cli, write_snapshot

from reconciler.cloud.aws.preset import load_preset
from reconciler.insight.catalog import catalog_from_instance_types, preset_catalog
from reconciler.insight.errors import InsightError
from reconciler.insight.frames import Frame, NodeRow, node_mix
from reconciler.insight.status import NodeFilter, bar, render_status, use_color
from reconciler.sim.catalog import build_catalog

GIB_MILLI = 2**30 * 1000


def row(name: str, pool: str, capacity_type: str, price: float, cpu: tuple[int, int], pods: int) -> NodeRow:
    return NodeRow(name, pool, "m5.large", "us-east-1a", capacity_type, price, cpu[0], cpu[1],
                   2 * GIB_MILLI, 8 * GIB_MILLI, pods)  # fmt: skip


def test_bars_are_fixed_width_and_honest_about_slivers_and_overcommit() -> None:
    assert bar(0.0) == "░" * 20
    assert bar(0.001) == "█" + "░" * 19  # some use is never drawn as none
    assert bar(0.5) == "█" * 10 + "░" * 10
    assert bar(1.7) == "█" * 20


def test_render_status_summarises_cost_and_each_node() -> None:
    frame = Frame(
        "start",
        datetime(2026, 1, 5, 10, tzinfo=UTC),
        (row("b-node", "general", "spot", 0.04, (1500, 1930), 3), row("a-node", "", "", 0.0, (500, 1930), 1)),
        pending=2,
    )
    text = render_status(frame)
    lines = text.splitlines()
    assert (
        lines[0].startswith("2 nodes  cpu 2.00/3.86 ") and "51.8%" in lines[0] and "4.0Gi/16.0Gi" in lines[0]
    )
    assert lines[1] == "$0.0400/h ($29.20/month)  4 pods bound, 2 pending  @ 2026-01-05T10:00:00Z"
    assert lines[2] == "capacity: - 1 ($0.0000/h), Spot 1 ($0.0400/h)"
    # Managed nodes first, then unmanaged; memory on the line under each node.
    assert lines[4].startswith("b-node  cpu ████████████████░░░░  77.7%    3 pods  m5.large  Spot ")
    assert lines[4].endswith("$0.0400/h  gpu -  general      Ready")
    assert lines[5] == "        mem █████░░░░░░░░░░░░░░░  25.0%"
    assert lines[6].startswith("a-node  cpu ") and "(unmanaged)" in lines[6]
    assert "\x1b[" not in text  # plain unless asked


def test_status_sorts_filters_colours_and_shows_accelerators() -> None:
    gpu = dataclasses.replace(row("g-node", "gpu", "on-demand", 1.006, (1000, 3920), 2),
                              accelerator="nvidia.com/gpu", accelerators_requested=1, accelerators_allocatable=1)
    frame = Frame("start", datetime(2026, 1, 5, 10, tzinfo=UTC),
                  (row("b-node", "general", "spot", 0.04, (1500, 1930), 3), gpu,
                   row("a-node", "general", "on-demand", 0.096, (100, 1930), 1)), pending=0)  # fmt: skip
    names = [line.split()[0] for line in render_status(frame, sort="price").splitlines()[4::2]]
    assert names == ["g-node", "a-node", "b-node"]
    assert render_status(frame, sort="cpu").splitlines()[4].startswith("b-node")
    only_spot = render_status(frame, node_filter=NodeFilter(capacity_types=("spot",)))
    assert only_spot.startswith("1 of 3 nodes") and "g-node" not in only_spot
    assert "$0.0400/h ($29.20/month)" in only_spot
    assert "(no node matches the filter)" in render_status(frame, node_filter=NodeFilter(text="nothing-like-this"))
    assert "gpu 1/1 nvidia" in render_status(frame, node_filter=NodeFilter(nodepools=("gpu",)))
    coloured = render_status(frame, color=True)
    assert "\x1b[33m" + "█" * 16 + "░" * 4 in coloured  # b-node's CPU 78% full: yellow (red from 80%)
    assert "\x1b[32m█" + "░" * 19 in coloured  # a-node's 5%: green
    assert "\x1b[32mSpot" in coloured and coloured.count("\x1b[0m") >= 10
    assert _plain(coloured) == render_status(frame)  # the same view, only coloured


def _plain(text: str) -> str:
    import re

    return re.sub("\x1b\\[[0-9;]*m", "", text)

def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch: Any) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_color(Terminal()) and not use_color(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color(Terminal())
    assert use_color(Terminal(), "always") and not use_color(Terminal(), "never")


def test_status_of_a_snapshot_matches_the_simulated_prices(capsys: Any, tmp_path: Path) -> None:
    snapshot = write_snapshot(tmp_path, example_cluster())
    code, out, _ = run_cli(capsys, "status", "--snapshot", str(snapshot))
    assert code == 0
    code, simulated, _ = run_cli(capsys, "simulate", str(snapshot), "--json")
    final = json.loads(simulated)["final"]
    assert f"${final['costPerHour']:.4f}/h (${final['costPerHour'] * 730:,.2f}/month)" in out
    for node in final["nodes"]:
        assert node["name"] in out and f"${node['price']:.4f}/h" in out
    code, gpu_only, _ = run_cli(capsys, "status", "--snapshot", str(snapshot), "--nodepool", "gpu", "--json")
    nodes = json.loads(gpu_only)["nodes"]
    assert nodes and {n["nodepool"] for n in nodes} == {"gpu"}
    assert {(n["accelerator"], n["acceleratorsAllocatable"]) for n in nodes} == {("nvidia.com/gpu", 1)}


def test_managed_node_group_nodes_take_their_capacity_type_and_price(capsys: Any, tmp_path: Path) -> None:
    """EKS managed node groups label eks.amazonaws.com/capacityType (ON_DEMAND / SPOT), not Karpenter's key."""
    document = example_cluster()
    labels = {"node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": "us-east-1a",
              "kubernetes.io/arch": "amd64", "eks.amazonaws.com/nodegroup": "system"}
    for name, capacity in (("mng-spot", "SPOT"), ("mng-od", "ON_DEMAND")):
        document["objects"].append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {**labels, "eks.amazonaws.com/capacityType": capacity}},
            "spec": {"providerID": f"aws:///us-east-1a/i-{name}"},
            "status": {"capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                       "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"}},
        })  # fmt: skip
    snapshot = write_snapshot(tmp_path, document)
    code, out, err = run_cli(capsys, "status", "--snapshot", str(snapshot), "--json")
    assert code == 0, err
    nodes = {n["name"]: n for n in json.loads(out)["nodes"]}
    catalog = {t.name: t for t in build_catalog(yaml.safe_load(snapshot.read_text())["catalog"])}
    prices = {o.capacity_type: o.price for o in catalog["m5.large"].offerings if o.zone == "us-east-1a"}
    assert (nodes["mng-spot"]["capacityType"], nodes["mng-spot"]["price"]) == ("spot", prices["spot"])
    assert (nodes["mng-od"]["capacityType"], nodes["mng-od"]["price"]) == ("on-demand", prices["on-demand"])
    assert prices["spot"] > 0 and prices["on-demand"] > prices["spot"]


def test_node_mix_groups_by_pool_type_and_capacity() -> None:
    rows = [row("a", "general", "spot", 0.04, (1, 2), 1), row("b", "general", "spot", 0.04, (1, 2), 1),
            row("c", "general", "on-demand", 0.096, (1, 2), 1)]  # fmt: skip
    assert node_mix(rows) == [
        {"nodepool": "general", "instanceType": "m5.large", "capacityType": "on-demand", "count": 1,
         "costPerHour": 0.096},
        {"nodepool": "general", "instanceType": "m5.large", "capacityType": "spot", "count": 2,
         "costPerHour": 0.08},
    ]  # fmt: skip


def test_live_catalog_section_rebuilds_the_same_instance_types() -> None:
    types = [t for t in load_preset(zones=["us-east-1a", "us-east-1b"]) if t.name.startswith(("m5.", "g5."))]
    section = catalog_from_instance_types(types, "us-east-1")
    rebuilt = {t.name: t for t in build_catalog(section)}
    assert set(rebuilt) == {t.name for t in types}
    for original in types:
        copy = rebuilt[original.name]
        assert copy.capacity == original.capacity and copy.overhead == original.overhead
        assert dict(copy.labels) == dict(original.labels)
        assert sorted(copy.offerings, key=str) == sorted(original.offerings, key=str)


def test_preset_catalog_is_the_nodes_region_and_keeps_only_its_zones() -> None:
    assert preset_catalog(["us-east-1a", "us-east-1-bos-1a"], "us-east-1") == {
        "preset": "aws-us-east-1",
        "zones": ["us-east-1a"],
    }
    assert preset_catalog(["eu-west-1b", "eu-west-1c"]) == {
        "preset": "aws-eu-west-1", "zones": ["eu-west-1b", "eu-west-1c"]
    }
    assert preset_catalog([]) == {"preset": "aws-us-east-1"}  # no nodes: nothing says otherwise
    with pytest.raises(InsightError, match="several regions"):
        preset_catalog(["us-east-1a", "eu-west-1a"])
    with pytest.raises(InsightError, match="mars-north-1, which has no bundled catalogue"):
        preset_catalog(["mars-north-1a"], "mars-north-1")
