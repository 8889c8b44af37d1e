"""The fixed inputs of the result-identity test and how each result document is produced.

Every case runs a user's command on a fixed input and returns its result document: ``simulate --json`` on
the shared scenarios, the examples, the invariant campaign's regressions and generated clusters; ``plan
--json``, ``status --json`` and ``explain --json`` on snapshots (the plan example and a generated 40-node
cluster, as a snapshot document and as a ``kubectl get -A -o json`` List dump); and the commands of the
consolidation benchmark at 120 nodes. ``record_results.py`` writes what the code gives today into
``expected/``; ``test_result_identity.py`` recomputes and compares, so a speed-up that changes any decision,
price or explanation fails it.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SHARED = REPO.parent / "shared"
INPUTS = HERE / "inputs"
EXPECTED = HERE / "expected"
EXAMPLE_PLAN = REPO / "examples" / "plan"


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    produce: Callable[[], Any]
    expected: Path | None = None  # where the recorded document lives, when not under expected/


def cli_json(*argv: str) -> Any:
    """Run ``python -m reconciler ARGV`` in process and parse its JSON output (exit 0, 3 and 4 are results)."""
    from reconciler.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    if code not in (0, 3, 4):
        raise AssertionError(f"{' '.join(argv)}: exit {code}: {err.getvalue()[-500:]}")
    document = json.loads(out.getvalue())
    return {"exit": code, "document": _without_paths(document)}


def _without_paths(document: Any) -> Any:
    """Input file paths are echoed into plans; they differ between checkouts."""
    if isinstance(document, dict):
        return {k: (Path(v).name if k in ("snapshot", "proposedFrom") and isinstance(v, str) else _without_paths(v))
                for k, v in document.items()}
    if isinstance(document, list):
        return [_without_paths(v) for v in document]
    return document


def simulate(path: Path) -> Any:
    from reconciler.sim.runner import run_scenario_file

    return run_scenario_file(path)


def simulate_checked(path: Path) -> Any:
    """A random scenario (generated or a regression), run by the invariant campaign's harness (it resolves ``@N`` node
    references and checks the invariants after every step)."""
    import yaml

    sys.path.insert(0, str(REPO / "tests" / "sim"))
    from invariant_harness import run_checked

    return run_checked(yaml.safe_load(path.read_text()))


def snapshot_of(scenario: Path) -> dict[str, Any]:
    """``snapshot --scenario``: the snapshot document the simulator takes of a scenario's cluster."""
    import asyncio

    from reconciler.insight.snapshot import simulated_snapshot
    from reconciler.sim.scenario import load_scenario_file

    return json.loads(json.dumps(asyncio.run(simulated_snapshot(load_scenario_file(scenario))), default=str))


def scenario_files() -> list[Path]:
    files = sorted((SHARED / "scenarios").glob("*.yaml")) if SHARED.is_dir() else []
    files += [REPO / "examples" / "inflate.yaml", EXAMPLE_PLAN / "cluster.yaml"]
    files += sorted((REPO / "tests" / "sim" / "regressions").glob("*.yaml"))
    files += sorted(INPUTS.glob("scenario-*.yaml"))
    return files


def snapshot_cases(label: str, snapshot: Path, proposals: dict[str, list[str]], nodes: list[str],
                   pods: list[str]) -> Iterator[Case]:
    path = str(snapshot)
    yield Case(f"{label}/status", lambda: cli_json("status", "--snapshot", path, "--json"))
    for node in nodes:
        yield Case(f"{label}/explain-node-{node}", lambda n=node: cli_json("explain", "node", n, "--snapshot", path,
                                                                            "--json"))
    for pod in pods:
        yield Case(f"{label}/explain-pod-{pod.replace('/', '_')}",
                   lambda p=pod: cli_json("explain", "pod", p, "--snapshot", path, "--json"))
    for name, extra in proposals.items():
        yield Case(f"{label}/plan-{name}", lambda e=extra: cli_json("plan", "--snapshot", path, *e, "--json"))


