"""`plan` on this repository's own stacks, as the pull-request workflow runs it (issue 13).

Dev once drifted forever (its `instance-generation Gt 5` was not enforced against the example catalogue,
whose types lack the label) and prod failed on its new `gpu` EC2NodeClass, whose role the stack fills
in at deploy time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.insight.proposal import apply_proposal
from reconciler.insight.sources import load_stack_file

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("snap") / "snapshot.yaml"
    subprocess.run([sys.executable, "-m", "reconciler", "snapshot", "--scenario",
                    str(REPO / "examples/plan/cluster.yaml"), "-o", str(path)],
                   check=True, cwd=REPO, env=ENV, capture_output=True)
    return path


def _plan(snapshot: Path, stack: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "reconciler", "plan", "--snapshot", str(snapshot), "--stack",
                           str(REPO / f"Pulumi.{stack}.yaml"), "--json"],
                          cwd=REPO, env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


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
