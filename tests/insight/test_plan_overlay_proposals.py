"""``plan --nodepools`` with NodeOverlay documents: added and changed overlays apply to the "after" run, the
snapshot's own to the "before" run, ``--remove [nodeoverlay/]NAME`` drops one; invalid overlays are refused
naming the object and field; a snapshot's overlays are used by ``plan`` and ``status`` (real us-east-1
catalogue, the repository's examples and aws-samples/karpenter-blueprints' node-overlay blueprint)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from insight_support import EXAMPLES as PLAN_EXAMPLES
from insight_support import REPO, run_cli, write_snapshot, write_yaml

EXAMPLES = REPO / "examples"
BLUEPRINT = REPO / "tests" / "data" / "real" / "karpenter-blueprints"
M7I_XLARGE, M7I_LARGE, C6A_XLARGE = 0.2016, 0.1008, 0.153  # bundled on-demand list prices, us-east-1
SAVINGS = 0.72  # the example overlay's priceAdjustment -28%


def _savings_example() -> dict[str, Any]:
    return dict(yaml.safe_load((EXAMPLES / "savings-plan-overlay.yaml").read_text()))


def _overlay() -> dict[str, Any]:
    return copy.deepcopy(_savings_example()["objects"][0])


@pytest.fixture(scope="module")
def list_priced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Savings-Plan example's cluster provisioned before the overlay existed (c6a lists cheapest), plus a
    Deployment asking for an extended resource no instance type advertises (2 pods pending)."""
    document = _savings_example()
    document["objects"] = document["objects"][1:]
    document["settings"].pop("featureGates")
    encoder = copy.deepcopy(document["objects"][1])
    encoder["metadata"]["name"] = "encoder"
    encoder["spec"].update(replicas=2, selector={"matchLabels": {"app": "encoder"}})
    encoder["spec"]["template"]["metadata"]["labels"] = {"app": "encoder"}
    encoder["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "500m", "memory": "1Gi", "example.com/fpga": "1"}, "limits": {"example.com/fpga": "1"}}
    document["objects"].append(encoder)
    return write_snapshot(tmp_path_factory.mktemp("list-priced"), document)


@pytest.fixture(scope="module")
def overlaid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Savings-Plan example as it runs: gate on, the overlay in the cluster, m7i nodes at 72 %."""
    return write_snapshot(tmp_path_factory.mktemp("overlaid"), _savings_example())


def _plan(capsys: Any, snapshot: Path, *args: str) -> dict[str, Any]:
    code, out, err = run_cli(capsys, "plan", "--snapshot", str(snapshot), *args, "--json")
    assert code == 0, err
    return dict(json.loads(out))


def _types(summary: dict[str, Any]) -> dict[str, int]:
    return {m["instanceType"]: m["count"] for m in summary["nodeMix"]}


def test_an_added_price_overlay_moves_the_node_and_lowers_the_headline(
    capsys: Any, tmp_path: Path, list_priced: Path
) -> None:
    proposal = write_yaml(tmp_path, "overlay.yaml", [_overlay()])
    plan = _plan(capsys, list_priced, "--nodepools", str(proposal))
    assert plan["nodeoverlays"] == [{"name": "m7i-savings-plan", "change": "added", "fields": []}]
    assert plan["nodeOverlayGate"].startswith("on, assumed")
    # Before: the snapshot has no overlay, the node is the type that lists cheapest, at list price.
    assert _types(plan["current"]) == {"c6a.xlarge": 1}
    assert plan["current"]["costPerHour"] == pytest.approx(C6A_XLARGE)
    # After: consolidation replaces it with the type the Savings Plan makes cheapest, at the discounted price.
    assert _types(plan["proposed"]) == {"m7i.xlarge": 1}
    assert plan["proposed"]["costPerHour"] == pytest.approx(M7I_XLARGE * SAVINGS)
    assert plan["proposed"]["deltaPerHour"] == pytest.approx(M7I_XLARGE * SAVINGS - C6A_XLARGE)
    assert [move["action"] for move in plan["consolidation"]] == ["replace"]
    code, out, err = run_cli(capsys, "plan", "--snapshot", str(list_priced), "--nodepools", str(proposal),
                             "--markdown")
    assert code == 0, err
    assert "NodeOverlays: m7i-savings-plan: added" in out and "Δ -$0.0078/h" in out


def test_a_capacity_overlay_makes_pending_pods_schedulable(capsys: Any, tmp_path: Path, list_priced: Path) -> None:
    overlay = {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "fpga"},
               "spec": {"requirements": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In",
                                          "values": ["m7i"]}],
                        "capacity": {"example.com/fpga": "1"}}}
    plan = _plan(capsys, list_priced, "--nodepools", str(write_yaml(tmp_path, "fpga.yaml", [overlay])))
    assert plan["nodeoverlays"] == [{"name": "fpga", "change": "added", "fields": []}]
    assert plan["current"]["pendingPods"] == 2  # nothing advertises example.com/fpga without the overlay
    assert plan["proposed"]["pendingPods"] == 0
    assert plan["unschedulable"] == {"new": {}, "stillPending": {}}
    # One fpga per m7i node: two m7i nodes launched for the two encoder pods, beside the existing c6a.
    assert _types(plan["proposed"]) == {"c6a.xlarge": 1, "m7i.large": 2}
    assert plan["proposed"]["costPerHour"] == pytest.approx(C6A_XLARGE + 2 * M7I_LARGE)


def test_a_changed_overlay_applies_to_the_after_run_only(capsys: Any, tmp_path: Path, overlaid: Path) -> None:
    cheaper = _overlay()
    cheaper["spec"]["priceAdjustment"] = "-50%"
    plan = _plan(capsys, overlaid, "--nodepools", str(write_yaml(tmp_path, "overlay.yaml", [cheaper])))
    assert plan["nodeoverlays"] == [{"name": "m7i-savings-plan", "change": "changed", "fields": ["priceAdjustment"]}]
    assert plan["nodeOverlayGate"] == "on, from the snapshot's settings.featureGates"
    assert _types(plan["current"]) == {"m7i.xlarge": 1}
    assert plan["current"]["costPerHour"] == pytest.approx(M7I_XLARGE * SAVINGS)  # the snapshot's own overlay
    assert plan["proposed"]["costPerHour"] == pytest.approx(M7I_XLARGE * 0.5)
    same = _plan(capsys, overlaid, "--nodepools", str(write_yaml(tmp_path, "same.yaml", [_overlay()])))
    assert same["nodeoverlays"] == [{"name": "m7i-savings-plan", "change": "unchanged", "fields": []}]
    assert same["proposed"]["deltaPerHour"] == 0


@pytest.mark.parametrize("name", ["m7i-savings-plan", "nodeoverlay/m7i-savings-plan", "NodeOverlay/m7i-savings-plan"])
def test_removing_an_overlay_by_name(capsys: Any, overlaid: Path, name: str) -> None:
    plan = _plan(capsys, overlaid, "--remove", name)
    assert plan["nodeoverlays"] == [{"name": "m7i-savings-plan", "change": "removed", "fields": []}]
    assert {c["name"]: c["change"] for c in plan["nodepools"]} == {"on-demand": "unchanged"}
    assert plan["current"]["costPerHour"] == pytest.approx(M7I_XLARGE * SAVINGS)
    # Without the discount m7i is priced at list, and consolidation moves the node back to what lists cheapest.
    assert _types(plan["proposed"]) == {"c6a.xlarge": 1}
    assert plan["proposed"]["costPerHour"] == pytest.approx(C6A_XLARGE)


@pytest.mark.parametrize(("argv", "message"), [
    (["--remove", "on-demand"], "--remove on-demand: the cluster has both a NodePool and a NodeOverlay of that "
                                "name; say which: --remove nodepool/on-demand or --remove nodeoverlay/on-demand"),
    (["--remove", "nodeoverlay/spot"], "--remove nodeoverlay/spot: the cluster has no NodeOverlay of that name "
                                       "(NodeOverlays: on-demand)"),
    (["--remove", "nodepool/m7i"], "--remove nodepool/m7i: the cluster has no NodePool of that name "
                                   "(NodePools: on-demand)"),
    (["--remove", "ec2nodeclass/default"], "--remove ec2nodeclass/default: expected NAME, nodepool/NAME or "
                                           "nodeoverlay/NAME"),
])
def test_remove_refuses_ambiguous_and_unknown_names(
    capsys: Any, tmp_path: Path, overlaid: Path, argv: list[str], message: str
) -> None:
    document = yaml.safe_load(overlaid.read_text())
    overlay = next(o for o in document["objects"] if o["kind"] == "NodeOverlay")
    overlay["metadata"]["name"] = "on-demand"  # the NodePool's name too
    snapshot = tmp_path / "same-names.yaml"
    snapshot.write_text(yaml.safe_dump(document, sort_keys=False))
    code, _, err = run_cli(capsys, "plan", "--snapshot", str(snapshot), *argv)
    assert code == 2 and err.strip() == f"error: {message}"
    plan = _plan(capsys, snapshot, "--remove", "nodeoverlay/on-demand")
    assert plan["nodeoverlays"] == [{"name": "on-demand", "change": "removed", "fields": []}]
    assert {c["name"]: c["change"] for c in plan["nodepools"]} == {"on-demand": "unchanged"}


def test_an_overlay_both_given_and_removed_is_refused(capsys: Any, tmp_path: Path, overlaid: Path) -> None:
    proposal = write_yaml(tmp_path, "overlay.yaml", [_overlay()])
    code, _, err = run_cli(capsys, "plan", "--snapshot", str(overlaid), "--nodepools", str(proposal),
                           "--remove", "nodeoverlay/m7i-savings-plan")
    assert code == 2 and f"--remove nodeoverlay/m7i-savings-plan: the NodeOverlay is also given in {proposal}" in err


@pytest.mark.parametrize(("spec", "expected"), [
    ({"capacity": {"cpu": "4"}}, "NodeOverlay bad: spec.capacity: invalid capacity 'cpu'"),
    ({"price": "0.1", "priceAdjustment": "-10%"}, "NodeOverlay bad: spec.price: cannot set both 'price' and "
                                                  "'priceAdjustment'"),
    ({"priceAdjustment": "cheaper"}, "NodeOverlay bad: spec.priceAdjustment: string should match pattern"),
    ({"weight": 0, "price": "0.1"}, "NodeOverlay bad: spec.weight:"),
])
def test_an_invalid_overlay_exits_2_naming_the_object_and_field(
    capsys: Any, tmp_path: Path, list_priced: Path, spec: dict[str, Any], expected: str
) -> None:
    overlay = {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "bad"},
               "spec": {"requirements": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In",
                                          "values": ["m7i"]}], **spec}}
    proposal = write_yaml(tmp_path, "bad.yaml", [overlay])
    code, out, err = run_cli(capsys, "plan", "--snapshot", str(list_priced), "--nodepools", str(proposal))
    assert code == 2 and out == ""
    assert err.startswith(f"error: {proposal}: {expected}"), err


def test_with_the_gate_off_in_the_snapshot_an_added_overlay_is_named_and_changes_nothing(
    capsys: Any, tmp_path: Path, list_priced: Path
) -> None:
    document = yaml.safe_load(list_priced.read_text())
    document["settings"]["featureGates"] = {"NodeOverlay": False}
    snapshot = tmp_path / "gate-off.yaml"
    snapshot.write_text(yaml.safe_dump(document, sort_keys=False))
    proposal = write_yaml(tmp_path, "overlay.yaml", [_overlay()])
    plan = _plan(capsys, snapshot, "--nodepools", str(proposal))
    assert plan["nodeOverlayGate"] == "off, from the snapshot's settings.featureGates"
    assert _types(plan["proposed"]) == {"c6a.xlarge": 1} and plan["proposed"]["deltaPerHour"] == 0
    assert {(f["kind"], f["path"]) for f in plan["unsupportedFields"]} >= {("NodeOverlay", "spec.priceAdjustment")}
    code, out, _ = run_cli(capsys, "plan", "--snapshot", str(snapshot), "--nodepools", str(proposal))
    assert code == 0 and out.startswith("REVIEW: NodeOverlay m7i-savings-plan sets spec.")


def test_a_kubectl_dump_with_overlays_keeps_them_and_status_prices_with_them(
    capsys: Any, tmp_path: Path, overlaid: Path
) -> None:
    objects = yaml.safe_load(overlaid.read_text())["objects"]
    dump = tmp_path / "dump.yaml"  # what `kubectl get nodeoverlays,nodepools,nodes,pods,... -A -o yaml` prints
    dump.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects}, sort_keys=False))
    code, out, err = run_cli(capsys, "snapshot", "--from", str(dump))
    assert code == 0, err
    kept = [o for o in yaml.safe_load(out)["objects"] if o["kind"] == "NodeOverlay"]
    assert [o["metadata"]["name"] for o in kept] == ["m7i-savings-plan"]
    # The dump says nothing of feature gates: its overlays are taken as in use, so nodes are priced with them.
    code, out, err = run_cli(capsys, "status", "--snapshot", str(dump), "--json")
    assert code == 0, err
    assert json.loads(out)["costPerHour"] == pytest.approx(M7I_XLARGE * SAVINGS)
    plan = _plan(capsys, dump, "--remove", "m7i-savings-plan")
    assert plan["current"]["costPerHour"] == pytest.approx(M7I_XLARGE * SAVINGS)
    assert plan["proposed"]["costPerHour"] == pytest.approx(C6A_XLARGE)


def test_a_savings_plan_overlay_on_the_example_cluster_lowers_the_cost_of_its_nodes(
    capsys: Any, tmp_path: Path
) -> None:
    snapshot = write_snapshot(tmp_path, yaml.safe_load((PLAN_EXAMPLES / "cluster.yaml").read_text()))
    overlay = {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "c5-savings"},
               "spec": {"requirements": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In",
                                          "values": ["c5"]}],
                        "priceAdjustment": "-30%"}}
    plan = _plan(capsys, snapshot, "--nodepools", str(write_yaml(tmp_path, "c5.yaml", [overlay])))
    c5_now = sum(m["costPerHour"] for m in plan["current"]["nodeMix"] if m["instanceType"].startswith("c5."))
    assert c5_now > 0
    assert plan["churn"]["nodesDisrupted"] == 0  # the nodes already run c5: only their price changes
    assert plan["proposed"]["deltaPerHour"] == pytest.approx(-0.3 * c5_now)


def test_the_published_node_overlay_blueprint_moves_team_alpha_to_the_newest_generation(
    capsys: Any, tmp_path: Path
) -> None:
    """aws-samples/karpenter-blueprints' node-overlay blueprint, as published: team-alpha's NodePool and
    workload run first; the PR adds its three overlays, which penalise generations 5-7 for that pool."""
    def documents(name: str) -> list[dict[str, Any]]:
        return [d for d in yaml.safe_load_all((BLUEPRINT / name).read_text()) if d]

    workload = documents("node-overlay/workload-targeted.yaml")
    workload[0]["spec"]["replicas"] = 3  # as `kubectl scale` would
    cluster = {
        "name": "node-overlay-blueprint",
        "settings": {"clock": "2026-01-05T10:00:00Z"},
        "catalog": {"preset": "aws-us-east-1", "zones": ["us-east-1a", "us-east-1b", "us-east-1c"]},
        "objects": [*(d for d in documents("cluster-default.yaml") if d["kind"] == "EC2NodeClass"),
                    *documents("node-overlay/nodepool-targeted.yaml"), *workload],
        "steps": [{"provision": {}}],
    }
    snapshot = write_snapshot(tmp_path, cluster)
    plan = _plan(capsys, snapshot, "--nodepools", str(BLUEPRINT / "node-overlay/node-overlay-targeted.yaml"))
    assert {c["name"]: c["change"] for c in plan["nodeoverlays"]} == {
        "team-alpha-prefer-latest-gen": "added", "team-alpha-prefer-gen7-8": "added", "team-alpha-prefer-gen8": "added"}

    def generations(summary: dict[str, Any]) -> set[int]:
        return {int(re.match(r"[a-z]+(\d+)", m["instanceType"]).group(1)) for m in summary["nodeMix"]}  # type: ignore[union-attr]

    assert generations(plan["current"]) <= {5, 6, 7}
    assert generations(plan["proposed"]) == {8}
    assert [move["action"] for move in plan["consolidation"]] == ["replace"]


def test_a_simulated_cluster_with_overlays_and_the_gate_off_stays_off_in_its_snapshot(
    capsys: Any, tmp_path: Path
) -> None:
    """A scenario's snapshot records the NodeOverlay gate whenever it holds overlays, even at its default (off):
    otherwise the plan would take the overlays as in use."""
    document = _savings_example()
    document["settings"]["featureGates"] = {"NodeOverlay": False}
    snapshot = write_snapshot(tmp_path, document)
    assert yaml.safe_load(snapshot.read_text())["settings"]["featureGates"] == {"NodeOverlay": False}
    code, out, err = run_cli(capsys, "status", "--snapshot", str(snapshot), "--json")
    assert code == 0, err
    assert json.loads(out)["costPerHour"] == pytest.approx(C6A_XLARGE)  # list prices: the overlay is ignored


def test_replace_all_over_a_directory_of_nodepools_and_overlays(capsys: Any, tmp_path: Path, overlaid: Path) -> None:
    """A GitOps directory: the NodePools file and an overlays file. ``--replace-all`` completes the NodePools;
    the cluster's overlay not in the directory stays (only ``--remove`` drops one)."""
    directory = tmp_path / "karpenter"
    directory.mkdir()
    pool = _savings_example()["objects"][1]
    write_yaml(directory, "nodepools.yaml", [pool])
    penalty = {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "c6a-penalty"},
            "spec": {"requirements": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In",
                                       "values": ["c6a"]}], "priceAdjustment": "+0.1"}}
    write_yaml(directory, "overlays.yaml", [penalty])
    plan = _plan(capsys, overlaid, "--nodepools", str(directory), "--replace-all")
    assert {c["name"]: c["change"] for c in plan["nodepools"]} == {"on-demand": "unchanged"}
    assert plan["nodeoverlays"] == [{"name": "c6a-penalty", "change": "added", "fields": []}]
    assert plan["proposed"]["costPerHour"] == pytest.approx(M7I_XLARGE * SAVINGS)  # the Savings Plan still applies
