"""Inputs checked before a preview (issue 25, item 2): a snapshot is a cluster's, a stack is for the snapshot's
region, the bundled catalogue covers the zones the cluster's subnets and nodes use, and a snapshot is read once
whatever catalogue prices it."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from insight_support import EXAMPLES, REPO, example_cluster, run_cli, write_snapshot, write_yaml

from reconciler.insight import sources
from reconciler.insight.plan.compute import compute_plan
from reconciler.insight.plan.risks import risk_lines, verdict

DUMP = Path(__file__).parent / "data" / "kubectl-dump-pdb-forms.yaml"


@pytest.fixture(scope="module")
def example_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_snapshot(tmp_path_factory.mktemp("example"), example_cluster())


@pytest.mark.parametrize("command", ["plan", "status", "explain"])
def test_a_file_that_is_not_a_cluster_is_refused_naming_it(command: str, tmp_path: Path, capsys: Any) -> None:
    nodepools = str(EXAMPLES / "relabel-general.yaml")
    argv = {"plan": ["plan", "--snapshot", nodepools, "--nodepools", nodepools],
            "status": ["status", "--snapshot", nodepools],
            "explain": ["explain", "node", "x", "--snapshot", nodepools]}[command]
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert err.strip() == (f"error: {nodepools}: not a cluster snapshot: it holds 2 NodePool and no Node (expected "
                           "what `snapshot` writes, or `kubectl get nodes,pods,... -A -o yaml` output); a NodePool "
                           "file goes to --nodepools")


def test_a_list_without_nodes_is_refused(tmp_path: Path, capsys: Any) -> None:
    deployment = next(o for o in yaml.safe_load(DUMP.read_text())["items"] if o["kind"] == "Deployment")
    for document in (deployment, {"apiVersion": "v1", "kind": "List", "items": [deployment]}):
        path = write_yaml(tmp_path, "one.yaml", [document])
        code, _, err = run_cli(capsys, "status", "--snapshot", str(path))
        assert code == 2 and "not a cluster snapshot: it holds 1 Deployment and no Node" in err
        assert "--nodepools" not in err


def test_a_stack_for_another_region_is_called_out_first(example_snapshot: Path, capsys: Any) -> None:
    _, out, _ = run_cli(capsys, "plan", "--snapshot", str(example_snapshot), "--stack",
                        str(REPO / "Pulumi.staging.yaml"), "--json")
    document = json.loads(out)
    expected = (f"{REPO / 'Pulumi.staging.yaml'} deploys to us-west-2, but the snapshot's cluster runs in us-east-1: "
                "is it the cluster this stack manages?")
    assert document["regionMismatch"] == expected
    _, out, _ = run_cli(capsys, "plan", "--snapshot", str(example_snapshot), "--stack",
                        str(REPO / "Pulumi.staging.yaml"))
    # Right under the verdict (staging strands the trainer pods: that comes first) and the plan line.
    assert f"risk: {expected}" in out.splitlines()[2:4]
    _, out, _ = run_cli(capsys, "plan", "--snapshot", str(example_snapshot), "--stack",
                           str(REPO / "Pulumi.prod.yaml"), "--json")
    assert json.loads(out)["regionMismatch"] is None  # prod is us-east-1, as the example cluster


def test_a_safe_change_for_another_region_is_reviewed(example_snapshot: Path) -> None:
    """A change that disrupts nothing is still not SAFE when the stack is for another region's cluster."""
    pools = [o for o in example_cluster()["objects"] if o["kind"] == "NodePool"]
    plan = asyncio.run(compute_plan(sources.load_snapshot(example_snapshot),
                                    sources.ProposedConfig(pools, [], "same.yaml", complete=False), frames=False))
    assert verdict(plan)[0] == "safe"
    elsewhere = dataclasses.replace(plan, region_mismatch="Pulumi.eu.yaml deploys to eu-west-1, but ...")
    assert verdict(elsewhere) == ("review", "Pulumi.eu.yaml deploys to eu-west-1, but ...")
    assert risk_lines(elsewhere)[0] == "Pulumi.eu.yaml deploys to eu-west-1, but ..."


def test_the_preset_covers_the_zones_of_the_subnets_as_well_as_the_nodes(tmp_path: Path, capsys: Any) -> None:
    """The dump's nodes run in us-east-1a/b/c; with all but the 1a nodes gone, its EC2NodeClass's subnets
    still say new capacity can go to 1b and 1c."""
    dump = yaml.safe_load(DUMP.read_text())
    zone = "topology.kubernetes.io/zone"
    keep = {o["metadata"]["name"] for o in dump["items"] if o["kind"] == "Node" and o["metadata"]["labels"][zone]
            == "us-east-1a"}
    dump["items"] = [o for o in dump["items"] if o["kind"] != "Node" or o["metadata"]["name"] in keep]
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump(dump))
    assert sources.load_snapshot(path).document["catalog"] == {
        "preset": "aws-us-east-1", "zones": ["us-east-1a", "us-east-1b", "us-east-1c"]}
    no_subnets = [o for o in dump["items"] if o["kind"] != "EC2NodeClass"]
    path.write_text(yaml.safe_dump({**dump, "items": no_subnets}))
    assert sources.load_snapshot(path).document["catalog"] == {"preset": "aws-us-east-1", "zones": ["us-east-1a"]}


def test_the_snapshot_is_read_once_with_a_catalogue_option(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: Any
) -> None:
    reads: list[str] = []
    original = sources._read_yaml_documents

    def counted(path: str | Path) -> list[Any]:
        reads.append(str(path))
        return original(path)

    monkeypatch.setattr(sources, "_read_yaml_documents", counted)
    prices = tmp_path / "prices.csv"
    prices.write_text("instanceType,capacityType,zone,price\nm5.xlarge,on-demand,,0.5\n")
    code, out, err = run_cli(capsys, "status", "--snapshot", str(DUMP), "--catalog", "preset", "--prices",
                             str(prices), "--json")
    assert code == 0, err
    assert reads == [str(DUMP)]
    assert json.loads(out)["costPerHour"] == pytest.approx(4 * 0.5)
