"""Invariants over random valid scenarios, checked after every step (issue 19), and the shrunk
counterexamples the campaign found, kept as regression scenarios under tests/sim/regressions/.

ADZE_INVARIANT_EXAMPLES raises the number of random scenarios for a longer run (the full suite's count,
CI's default, finds each fix of issue 19 reverted in a scratch copy -- see the README's invariant paragraph).
"""

from __future__ import annotations

import asyncio
import copy
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
from invariant_harness import Checker, InterruptingSimulation, InvariantViolation, run_checked
from invariant_scenarios import scenarios
from support.timescale import scaled

from reconciler.kube.api import NODECLAIM, NODEPOOL
from reconciler.sim.runner import run_scenario
from reconciler.sim.scenario import parse_scenario

HERE = Path(__file__).parent
REPO = HERE.parents[1]
REGRESSIONS = sorted((HERE / "regressions").glob("*.yaml"))
EXAMPLES = int(os.environ.get("ADZE_INVARIANT_EXAMPLES", "600"))
QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large]


# The fast set (``-m "not slow"``) checks the first FAST_EXAMPLES scenarios; the full suite (CI) checks EXAMPLES,
# the count that finds each fix of issue 19 reverted (derandomized: the fast ones are the first of those).
FAST_EXAMPLES = min(EXAMPLES, 150)


@settings(max_examples=FAST_EXAMPLES, deadline=None, derandomize=True, suppress_health_check=QUIET)
@given(scenarios())
def test_every_step_of_a_random_scenario_keeps_the_invariants(document: dict) -> None:
    run_checked(document)


@pytest.mark.slow  # the full count: minutes of CPU
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, suppress_health_check=QUIET)
@given(scenarios())
def test_every_step_of_each_of_the_ci_count_of_random_scenarios_keeps_the_invariants(document: dict) -> None:
    run_checked(document)


def _same_result_twice(document: dict) -> None:
    first = json.dumps(run_checked(json.loads(json.dumps(document))), sort_keys=True)
    second = json.dumps(run_checked(json.loads(json.dumps(document))), sort_keys=True)
    assert first == second


