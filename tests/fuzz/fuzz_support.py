"""Seeds and the CLI harness of the fuzz tests: the real inputs mutations start from, and running a command
in-process (as ``python -m reconciler`` does) or as a subprocess with the outcome checked."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import io
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from reconciler.cli import main

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
KARPENTER_EXAMPLES = SHARED / "data" / "karpenter-examples"
PLAN_EXAMPLES = REPO / "examples" / "plan"
SCALE = int(os.environ.get("ADZE_FUZZ_SCALE", "1"))
# What an error line starts with: a key path ("objects[3].spec.containers[0]...", "catalog.zones",
# "(document)", "steps[2].advance"), a file ("/tmp/x/snap.yaml", "snap.yaml") or an option ("--horizon").
PATH_PREFIX = re.compile(r"^[(A-Za-z/.-][\w.\[\]()/:@%+-]*: \S")


def one_line_path_error(message: str) -> None:
    assert "\n" not in message, message
    assert "Traceback" not in message, message
    assert PATH_PREFIX.match(message), f"error does not start with the path it is about: {message!r}"


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``python -m reconciler ARGV`` in this process: exit code, stdout, stderr (exceptions propagate)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit_:  # argparse
            code = exit_.code if isinstance(exit_.code, int) else 2
    return int(code), out.getvalue(), err.getvalue()


def run_cli_process(argv: list[str]) -> tuple[int, str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "reconciler", *argv], capture_output=True, text=True,
                          timeout=300, env=env, cwd=REPO)
    return done.returncode, done.stdout, done.stderr


def check_outcome(code: int, err: str, what: str, *, ok: tuple[int, ...] = (0,)) -> bool:
    """A run either succeeds (``ok``: 0, or plan's 3 and 4) or exits 2 with one path-named line on
    stderr; anything else fails the test. True when it was an input error."""
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), f"{what}: {err!r}"
        one_line_path_error(lines[0].removeprefix("error: "))
        return True
    assert code in ok, f"{what}: exit {code}: {err[-2000:]}"
    return False


@cache
def _cluster_snapshot() -> dict[str, Any]:
    from reconciler.insight.snapshot import simulated_snapshot
    from reconciler.sim.scenario import load_scenario_file

    return asyncio.run(simulated_snapshot(load_scenario_file(PLAN_EXAMPLES / "cluster.yaml")))


def cluster_snapshot() -> dict[str, Any]:
    """``snapshot --scenario examples/plan/cluster.yaml``: several Nodes and NodeClaims, DaemonSet pods, PDBs."""
    return copy.deepcopy(_cluster_snapshot())


def kubectl_dump() -> dict[str, Any]:
    """The snapshot's objects as ``kubectl get ... -A -o yaml`` prints them: one ``kind: List``."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
            "items": cluster_snapshot()["objects"]}


def nodepools_files() -> list[tuple[str, list[dict[str, Any]]]]:
    """``--nodepools`` inputs: the plan examples and Karpenter's own v1 NodePool/EC2NodeClass examples."""
    files = [*sorted(PLAN_EXAMPLES.glob("*.yaml")), *sorted((KARPENTER_EXAMPLES / "v1").glob("*.yaml"))]
    seeds = []
    for path in files:
        documents = [d for d in yaml.safe_load_all(path.read_text()) if d]
        if documents and all(d.get("kind") in ("NodePool", "EC2NodeClass") for d in documents):
            seeds.append((path.name, documents))
    return seeds


def scenario_seeds() -> list[tuple[str, dict[str, Any]]]:
    """Scenario documents: the shared ones, the examples, the regressions, the snapshot above with steps
    (Nodes, NodeClaims and DaemonSet pods as a real cluster has them) and Karpenter's example workloads."""
    files = [*sorted((SHARED / "scenarios").glob("*.yaml")), *sorted((REPO / "examples").glob("*.yaml")),
             PLAN_EXAMPLES / "cluster.yaml", *sorted((REPO / "tests" / "sim" / "regressions").glob("*.yaml"))]
    seeds = [(f.name, yaml.safe_load(f.read_text())) for f in files]
    snapshot = cluster_snapshot()
    snapshot["steps"] = [{"provision": {}}, {"disrupt": {}}, {"advance": "10m"}]
    seeds.append(("cluster-snapshot", snapshot))
    workloads = [d for f in sorted((KARPENTER_EXAMPLES / "workloads").glob("*.yaml"))
                 for d in yaml.safe_load_all(f.read_text()) if d]
    for workload in workloads:  # a handful of pods each: the mutations, not the scale, are the point
        if isinstance((workload.get("spec") or {}).get("replicas"), int):
            workload["spec"]["replicas"] = min(workload["spec"]["replicas"], 3)
    cluster = yaml.safe_load((PLAN_EXAMPLES / "cluster.yaml").read_text())
    pools = [o for o in cluster["objects"] if o["kind"] in ("NodePool", "EC2NodeClass")]
    seeds.append(("karpenter-workloads", {"name": "karpenter-workloads", "catalog": cluster["catalog"],
                                          "objects": [*pools, *workloads], "steps": [{"provision": {}}]}))
    return [(name, doc) for name, doc in seeds if isinstance(doc, dict) and "steps" in doc]
