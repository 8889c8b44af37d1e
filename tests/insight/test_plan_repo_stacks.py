"""`plan` on this repository's own stacks, as the pull-request workflow runs it (issue 13).

Dev once drifted forever (its `instance-generation Gt 5` was not enforced against the example catalogue,
whose types lack the label) and prod failed on its new `gpu` EC2NodeClass, whose role the stack fills
in at deploy time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.insight.plan.proposal import apply_proposal
from reconciler.insight.sources import load_stack_file

pytestmark = pytest.mark.slow  # CLI processes: a snapshot and a plan of every repository stack

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("snap") / "snapshot.yaml"
    subprocess.run([sys.executable, "-m", "reconciler", "snapshot", "--scenario",
                    str(REPO / "examples/plan/cluster.yaml"), "-o", str(path)],
                   check=True, cwd=REPO, env=ENV, capture_output=True)
    return path


def _run(snapshot: Path, stack: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reconciler", "plan", "--snapshot", str(snapshot), "--stack",
                           str(REPO / f"Pulumi.{stack}.yaml"), *args],
                          cwd=REPO, env=ENV, capture_output=True, text=True, timeout=60)


def _plan(snapshot: Path, stack: str) -> dict[str, Any]:
    done = _run(snapshot, stack, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# What each stack's NodePools do to the example cluster (general: web+api on 2 on-demand c5 nodes, gpu: 2
# trainer pods on g5), and so the verdict a reviewer must read first and the exit code of the PR job:
# - dev and staging drop the gpu pool: the trainer pods are stranded (BLOCKED; --fail-on-pending exits 3);
# - prod asks for instance-generation > 5, which no c5 node meets and no type in the example catalogue
#   can replace with room for the pods: both general nodes drift and stay (REVIEW, exit 0).
EXPECTED = {
    "dev": ("blocked", "2 pod(s) would become unschedulable (ml/Deployment/trainer x2)", 3),
    "staging": ("blocked", "2 pod(s) would become unschedulable (ml/Deployment/trainer x2)", 3),
    "prod": ("review", "2 drifted node(s) cannot be replaced as asked and stay as they are", 0),
}
ICONS = {"blocked": ":no_entry:", "review": ":warning:", "safe": ":white_check_mark:"}


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_each_stack_gets_its_verdict_first_and_the_exit_code_that_gates_the_job(snapshot: Path, stack: str) -> None:
    state, risk, code = EXPECTED[stack]
    started = time.monotonic()
    done = _run(snapshot, stack, "--markdown", "--fail-on-pending")
    assert time.monotonic() - started < 60
    assert done.returncode == code, done.stderr
    first, second = done.stdout.splitlines()[:2]
    assert first.startswith(f"{ICONS[state]} **{state.upper()}**: {risk}") and second == ""
    # The figures add up: now + Δ = settled, and the settled mix prices to the settled cost.
    plan = _plan(snapshot, stack)
    now, settled = plan["current"]["costPerHour"], plan["proposed"]["costPerHour"]
    assert plan["proposed"]["deltaPerHour"] == pytest.approx(settled - now, abs=1e-6)
    assert sum(m["costPerHour"] for m in plan["proposed"]["nodeMix"]) == pytest.approx(settled, abs=1e-6)
    assert sum(m["count"] for m in plan["proposed"]["nodeMix"]) == plan["proposed"]["nodes"]
    headline = next(line for line in done.stdout.splitlines() if line.startswith("**Cost:**"))
    assert f"now ${now:,.4f}/h" in headline and f"settled ${settled:,.4f}/h" in headline
    text = _run(snapshot, stack)
    assert text.stdout.startswith(f"{state.upper()}: {risk}")
    assert text.returncode == 0  # without --fail-on-pending only the horizon fails the job


def test_prod_counts_every_stuck_drifted_node_and_lists_them_in_the_drift_table(snapshot: Path) -> None:
    plan = _plan(snapshot, "prod")
    assert sorted(s["node"] for s in plan["stuckDrift"]) == sorted(
        o["metadata"]["name"] for o in yaml.safe_load(snapshot.read_text())["objects"]
        if o["kind"] == "Node" and o["metadata"]["labels"].get("karpenter.sh/nodepool") == "general"
    )
    assert all(s["blockedBy"] == ["Unschedulable"] for s in plan["stuckDrift"])
    markdown = _run(snapshot, "prod", "--markdown").stdout
    table = markdown.split("<summary>Drifted nodes, in replacement order (4)</summary>")[1].split("</details>")[0]
    for stuck in plan["stuckDrift"]:
        assert f"| {stuck['node']} | NodePoolDrifted | - | - | - | not replaced: Unschedulable |" in table


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_plan_of_each_stack_settles(snapshot: Path, stack: str) -> None:
    plan = _plan(snapshot, stack)
    assert plan["proposed"]["horizonReached"] is False
    # Nodes that cannot be replaced under the new requirements stay and are reported, not replaced forever.
    assert plan["churn"]["nodesDisrupted"] <= 4
    for blocker in plan["blockers"]:
        assert blocker["code"] and blocker["message"], blocker


def test_prod_plan_takes_the_stack_node_role_for_its_new_nodeclass(snapshot: Path) -> None:
    plan = _plan(snapshot, "prod")
    assert {c["name"]: c["change"] for c in plan["nodeclasses"]} == {"default": "changed", "gpu": "added"}
    objects = yaml.safe_load(snapshot.read_text())["objects"]
    [current] = [o for o in objects if o["kind"] == "EC2NodeClass" and o["metadata"]["name"] == "default"]
    applied = apply_proposal(objects, load_stack_file(REPO / "Pulumi.prod.yaml"))
    [gpu] = [o for o in applied.objects if o["kind"] == "EC2NodeClass" and o["metadata"]["name"] == "gpu"]
    assert gpu["spec"]["role"] == current["spec"]["role"]