# In one process: the fast set runs the first 20 scenarios twice, the full suite the first EXAMPLES // 10.
@settings(max_examples=min(20, max(5, EXAMPLES // 10)), deadline=None, derandomize=True, suppress_health_check=QUIET)
@given(scenarios())
def test_the_same_scenario_gives_the_same_result_document(document: dict) -> None:
    _same_result_twice(document)


@pytest.mark.slow  # the full count, each scenario run twice
@settings(max_examples=max(5, EXAMPLES // 10), deadline=None, derandomize=True, suppress_health_check=QUIET)
@given(scenarios())
def test_each_of_the_ci_count_of_scenarios_gives_the_same_result_document_twice(document: dict) -> None:
    _same_result_twice(document)


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
print(json.dumps({path: run(path) for path in sys.argv[2:]}))  # as built: key order is compared too
"""


@pytest.mark.slow  # Python start-ups with other hash seeds
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
                              text=True, env=env, cwd=REPO, timeout=scaled(300))
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    if len(set(outputs)) > 1:  # byte for byte; name the first scenario whose document differs
        documents = [json.loads(output) for output in outputs]
        differing = [path for path in map(str, files) if len({json.dumps(d[path]) for d in documents}) > 1]
        raise AssertionError(f"result documents differ between processes: {differing}")
    # The user's command as well: the same bytes on stdout.
    cli = [subprocess.run([sys.executable, "-m", "reconciler", "simulate", str(REGRESSIONS[0]), "--json"],
                          capture_output=True, text=True, cwd=REPO, timeout=scaled(120), check=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": seed}).stdout
           for seed in ("4", "5")]
    assert cli[0] == cli[1]


def _events(result: dict[str, Any], reason: str) -> list[dict[str, Any]]:
    return [e for step in result["steps"] for e in step["events"] if e["reason"] == reason]


def _limit_holds_pods(result: dict[str, Any], limit: str) -> bool:
    """At the end, pods wait because the NodePool's limit is reached (while a deleting node still counts)."""
    return any(limit in reason for reason in result["steps"][-1]["pending"].values())


# What each regression scenario must still exercise, so a change elsewhere cannot make it pass vacuously.
EXERCISES: dict[str, Callable[[dict[str, Any]], bool]] = {
    "drift-replacement-at-the-limit": lambda r: not r["steps"][2]["disrupted"] and any(
        "cpu limit 8: existing nodes use 8, 0 left" in e["message"] for e in _events(r, "DisruptionBlocked")),
    "drift-under-pdb": lambda r: [d["method"] for d in r["steps"][2]["disrupted"]] == ["drift"] * 4
    and len(_events(r, "Evicted")) == 4,
    "expire-under-pdb": lambda r: len(r["steps"][2]["disrupted"]) == 4 and len(_events(r, "Evicted")) == 4,
    "launch-pending-then-provision": lambda r: any("nominated" in reason for step in r["steps"][:3]
                                                   for reason in step["pending"].values()),
    "limit-exceeded-drift-expire-s211": lambda r: [(d["node"], d["reason"]) for d in r["steps"][8]["disrupted"]]
    == [("np0-0fxzv", "Expired")] and _limit_holds_pods(r, "cpu limit 4"),
    "limit-exceeded-interrupt-pdb-blocked-s46": lambda r: [(d["node"], d["reason"]) for d in r["steps"][3][
        "disrupted"]] == [("np1-q2e00", "Interrupted")] and _limit_holds_pods(r, "cpu limit 4"),
    "multi-node-consolidation-under-pdb": lambda r: len(r["steps"][2]["disrupted"]) == 3
    and {d["method"] for d in r["steps"][2]["disrupted"]} == {"multi-node"} and len(_events(r, "Evicted")) == 3,
    "nomination-dropped-when-a-pass-leaves-the-pod-pending": lambda r: "nominated" in r["steps"][0]["pending"][
        "default/small-0"] and r["steps"][3]["bound"] == {"default/large-0": "default-ae5qv"},
    "nominated-claim-overcommitted-by-a-rebind": lambda r: "nominated for NodeClaim pool0-doun9" in r["steps"][2][
        "pending"]["default/app1-0"] and bool(_events(r, "DeletedWithNode")),
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


def test_the_limit_check_counts_deleting_and_unlaunched_claims_and_nodes() -> None:
    """(c) counts every claim: one being deleted (draining, shutting down) and one not launched yet (as the
    largest type it may become) both count, and so does each claim against ``limits.nodes``."""
    document = yaml.safe_load((HERE / "regressions" / "drift-replacement-at-the-limit.yaml").read_text())
    document["steps"] = document["steps"][:1]  # two 4-CPU nodes: the pool at its 8-CPU limit
    simulation = InterruptingSimulation(parse_scenario(document))
    checker = Checker(simulation)
    asyncio.run(simulation.run(after_step=checker.after_step))
    claims = simulation.kube.objects(NODECLAIM)
    pools = simulation.kube.objects(NODEPOOL)
    deleting = copy.deepcopy(claims[0])
    deleting["metadata"].update(name="deleting", deletionTimestamp="2026-01-01T00:01:00Z")
    unlaunched = copy.deepcopy(claims[0])
    unlaunched["metadata"]["name"] = "unlaunched"
    del unlaunched["status"]

    def check(extra: dict[str, Any], limits: dict[str, str]) -> None:
        pool = copy.deepcopy(pools[0])
        pool["spec"]["limits"] = limits
        checker._objects = lambda kind: {NODECLAIM: [*claims, extra], NODEPOOL: [pool]}[kind]  # type: ignore
        checker._check_limits("test")

    for extra in (deleting, unlaunched):
        with pytest.raises(InvariantViolation, match="NodePool default has 12 cpu, limit 8"):
            check(extra, {"cpu": "8"})
        with pytest.raises(InvariantViolation, match="NodePool default has 3 nodes, limit 2"):
            check(extra, {"nodes": "2"})
        check(extra, {"cpu": "12", "nodes": "3"})