def bench_snapshot_cases(snapshot: Path, label: str) -> Iterator[Case]:
    proposals = {name: ["--nodepools", str(INPUTS / f"change-{name}.yaml")] for name in ("relabel", "spot", "no-op")}
    with (INPUTS / "bench-cluster-40.picks.json").open() as file:
        picks = json.load(file)
    yield from snapshot_cases(label, snapshot, proposals, picks["nodes"], picks["pods"])


def cases() -> list[Case]:
    result: list[Case] = []
    for path in scenario_files():
        origin = path.parent.name if path.parent.name != "inputs" else "generated"
        checked = path.parent.name == "regressions" or path.stem.startswith("scenario-random-")
        run = simulate_checked if checked else simulate
        result.append(Case(f"simulate/{origin}/{path.stem}", lambda p=path, r=run: r(p)))
    # The snapshot the plan cases read is itself a result: the simulator's cluster read through the KubeAPI.
    result.append(Case("snapshot/bench-cluster-40", lambda: snapshot_of(INPUTS / "bench-cluster-40.yaml"),
                       INPUTS / "bench-cluster-40.snapshot.json"))
    example = INPUTS / "example-snapshot.json"
    example_proposals = {
        "relabel-general": ["--nodepools", str(EXAMPLE_PLAN / "relabel-general.yaml")],
        "relabel-business-hours": ["--nodepools", str(EXAMPLE_PLAN / "relabel-business-hours.yaml")],
        "drop-gpu": ["--nodepools", str(EXAMPLE_PLAN / "drop-gpu.yaml"), "--remove", "gpu"],
        "stack-prod": ["--stack", str(REPO / "Pulumi.prod.yaml")],
    }
    with (INPUTS / "example-snapshot.picks.json").open() as file:
        picks = json.load(file)
    result.extend(snapshot_cases("example", example, example_proposals, picks["nodes"], picks["pods"]))
    result.extend(bench_snapshot_cases(INPUTS / "bench-cluster-40.snapshot.json", "bench-40"))
    result.extend(bench_snapshot_cases(INPUTS / "bench-cluster-40.dump.json", "bench-40-dump"))
    result.append(Case("consolidation/120-nodes", lambda: consolidation_commands(120)))
    return result


def consolidation_commands(nodes: int) -> dict[str, Any]:
    """``bench/consolidation.py`` at ``nodes``: every pass's command and the outcome."""
    sys.path.insert(0, str(REPO))
    from bench.consolidation import run

    row = run(nodes, max_passes=400, seed=7)
    keep = ("nodes", "scaled_cost", "pods_deleted", "before_nodes", "before_cost", "after_nodes", "after_cost",
            "bound", "passes", "stable", "methods", "simulations", "commands")
    return {k: row[k] for k in keep if k in row}


def expected_path(case: Case) -> Path:
    if case.expected is not None:
        return case.expected
    return EXPECTED / (case.name.replace("/", "__") + ".json")


def canonical(document: Any) -> Any:
    """The document as JSON would carry it (tuples as lists, datetimes as strings)."""
    return json.loads(json.dumps(document, default=str, sort_keys=True))


def differences(expected: Any, actual: Any, path: str = "$") -> Iterator[str]:
    """Where ``actual`` differs from ``expected``. Keys only ``actual`` has are allowed (an output may gain
    fields); every recorded key, list element and value must be the same."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key, value in expected.items():
            if key not in actual:
                yield f"{path}.{key}: missing"
            else:
                yield from differences(value, actual[key], f"{path}.{key}")
    elif isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            yield f"{path}: {len(expected)} items expected, {len(actual)} found"
        for index, (left, right) in enumerate(zip(expected, actual, strict=False)):
            yield from differences(left, right, f"{path}[{index}]")
    elif type(expected) is not type(actual) or expected != actual:
        yield f"{path}: expected {json.dumps(expected)[:200]}, found {json.dumps(actual)[:200]}"
