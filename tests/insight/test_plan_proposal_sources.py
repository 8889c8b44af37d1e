"""`plan --nodepools` as a reviewer uses it: merged over the cluster by default, files and directories,
explicit removal, a complete set only when asked, EC2NodeClass-only changes (issue 13)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from insight_support import EXAMPLES, example_cluster, example_pools, run_cli, write_snapshot, write_yaml


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_snapshot(tmp_path_factory.mktemp("cluster"), example_cluster())


def _plan(capsys: Any, snapshot: Path, *args: str) -> tuple[int, dict[str, Any] | None, str]:
    code, out, err = run_cli(capsys, "plan", "--snapshot", str(snapshot), *args, "--json")
    return code, (json.loads(out) if code in (0, 3, 4) else None), err


def _changes(plan: dict[str, Any]) -> dict[str, str]:
    return {c["name"]: c["change"] for c in plan["nodepools"]}


def _relabelled(name: str) -> dict[str, Any]:
    def label(pool: dict[str, Any]) -> None:
        pool["spec"]["template"].setdefault("metadata", {}).setdefault("labels", {})["team"] = "x"
    [pool] = [p for p in example_pools(label) if p["metadata"]["name"] == name]
    return pool


def test_files_and_directories_merge_over_the_cluster(capsys: Any, snapshot: Path, tmp_path: Path) -> None:
    folder = tmp_path / "pools"
    folder.mkdir()
    write_yaml(folder, "a-general.yaml", [_relabelled("general")])
    write_yaml(folder, "notes.txt", [{"not": "read"}])
    gpu = write_yaml(tmp_path, "gpu.yaml", [_relabelled("gpu")])

    code, plan, err = _plan(capsys, snapshot, "--nodepools", str(folder))
    assert code == 0, err
    assert _changes(plan) == {"general": "changed", "gpu": "unchanged"}

    code, plan, err = _plan(capsys, snapshot, "--nodepools", str(folder), "--nodepools", str(gpu))
    assert code == 0, err
    assert _changes(plan) == {"general": "changed", "gpu": "changed"}


def test_a_file_with_only_an_ec2nodeclass_plans_its_drift(capsys: Any, snapshot: Path, tmp_path: Path) -> None:
    [current] = [o for o in yaml.safe_load(snapshot.read_text())["objects"] if o["kind"] == "EC2NodeClass"]
    changed = {"apiVersion": current["apiVersion"], "kind": "EC2NodeClass",
               "metadata": {"name": current["metadata"]["name"]},
               "spec": {**current["spec"], "userData": "echo tuned"}}
    path = write_yaml(tmp_path, "ami.yaml", [changed])

    code, plan, err = _plan(capsys, snapshot, "--nodepools", str(path))

    assert code == 0, err
    assert _changes(plan) == {"general": "unchanged", "gpu": "unchanged"}
    assert plan["nodeclasses"] == [{"name": "default", "change": "changed", "fields": ["userData"]}]
    assert {d["driftReason"] for d in plan["drift"]} == {"NodeClassDrifted"}
    assert len(plan["drift"]) == 4


def test_removal_is_explicit_and_checked(capsys: Any, snapshot: Path) -> None:
    code, plan, err = _plan(capsys, snapshot, "--remove", "gpu")
    assert code == 0, err
    assert _changes(plan) == {"general": "unchanged", "gpu": "removed"}
    assert len(plan["unschedulable"]["new"]) == 2  # the trainer Deployment's pods (replaced under new names)
    assert all(key.startswith("ml/trainer-") for key in plan["unschedulable"]["new"])

    code, _, err = _plan(capsys, snapshot, "--remove", "gpus")
    assert code == 2 and err.strip() == "error: --remove gpus: the cluster has no NodePool or NodeOverlay of that " \
                                        "name (NodePools: general, gpu; NodeOverlays: none)"
    code, _, err = _plan(capsys, snapshot, "--nodepools", str(EXAMPLES / "relabel-general.yaml"), "--remove",
                         "general")
    assert code == 2 and "--remove general: the NodePool is also given in" in err


@pytest.mark.parametrize(("argv", "message"), [
    (["--replace-all"], "--replace-all: needs --nodepools"),
    (["--nodepools", "A", "--nodepools", "B"], "NodePool 'general' is declared differently in"),
    (["--nodepools", "CLASS_ONLY", "--replace-all"], "--replace-all: the files declare no NodePool"),
    (["--nodepools", "EMPTY_DIR"], "no .yaml or .yml files in the directory"),
    (["--nodepools", "A", "--stack", "dev"], "give one source of proposed NodePools, not both"),
])
def test_bad_source_combinations_exit_2_naming_the_problem(
    capsys: Any, snapshot: Path, tmp_path: Path, argv: list[str], message: str
) -> None:
    (tmp_path / "empty").mkdir()
    files = {
        "A": str(EXAMPLES / "relabel-general.yaml"),
        "B": str(EXAMPLES / "relabel-business-hours.yaml"),
        "CLASS_ONLY": str(write_yaml(tmp_path, "c.yaml", [
            o for o in yaml.safe_load(snapshot.read_text())["objects"] if o["kind"] == "EC2NodeClass"])),
        "EMPTY_DIR": str(tmp_path / "empty"),
    }
    code, _, err = _plan(capsys, snapshot, *[files.get(a, a) for a in argv])
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("ref", "reason"), [
    ({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "missing"},
     "NodePool gpu is not Ready: its nodeClassRef names EC2NodeClass missing, which does not exist"),
    ({"group": "eks.amazonaws.com", "kind": "NodeClass", "name": "default"},
     "NodePool gpu is not Ready: its nodeClassRef eks.amazonaws.com/NodeClass default belongs to another provider"),
])
def test_a_pool_without_a_usable_nodeclass_launches_nothing_and_the_plan_says_so(
    capsys: Any, snapshot: Path, tmp_path: Path, ref: dict[str, str], reason: str
) -> None:
    [gpu] = [p for p in example_pools() if p["metadata"]["name"] == "gpu"]
    gpu["spec"]["template"]["spec"]["nodeClassRef"] = ref
    code, plan, err = _plan(capsys, snapshot, "--nodepools", str(write_yaml(tmp_path, "gpu.yaml", [gpu])))
    assert code == 0, err
    assert plan["churn"]["nodesLaunched"] == 0
    assert all(reason in b["message"] for b in plan["blockers"] if b["nodepool"] == "gpu")
    assert len([b for b in plan["blockers"] if b["nodepool"] == "gpu"]) == 2
    code, text, _ = run_cli(capsys, "plan", "--snapshot", str(snapshot), "--nodepools", str(tmp_path / "gpu.yaml"))
    assert text.startswith(f"REVIEW: {reason}") and ", so it launches nothing" in text.splitlines()[0]
    assert f"risk: {reason}" in text


def test_a_dump_without_any_ec2nodeclass_is_not_read_as_nothing_can_launch(
    capsys: Any, tmp_path: Path
) -> None:
    """`kubectl get` without ec2nodeclasses (or a simulated cluster): pools stay usable, nothing is blocked."""
    document = example_cluster()
    document["objects"] = [o for o in document["objects"] if o["kind"] != "EC2NodeClass"]
    bare = write_snapshot(tmp_path, document)
    code, plan, err = _plan(capsys, bare, "--nodepools", str(EXAMPLES / "relabel-general.yaml"))
    assert code == 0, err
    assert plan["churn"]["nodesLaunched"] == plan["churn"]["nodesDisrupted"] == 2
    assert not [b for b in plan["blockers"] if "not Ready" in b["message"]]


def test_risk_lines_show_requirement_changes_spot_share_and_a_single_zone(
    capsys: Any, snapshot: Path, tmp_path: Path
) -> None:
    def to_spot_in_one_zone(pool: dict[str, Any]) -> None:
        requirements = pool["spec"]["template"]["spec"]["requirements"]
        for requirement in requirements:
            if requirement["key"] == "karpenter.sh/capacity-type":
                requirement["values"] = ["spot"]
        requirements.append({"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]})

    [general] = [p for p in example_pools(to_spot_in_one_zone) if p["metadata"]["name"] == "general"]
    path = write_yaml(tmp_path, "general.yaml", [general])

    code, plan, err = _plan(capsys, snapshot, "--nodepools", str(path))
    assert code == 0, err
    [change] = [c for c in plan["nodepools"] if c["name"] == "general"]
    assert change["requirements"] == [
        {"key": "karpenter.sh/capacity-type", "before": "In [on-demand]", "after": "In [spot]"},
        {"key": "topology.kubernetes.io/zone", "before": "-", "after": "In [us-east-1a]"},
    ]
    after = plan["proposed"]["byNodePool"]["general"]
    assert after["spot"] == after["nodes"] >= 2 and list(after["zones"]) == ["us-east-1a"]

    code, text, _ = run_cli(capsys, "plan", "--snapshot", str(snapshot), "--nodepools", str(path))
    risks = [line for line in text.splitlines() if line.startswith("risk: ")]
    assert risks[:2] == ["risk: NodePool general: karpenter.sh/capacity-type: In [on-demand] → In [spot]",
                         "risk: NodePool general: topology.kubernetes.io/zone: - → In [us-east-1a]"]
    before = plan["current"]["byNodePool"]["general"]["nodes"]
    assert f"risk: NodePool general moves 100% to spot (0/{before} → {before}/{before} nodes)" in text
    # The example cluster already runs in us-east-1a only: nothing new to flag about zones.
    assert not any("one zone" in line for line in risks)
    code, markdown, _ = run_cli(capsys, "plan", "--snapshot", str(snapshot), "--nodepools", str(path), "--markdown")
    assert "- NodePool general: karpenter.sh/capacity-type: In [on-demand] → In [spot]" in markdown
    assert markdown.index("moves 100% to spot") < markdown.index("**Cost:**") < markdown.index("| now |")


def test_prices_from_the_bundled_preset_are_marked_as_estimates(capsys: Any, snapshot: Path, tmp_path: Path) -> None:
    from types import SimpleNamespace

    from reconciler.insight.plan.risks import price_note

    preset = tmp_path / "preset.yaml"
    code, _, err = run_cli(capsys, "snapshot", "--from", str(snapshot), "--catalog", "preset", "-o", str(preset))
    assert code == 0, err
    code, markdown, err = run_cli(capsys, "plan", "--snapshot", str(preset), "--nodepools",
                                  str(EXAMPLES / "relabel-general.yaml"), "--markdown")
    assert code == 0, err
    cost = next(line for line in markdown.splitlines() if line.startswith("**Cost:**"))
    assert cost.endswith("(prices are ESTIMATES from the bundled aws-us-east-1 catalogue, not this cluster's "
                         "live prices).")
    code, plan, _ = _plan(capsys, preset, "--nodepools", str(EXAMPLES / "relabel-general.yaml"))
    assert plan["prices"] == {"kind": "estimate", "catalog": "aws-us-east-1", "nodeRegion": "us-east-1"}
    staging = SimpleNamespace(prices={"kind": "estimate", "catalog": "aws-us-east-1", "nodeRegion": "us-west-2"})
    assert price_note(staging).endswith("(its nodes run in us-west-2)")
    _, own, _ = _plan(capsys, snapshot, "--nodepools", str(EXAMPLES / "relabel-general.yaml"))
    assert own["prices"] == {"kind": "catalogue", "region": "us-east-1"}
