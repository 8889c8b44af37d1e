"""Every risk named (issue 25, items 3 and 4): shifts per pool and for the cluster with pools added, removed and
emptied; what removing a pool does to its pods; budgets counted in nodes; the verdict counting every node
replaced, removed and added; the headline's Δ with its sign; ``--baseline`` telling the change from what the
current NodePools do anyway."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from insight_support import EXAMPLES, REPO, example_cluster, example_pools, run_cli, write_snapshot, write_yaml

from reconciler.disruption.budgets import InFlight, earliest_room, parse_budgets
from reconciler.insight.plan.risks import headline, share_lines

IDENTITY = REPO / "tests" / "identity" / "inputs"


def shares(nodes: int, *, spot: int = 0, zones: dict[str, int] | None = None, arch: dict[str, int] | None = None,
           family: dict[str, int] | None = None) -> dict[str, Any]:
    return {"nodes": nodes, "spot": spot, "zones": zones or {"us-east-1a": nodes}, "arch": arch or {"amd64": nodes},
            "family": family or {"m5": nodes}}


# -- shifts per pool and for the cluster -------------------------------------------------------------------


def test_a_graviton_change_moving_12_of_13_nodes_to_a_new_pool_names_the_architecture_shift() -> None:
    before = {"general": shares(13, zones={"us-east-1a": 7, "us-east-1b": 6})}
    after = {"general": shares(1), "graviton": shares(12, zones={"us-east-1a": 6, "us-east-1b": 6},
                                                      arch={"arm64": 12}, family={"c7g": 12})}
    assert share_lines(before, after) == [
        "NodePool general: zones us-east-1a 54% (7), us-east-1b 46% (6) → us-east-1a 100% (1)",
        "NodePool graviton is new: 12 node(s), spot 0% (0/12); arm64 100% (12); zones us-east-1a 50% (6), "
        "us-east-1b 50% (6); families c7g 100% (12)",
        "the cluster's managed nodes: architectures amd64 100% (13) → amd64 8% (1), arm64 92% (12)",
        "the cluster's managed nodes: instance families m5 100% (13) → c7g 92% (12), m5 8% (1)",
    ]  # the cluster's zones keep their shares (7 and 6): no zone line for it


def test_a_new_spot_only_pool_taking_the_workload_and_an_emptied_pool_are_named() -> None:
    before = {"general": shares(3)}
    after = {"spot": shares(3, spot=3)}
    assert share_lines(before, after) == [
        "NodePool general emptied (its pods move to other pools): its 3 node(s) go (spot 0% (0/3); amd64 100% (3); "
        "zones us-east-1a 100% (3); families m5 100% (3))",
        "NodePool spot is new: 3 node(s), spot 100% (3/3); amd64 100% (3); zones us-east-1a 100% (3); families m5 "
        "100% (3): 100% spot, a spot interruption can take any of them",
        "the cluster's managed nodes moves 100% to spot (0/3 → 3/3 nodes): a spot interruption can take any of "
        "them, and a price spike all at once",
    ]
    assert share_lines(before, after, removed={"general"})[0].startswith("NodePool general removed: its 3 node(s)")


def test_a_pool_moving_all_its_nodes_to_spot_says_so() -> None:
    lines = share_lines({"web": shares(3, spot=1)}, {"web": shares(3, spot=3)})
    assert lines == ["NodePool web moves 100% to spot (1/3 → 3/3 nodes): a spot interruption can take any of them, "
                     "and a price spike all at once"]
    assert share_lines({"web": shares(3, spot=1)}, {"web": shares(3, spot=2)}) == [
        "NodePool web: spot 33% → 67% of its nodes (1/3 → 2/3)"]


@pytest.mark.parametrize(("nodes", "flagged"), [(1, False), (2, True), (3, True)])
def test_ending_in_one_zone_is_a_risk_from_two_nodes_on(nodes: int, flagged: bool) -> None:
    """One node is always in one zone; two or more that end in one zone (from several) are a new risk."""
    before = {"web": shares(4, zones={"us-east-1a": 2, "us-east-1b": 2})}
    lines = share_lines(before, {"web": shares(nodes, zones={"us-east-1b": nodes})})
    one_zone = f"NodePool web: all {nodes} nodes end in one zone (us-east-1b); before: us-east-1a 50% (2), " \
               "us-east-1b 50% (2)"
    assert (one_zone in lines) is flagged
    if not flagged:
        assert lines == ["NodePool web: zones us-east-1a 50% (2), us-east-1b 50% (2) → us-east-1b 100% (1)"]
    # Already in one zone before: nothing new to say.
    assert share_lines({"web": shares(3)}, {"web": shares(nodes)}) == []


# -- the headline ------------------------------------------------------------------------------------------


def plan_costs(now: float, settled: float, *, baseline: float | None = None, horizon: bool = False) -> Any:
    return SimpleNamespace(current=SimpleNamespace(cost_per_hour=now), proposed=SimpleNamespace(cost_per_hour=settled),
                           horizon_reached=horizon,
                           baseline=None if baseline is None else (SimpleNamespace(cost_per_hour=baseline), {}))


def test_the_headline_of_a_saving_has_a_negative_delta() -> None:
    assert headline(plan_costs(1.0, 0.75)) == (
        "now $1.0000/h ($730.00/month) → settled $0.7500/h ($547.50/month); Δ -$0.2500/h (-$182.50/month)")
    assert headline(plan_costs(0.75, 1.0, horizon=True)) == (
        "now $0.7500/h ($547.50/month) → at the horizon, still changing $1.0000/h ($730.00/month); "
        "Δ +$0.2500/h (+$182.50/month)")


def test_with_a_baseline_the_headline_separates_the_changes_own_delta() -> None:
    """Now $1.00; the current NodePools alone consolidate to $0.80; the change settles at $0.70: the change saves
    $0.10, not the $0.30 against now."""
    assert headline(plan_costs(1.0, 0.7, baseline=0.8)) == (
        "now $1.0000/h ($730.00/month) → settled $0.7000/h ($511.00/month) with the change, $0.8000/h "
        "($584.00/month) without it; the change's own Δ -$0.1000/h (-$73.00/month) (Δ vs now -$0.3000/h "
        "(-$219.00/month), of which -$0.2000/h (-$146.00/month) the current NodePools do anyway)")


# -- removing a pool, budgets in nodes, the verdict's counts -----------------------------------------------


@pytest.fixture(scope="module")
def example_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_snapshot(tmp_path_factory.mktemp("example"), example_cluster())


def test_removing_a_pool_says_its_nodes_go_at_once_and_its_pods_wait_for_new_ones(
    example_snapshot: Path, tmp_path: Path, capsys: Any
) -> None:
    """``general`` removed and ``general2`` (the same pool under another name) added: the nodes are deleted
    before any replacement exists, so web and api wait for new nodes; the verdict counts the removed nodes."""
    [general] = [p for p in example_pools() if p["metadata"]["name"] == "general"]
    renamed = copy.deepcopy(general)
    renamed["metadata"]["name"] = "general2"
    proposal = write_yaml(tmp_path, "renamed.yaml", [renamed])
    code, out, err = run_cli(capsys, "plan", "--snapshot", str(example_snapshot), "--nodepools", str(proposal),
                             "--remove", "general")
    assert code == 0, err
    verdict, risks = out.splitlines()[0], [line for line in out.splitlines() if line.startswith("risk: ")]
    assert verdict.startswith("REVIEW: 0 node(s) replaced, 2 removed, ")
    [removal] = [line for line in risks if "removed: their" in line]
    assert removal.startswith("risk: NodePool(s) general removed: their 2 node(s) are deleted at once, without "
                              "replacements first (drift replaces before draining; removal does not); ")
    assert "pod(s) wait about 90 s for new nodes (default/Deployment/api x4, default/Deployment/web x6)" in removal
    assert "risk: NodePool general removed: its 2 node(s) go" in out
    assert "risk: NodePool general2 is new: " in out
    _, document, _ = run_cli(capsys, "plan", "--snapshot", str(example_snapshot), "--nodepools", str(proposal),
                             "--remove", "general", "--json")
    removal_json = json.loads(document)["removal"]
    assert removal_json["stranded"] == [] and len(removal_json["waited"]) == 10


def test_removing_the_gpu_pool_says_its_pods_find_no_node(example_snapshot: Path, capsys: Any) -> None:
    _, out, _ = run_cli(capsys, "plan", "--snapshot", str(example_snapshot), "--nodepools",
                        str(EXAMPLES / "drop-gpu.yaml"), "--remove", "gpu")
    assert "risk: NodePool(s) gpu removed: their 2 node(s) are deleted at once" in out
    assert "; 2 pod(s) find no node at all" in out


def test_each_pool_says_how_many_nodes_its_budget_lets_go_at_once(example_snapshot: Path, capsys: Any) -> None:
    _, out, _ = run_cli(capsys, "plan", "--snapshot", str(example_snapshot), "--nodepools",
                        str(EXAMPLES / "relabel-general.yaml"))
    assert ("risk: NodePool general: 2 node(s) disrupted, at most 1 at a time (its budget nodes=10% -> 1 of 2 "
            "node(s))") in out


def test_two_node_merges_under_a_half_budget_of_four_nodes_go_one_after_the_other() -> None:
    """Four nodes, ``nodes: 50%``: two 2-node consolidations, each replaced by one node. The simulator carries the
    first out at once; the second may start only when the first is done (2 of 4 disrupting), not 15 s later."""
    start = datetime(2026, 1, 5, 10, tzinfo=UTC)
    budgets = parse_budgets([{"nodes": "50%"}])
    first = earliest_room("p", budgets, "Underutilized", nodes=2, replacements=1, pool_nodes=3, in_flight=[],
                          now=start, until=start + timedelta(days=1))
    assert first == start
    in_flight = [InFlight(start, start + timedelta(seconds=90), start + timedelta(seconds=120), 2, 1)]
    later = start + timedelta(seconds=15)
    second = earliest_room("p", budgets, "Underutilized", nodes=2, replacements=1, pool_nodes=2, in_flight=in_flight,
                           now=later, until=start + timedelta(days=1))
    assert second == start + timedelta(seconds=120)


def test_a_no_op_change_with_a_baseline_is_safe_and_credits_no_saving(capsys: Any) -> None:
    """The 40-node bench cluster consolidates under its current NodePools anyway: a change that does nothing must
    not be REVIEWed for that, nor credited with the saving."""
    snapshot = IDENTITY / "bench-cluster-40.snapshot.json"
    code, out, err = run_cli(capsys, "plan", "--snapshot", str(snapshot), "--nodepools",
                             str(IDENTITY / "change-no-op.yaml"), "--baseline")
    assert code == 0, err
    first, cost = out.splitlines()[0], next(line for line in out.splitlines() if line.startswith("cost: "))
    assert first.startswith("SAFE: the change itself disrupts no node, evicts no pod and leaves none unschedulable; "
                            "the current NodePools alone disrupt ")
    assert "the change's own Δ $0.0000/h ($0.00/month)" in cost
    _, without, _ = run_cli(capsys, "plan", "--snapshot", str(snapshot), "--nodepools",
                            str(IDENTITY / "change-no-op.yaml"))
    assert without.startswith("REVIEW: ")  # without a baseline the consolidation is the plan's own
