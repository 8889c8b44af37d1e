"""``python -m reconciler plan`` with a Savings-Plan NodeOverlay and with a capacity reservation in the
snapshot: costs are the overlaid prices (and say so), consolidation follows them, reserved nodes are priced
as prepaid and kept (real us-east-1 catalogue)."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from insight_support import run_cli

from reconciler.insight.snapshot import simulated_snapshot
from reconciler.sim.scenario import parse_scenario

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
OVERLAY = yaml.safe_load((EXAMPLES / "savings-plan-overlay.yaml").read_text())["objects"][0]
M7I, C6A = 0.2016, 0.153  # bundled on-demand list prices, us-east-1


def _cluster(tmp_path: Path, *, overlay: bool) -> Path:
    """A cluster that provisioned before the Savings Plan existed (c6a lists cheapest), snapshotted; with
    ``overlay`` the Savings-Plan NodeOverlay and the gate are in it now."""
    document = yaml.safe_load((EXAMPLES / "savings-plan-overlay.yaml").read_text())
    document["objects"] = document["objects"][1:]
    document["settings"].pop("featureGates")
    snapshot = asyncio.run(simulated_snapshot(parse_scenario(document)))
    if overlay:
        snapshot["settings"]["featureGates"] = {"NodeOverlay": True}
        snapshot["objects"].insert(0, copy.deepcopy(OVERLAY))
    path = tmp_path / ("with-overlay.yaml" if overlay else "without.yaml")
    path.write_text(yaml.safe_dump(snapshot, sort_keys=False))
    return path


def _proposal(tmp_path: Path) -> Path:
    document = yaml.safe_load((EXAMPLES / "savings-plan-overlay.yaml").read_text())
    pool = document["objects"][1]
    pool["spec"]["template"].setdefault("metadata", {})["labels"] = {"team": "api"}
    path = tmp_path / "pool.yaml"
    path.write_text(yaml.safe_dump(pool))
    return path


def _plan(capsys: Any, snapshot: Path, proposal: Path) -> dict[str, Any]:
    code, out, err = run_cli(capsys, "plan", "--snapshot", str(snapshot), "--nodepools", str(proposal), "--json")
    assert code == 0, err
    return dict(json.loads(out))


def test_a_savings_plan_overlay_shows_in_the_plans_costs(capsys: Any, tmp_path: Path) -> None:
    plan = _plan(capsys, _cluster(tmp_path, overlay=True), _proposal(tmp_path))
    assert [m["instanceType"] for m in plan["current"]["nodeMix"]] == ["c6a.xlarge"]
    assert plan["current"]["costPerHour"] == pytest.approx(C6A)  # the overlay does not cover c6a
    # The relabel drifts the node; its replacement is the type the Savings Plan makes cheapest, at its price.
    assert [m["instanceType"] for m in plan["proposed"]["nodeMix"]] == ["m7i.xlarge"]
    assert plan["proposed"]["costPerHour"] == pytest.approx(M7I * 0.72)
    assert any(s.startswith("NodeOverlay m7i-savings-plan (priceAdjustment -28%)") for s in plan["priceSources"])


def test_without_the_overlay_the_plan_uses_list_prices(capsys: Any, tmp_path: Path) -> None:
    plan = _plan(capsys, _cluster(tmp_path, overlay=False), _proposal(tmp_path))
    assert [m["instanceType"] for m in plan["proposed"]["nodeMix"]] == ["c6a.xlarge"]
    assert plan["proposed"]["costPerHour"] == pytest.approx(C6A)
    assert not any("NodeOverlay" in s for s in plan["priceSources"])


def test_the_markdown_preview_names_the_overlay(capsys: Any, tmp_path: Path) -> None:
    code, out, err = run_cli(capsys, "plan", "--snapshot", str(_cluster(tmp_path, overlay=True)),
                             "--nodepools", str(_proposal(tmp_path)), "--markdown")
    assert code == 0, err
    assert "$0.1452/h" in out and "NodeOverlay m7i-savings-plan" in out


def test_a_reservation_in_the_snapshot_is_priced_as_prepaid_and_kept(capsys: Any, tmp_path: Path) -> None:
    document = yaml.safe_load((EXAMPLES / "capacity-reservation.yaml").read_text())
    document["steps"] = [{"provision": {}}]
    snapshot = asyncio.run(simulated_snapshot(parse_scenario(document)))
    [entry] = snapshot["catalog"]["capacityReservations"]
    assert (entry["id"], entry["availableInstanceCount"]) == ("cr-0a1b2c3d4e5f60718", 0)  # both in use
    path = tmp_path / "reserved.yaml"
    path.write_text(yaml.safe_dump(snapshot, sort_keys=False))
    pool = document["objects"][1]
    pool["spec"]["template"]["metadata"] = {"labels": {"team": "checkout"}}  # drifts both reserved nodes
    proposal = tmp_path / "pool.yaml"
    proposal.write_text(yaml.safe_dump(pool))
    plan = _plan(capsys, path, proposal)
    assert {m["capacityType"] for m in plan["current"]["nodeMix"]} == {"reserved"}
    assert plan["current"]["costPerHour"] < 0.001
    # Replaced one at a time, each replacement goes back into the reservation the drained node frees.
    assert {m["capacityType"] for m in plan["proposed"]["nodeMix"]} == {"reserved"}
    assert any(s.startswith("capacity reservation: prepaid") for s in plan["priceSources"])
