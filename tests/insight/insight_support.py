"""Shared helpers for the insight tests: example clusters, snapshots of them, running the CLI."""

from __future__ import annotations

import asyncio
import copy
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from reconciler.cli import main
from reconciler.insight.snapshot import simulated_snapshot
from reconciler.sim.scenario import parse_scenario

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "plan"
# ``tests/support`` (fake API server) is importable as ``support`` whatever the rootdir layout.
if str(REPO / "tests") not in sys.path:
    sys.path.insert(0, str(REPO / "tests"))


def example_cluster() -> dict[str, Any]:
    """``examples/plan/cluster.yaml`` as a mutable document."""
    return yaml.safe_load((EXAMPLES / "cluster.yaml").read_text())


def find(document: dict[str, Any], kind: str, name: str) -> dict[str, Any]:
    return next(o for o in document["objects"] if o["kind"] == kind and o["metadata"]["name"] == name)


def write_snapshot(directory: Path, document: dict[str, Any], name: str = "snapshot.yaml") -> Path:
    """Run the scenario document in the simulator and write a snapshot of the cluster it leaves."""
    scenario = parse_scenario(copy.deepcopy(document))
    snapshot = asyncio.run(simulated_snapshot(scenario))
    path = directory / name
    path.write_text(yaml.safe_dump(snapshot, sort_keys=False))
    return path


def write_yaml(directory: Path, name: str, documents: Sequence[dict[str, Any]]) -> Path:
    path = directory / name
    path.write_text(yaml.safe_dump_all(list(documents), sort_keys=False))
    return path


def example_pools(transform: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """The example cluster's NodePools as proposal manifests, optionally edited."""
    pools = [copy.deepcopy(o) for o in example_cluster()["objects"] if o["kind"] == "NodePool"]
    if transform is not None:
        for pool in pools:
            transform(pool)
    return pools


def run_cli(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def status_nodes(capsys: Any, snapshot: Path) -> list[dict[str, Any]]:
    """The node table of ``status --json`` for a snapshot."""
    import json

    code, out, err = run_cli(capsys, "status", "--snapshot", str(snapshot), "--json")
    assert code == 0, err
    return list(json.loads(out)["nodes"])
