"""``status``: the eks-node-viewer-style terminal view, and the catalogue conversions behind ``--catalog``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from insight_support import example_cluster, run_cli, write_snapshot

from reconciler.cloud.aws.preset import load_preset
from reconciler.insight.catalog import catalog_from_instance_types, preset_catalog
from reconciler.insight.errors import InsightError
from reconciler.insight.frames import Frame, NodeRow, node_mix
from reconciler.insight.status import bar, render_status
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
    assert lines[1] == "$0.0400/hour  $29.20/month  4 pods bound, 2 pending  @ 2026-01-05T10:00:00Z"
    assert lines[2] == "capacity: - 1 ($0.0000/h), Spot 1 ($0.0400/h)"
    # Managed nodes first, then unmanaged; memory on the line under each node.
    assert lines[4].startswith("b-node  cpu ████████████████░░░░  77.7%    3 pods  m5.large  Spot ")
    assert lines[4].endswith("$0.0400/h  general      Ready")
    assert lines[5] == "        mem █████░░░░░░░░░░░░░░░  25.0%"
    assert lines[6].startswith("a-node  cpu ") and "(unmanaged)" in lines[6]


def test_status_of_a_snapshot_matches_the_simulated_prices(capsys: Any, tmp_path: Path) -> None:
    snapshot = write_snapshot(tmp_path, example_cluster())
    code, out, _ = run_cli(capsys, "status", "--snapshot", str(snapshot))
    assert code == 0
    code, simulated, _ = run_cli(capsys, "simulate", str(snapshot), "--json")
    final = json.loads(simulated)["final"]
    assert f"${final['costPerHour']:.4f}/hour" in out
    for node in final["nodes"]:
        assert node["name"] in out and f"${node['price']:.4f}/h" in out


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
