"""Invariants over random valid scenarios, checked after every step (issue 19), and the shrunk
counterexamples the campaign found, kept as regression scenarios under tests/sim/regressions/.

ADZE_INVARIANT_EXAMPLES raises the number of random scenarios for a longer run (CI: the default, which
finds each fix of issue 19 reverted in a scratch copy -- see the README's invariant paragraph).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from invariant_harness import run_checked
from invariant_scenarios import scenarios

from reconciler.sim.runner import run_scenario
from reconciler.sim.scenario import parse_scenario

HERE = Path(__file__).parent
REPO = HERE.parents[1]
REGRESSIONS = sorted((HERE / "regressions").glob("*.yaml"))
EXAMPLES = int(os.environ.get("ADZE_INVARIANT_EXAMPLES", "600"))
QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large]


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=QUIET)
@given(scenarios())
def test_every_step_of_a_random_scenario_keeps_the_invariants(document: dict) -> None:
    run_checked(document)


@settings(max_examples=max(5, EXAMPLES // 10), deadline=None, derandomize=True, suppress_health_check=QUIET)
@given(scenarios())
def test_the_same_scenario_gives_the_same_result_document(document: dict) -> None:
    first = json.dumps(run_checked(json.loads(json.dumps(document))), sort_keys=True)
    second = json.dumps(run_checked(json.loads(json.dumps(document))), sort_keys=True)
    assert first == second


def _generated_scenarios(count: int) -> list[dict[str, Any]]:
    """The first ``count`` random scenarios (derandomized: the same ones every run)."""
    found: list[dict[str, Any]] = []

    @settings(max_examples=count, derandomize=True, database=None, phases=[Phase.generate],
              suppress_health_check=QUIET)
    @given(scenarios())
    def collect(document: dict) -> None:
        found.append(document)

    collect()
    return found


# Runs scenario files in one process and prints their result documents (``interrupt: {node: "@k"}`` of the
# generated scenarios resolved as in the invariant suite).
_RUN_ALL = """
import asyncio, json, sys
sys.path.insert(0, sys.argv[1])
from invariant_harness import InterruptingSimulation
from reconciler.sim.scenario import load_scenario_file
run = lambda path: asyncio.run(InterruptingSimulation(load_scenario_file(path)).run())
print(json.dumps({path: run(path) for path in sys.argv[2:]}, sort_keys=True))
"""


def test_the_same_scenario_gives_the_same_result_in_another_process(tmp_path: Path, shared_dir: Path) -> None:
    """(f) across processes: string hashing is salted per process (PYTHONHASHSEED), so any result that
    depends on set or dict-of-set iteration order would differ between two runs of the command."""
    files = [*REGRESSIONS, *sorted((shared_dir / "scenarios").glob("*.yaml"))]
    for index, document in enumerate(_generated_scenarios(12)):
        path = tmp_path / f"generated-{index}.json"
        path.write_text(json.dumps(document))
        files.append(path)
    outputs = []
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", _RUN_ALL, str(HERE), *map(str, files)], capture_output=True,
                              text=True, env=env, cwd=REPO, timeout=300)
        assert done.returncode == 0, done.stderr
        outputs.append(json.loads(done.stdout))
    for path in map(str, files):
        assert outputs[0][path] == outputs[1][path] == outputs[2][path], f"{path} differs between processes"
    # The user's command as well: the same bytes on stdout.
    cli = [subprocess.run([sys.executable, "-m", "reconciler", "simulate", str(REGRESSIONS[0]), "--json"],
                          capture_output=True, text=True, cwd=REPO, timeout=120, check=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": seed}).stdout
           for seed in ("4", "5")]
    assert cli[0] == cli[1]


def _events(result: dict[str, Any], reason: str) -> list[dict[str, Any]]:
    return [e for step in result["steps"] for e in step["events"] if e["reason"] == reason]


# What each regression scenario must still exercise, so a change elsewhere cannot make it pass vacuously.
EXERCISES: dict[str, Callable[[dict[str, Any]], bool]] = {
    "drift-under-pdb": lambda r: [d["method"] for d in r["steps"][2]["disrupted"]] == ["drift"] * 4
    and len(_events(r, "Evicted")) == 4,
    "expire-under-pdb": lambda r: len(r["steps"][2]["disrupted"]) == 4 and len(_events(r, "Evicted")) == 4,
    "launch-pending-then-provision": lambda r: any("nominated" in reason for step in r["steps"][:3]
                                                   for reason in step["pending"].values()),
    "multi-node-consolidation-under-pdb": lambda r: len(r["steps"][2]["disrupted"]) == 3
    and {d["method"] for d in r["steps"][2]["disrupted"]} == {"multi-node"} and len(_events(r, "Evicted")) == 3,
    "terminated-instance-under-blocking-pdb": lambda r: bool(_events(r, "DeletedWithNode")),
    "terminated-instance-while-draining": lambda r: [e["reason"] for e in r["steps"][3]["events"]].count(
        "DeletedWithNode") == 2,
    "unowned-pod-tolerating-everything": lambda r: bool(_events(r, "DeletedWithNode")),
    "zone-notin-only": lambda r: bool(r["steps"][0]["launched"]),
}


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.stem for p in REGRESSIONS])
def test_regression_scenarios_keep_the_invariants(path: Path) -> None:
    result = run_checked(yaml.safe_load(path.read_text()))
    assert path.stem in EXERCISES, f"say what {path.name} must exercise in EXERCISES"
    assert EXERCISES[path.stem](result), f"{path.name} no longer exercises what it guards"


def test_an_expire_under_a_max_unavailable_budget_drains_every_node() -> None:
    """Progress, not only safety: the budget allows one eviction at a time, so draining goes on until every
    expired node is gone (a simulator whose PDB check never allows an eviction keeps them all forever)."""
    document = yaml.safe_load((HERE / "regressions" / "expire-under-pdb.yaml").read_text())
    document["steps"] += [{"provision": {}}, {"advance": "1m"}] * 4
    expired = {"default-9tc58", "default-a0mnu", "default-qmbq9", "default-wtv81"}
    result = run_scenario(parse_scenario(document))
    assert {node["node"] for node in result["steps"][2]["disrupted"]} == expired
    final = result["final"]
    assert not expired & {node["name"] for node in final["nodes"]}
    assert final["pending"] == []
    assert sorted(len(node["pods"]) for node in final["nodes"]) == [1, 1, 1, 1]
