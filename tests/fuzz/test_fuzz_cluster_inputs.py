"""The inputs of plan / status / explain, fuzzed through the commands that read them (issue 19): snapshots,
``kubectl get -o yaml`` dumps (``kind: List``), ``--nodepools`` files and Pulumi stack files, each mutated
one to three times, and binary garbage in every loader. Every run succeeds or exits 2 with one line naming
the file or key path; a sample of each family goes through a real ``python -m reconciler`` process too.
ADZE_FUZZ_SCALE multiplies the counts."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fuzz_support import (
    PLAN_EXAMPLES,
    REPO,
    SCALE,
    check_outcome,
    cluster_snapshot,
    kubectl_dump,
    nodepools_files,
    run_cli,
    run_cli_process,
)
from malformed import garbage, mutate_many

PLAN_OK = (0, 3, 4)  # 3: pods left pending (--fail-on-pending is not given, so not expected), 4: horizon reached


def _dump(document: Any, path: Path, rng: random.Random) -> bool:
    """Write a document as JSON or YAML (both are read); False when it cannot be written at all."""
    try:
        text = json.dumps(document) if rng.random() < 0.5 else yaml.safe_dump(document)
    except (RecursionError, ValueError, TypeError, yaml.YAMLError):
        return False
    path.write_text(text)
    return True


def _documents(documents: list[Any], path: Path) -> bool:
    try:
        path.write_text("\n---\n".join(json.dumps(d) for d in documents))
    except (RecursionError, ValueError, TypeError):
        return False
    return True


Case = tuple[str, list[str]]  # (what was mutated, argv)


def snapshot_cases(tmp: Path, seed: int, count: int) -> Iterator[Case]:
    """Mutated snapshots through status, explain (pod and node) and, one in eight, plan."""
    rng = random.Random(seed)
    base = cluster_snapshot()
    node = next(o["metadata"]["name"] for o in base["objects"] if o["kind"] == "Node")
    for index in range(count):
        mutated, what = mutate_many(base, rng)
        path = tmp / f"snapshot-{index}.yaml"
        if not _dump(mutated, path, rng):
            continue
        command = [["status", "--snapshot", str(path)], ["status", "--snapshot", str(path), "--json"],
                   ["explain", "pod", "default/web-0", "--snapshot", str(path)],
                   ["explain", "node", node, "--snapshot", str(path), "--json"]][index % 4]
        if index % 8 == 7:
            command = ["plan", "--snapshot", str(path), "--nodepools", str(PLAN_EXAMPLES / "relabel-general.yaml"),
                       "--json", "--horizon", "30m"]
        yield f"snapshot with {what}", command


def dump_cases(tmp: Path, seed: int, count: int) -> Iterator[Case]:
    """Mutated ``kind: List`` dumps (sanitized on load like a live cluster's objects) through status."""
    rng = random.Random(seed)
    base = kubectl_dump()
    for index in range(count):
        mutated, what = mutate_many(base, rng)
        path = tmp / f"dump-{index}.yaml"
        if _dump(mutated, path, rng):
            yield f"kubectl dump with {what}", ["status", "--snapshot", str(path), "--json"]


def nodepools_cases(tmp: Path, seed: int, count: int, snapshot: Path) -> Iterator[Case]:
    """Mutated --nodepools files (the plan examples, Karpenter's v1 examples) through plan."""
    rng = random.Random(seed)
    seeds = nodepools_files()
    for index in range(count):
        name, documents = seeds[index % len(seeds)]
        target = rng.randrange(len(documents))
        mutated, what = mutate_many(documents[target], rng)
        path = tmp / f"nodepools-{index}.yaml"
        if _documents([*documents[:target], mutated, *documents[target + 1:]], path):
            yield f"{name} with {what}", ["plan", "--snapshot", str(snapshot), "--nodepools", str(path),
                                          "--json", "--horizon", "30m"]


def stack_cases(tmp: Path, seed: int, count: int, snapshot: Path) -> Iterator[Case]:
    """Mutated Pulumi stack files through ``plan --stack``."""
    rng = random.Random(seed)
    stacks = [(p.name, yaml.safe_load(p.read_text())) for p in sorted(REPO.glob("Pulumi.*.yaml"))]
    stacks = [(name, doc) for name, doc in stacks if "adze:nodePools" in (doc.get("config") or {})]
    for index in range(count):
        name, document = stacks[index % len(stacks)]
        mutated, what = mutate_many(document, rng)
        path = tmp / f"Pulumi.fuzz{index}.yaml"
        if _dump(mutated, path, rng):
            yield f"{name} with {what}", ["plan", "--snapshot", str(snapshot), "--stack", str(path), "--json",
                                          "--horizon", "30m"]


@pytest.fixture(scope="module")
def snapshot_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cluster") / "snapshot.yaml"
    path.write_text(yaml.safe_dump(cluster_snapshot()))
    return path


Family = Callable[[Path, int, int, Path], Iterator[Case]]
FAMILIES: dict[str, tuple[Family, int]] = {
    "snapshot": (lambda tmp, seed, count, _: snapshot_cases(tmp, seed, count), 160),
    "kubectl-dump": (lambda tmp, seed, count, _: dump_cases(tmp, seed, count), 120),
    "nodepools": (nodepools_cases, 120),
    "stack": (stack_cases, 60),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_mutated_cluster_inputs_run_or_fail_with_one_path_named_line(
    family: str, tmp_path: Path, snapshot_file: Path
) -> None:
    cases, count = FAMILIES[family]
    ran = errors = 0
    for what, argv in cases(tmp_path, 31, count * SCALE, snapshot_file):
        code, _, err = run_cli(argv)
        errors += check_outcome(code, err, what, ok=PLAN_OK if argv[0] == "plan" else (0,))
        ran += 1
    assert ran >= count * SCALE * 0.8  # the rest nest too deep to be written at all
    assert 0 < errors < ran, "the mutations should both break and keep valid some inputs"


def _family_input_errors(family: str, tmp_path: Path, snapshot_file: Path, wanted: int) -> list[Case]:
    """The family's first ``wanted`` input errors through the command's ``main``, each checked: exit 2, one
    line, nothing on stdout."""
    cases, _ = FAMILIES[family]
    sample = []
    for what, argv in cases(tmp_path, 47, 200, snapshot_file):
        code, out, err = run_cli(argv)
        if code == 2:
            assert out == "", (what, out)
            check_outcome(code, err, what)
            sample.append((what, argv))
        if len(sample) == wanted:
            break
    return sample


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_sample_of_each_family_exits_2_with_one_line_from_the_command(
    family: str, tmp_path: Path, snapshot_file: Path
) -> None:
    """Exit 2, one line, nothing on stdout: three input errors of the family through the command's ``main``."""
    assert len(_family_input_errors(family, tmp_path, snapshot_file, 3)) == 3


@pytest.mark.slow  # a Python start-up per family
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_an_input_error_of_each_family_through_a_real_process(
    family: str, tmp_path: Path, snapshot_file: Path
) -> None:
    [(what, argv)] = _family_input_errors(family, tmp_path, snapshot_file, 1)
    code, out, err = run_cli_process(argv)
    assert code == 2 and out == "", (what, code, err)
    check_outcome(code, err, what)


def _loaders(path: Path, snapshot: Path) -> dict[str, list[str]]:
    return {
        "scenario": ["simulate", str(path), "--json"],
        "snapshot": ["status", "--snapshot", str(path)],
        "nodepools": ["plan", "--snapshot", str(snapshot), "--nodepools", str(path), "--horizon", "30m"],
        "stack": ["plan", "--snapshot", str(snapshot), "--stack", str(path), "--horizon", "30m"],
    }


VALID_FILES = {
    "scenario": REPO / "tests" / "sim" / "regressions" / "expire-under-pdb.yaml",
    "snapshot": None,  # the snapshot fixture
    "nodepools": PLAN_EXAMPLES / "relabel-general.yaml",
    "stack": REPO / "Pulumi.dev.yaml",
}


def _garbage_outcomes(loader: str, tmp_path: Path, snapshot_file: Path) -> Iterator[tuple[str, list[str], int]]:
    """Each garbage variant of the loader's valid file through the command's ``main``, checked: (variant,
    argv, exit code)."""
    valid = (VALID_FILES[loader] or snapshot_file).read_bytes()
    rng = random.Random(loader)
    for variant, content in garbage(valid, rng):
        path = tmp_path / f"{variant}.yaml"
        path.write_bytes(content)
        argv = _loaders(path, snapshot_file)[loader]
        code, _, err = run_cli(argv)
        assert code in (0, 2, *(PLAN_OK if argv[0] == "plan" else ())), (variant, code, err[-2000:])
        check_outcome(code, err, f"{loader} file: {variant}", ok=PLAN_OK if argv[0] == "plan" else (0,))
        yield variant, argv, code


@pytest.mark.parametrize("loader", sorted(VALID_FILES))
def test_binary_garbage_in_every_loader_is_one_line_and_exit_2(
    loader: str, tmp_path: Path, snapshot_file: Path
) -> None:
    codes = [code for _, _, code in _garbage_outcomes(loader, tmp_path, snapshot_file)]
    assert 2 in codes, "no garbage variant was an input error"
    # A file that is not there, and a directory where a file belongs.
    for missing in (tmp_path / "missing.yaml", tmp_path):
        code, _, err = run_cli(_loaders(missing, snapshot_file)[loader])
        check_outcome(code, err, f"{loader}: {missing}")
        assert code == 2


@pytest.mark.slow  # a Python start-up per loader
@pytest.mark.parametrize("loader", sorted(VALID_FILES))
def test_binary_garbage_in_every_loader_through_a_real_process(
    loader: str, tmp_path: Path, snapshot_file: Path
) -> None:
    variant, argv = next((v, a) for v, a, code in _garbage_outcomes(loader, tmp_path, snapshot_file) if code == 2)
    code, out, err = run_cli_process(argv)
    assert code == 2 and out == "", (variant, code, err)
    check_outcome(code, err, f"{loader} file: {variant} (process)")


@pytest.mark.parametrize("clock", ["9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "2026-02-30T00:00:00Z",
                                   "yesterday", "", "10000-01-01T00:00:00Z"])
def test_odd_clocks_and_horizons_are_input_errors_or_run(clock: str, snapshot_file: Path) -> None:
    for argv in (["explain", "pod", "default/web-0", "--snapshot", str(snapshot_file), "--clock", clock],
                 ["status", "--snapshot", str(snapshot_file), "--clock", clock],
                 ["plan", "--snapshot", str(snapshot_file), "--nodepools", str(PLAN_EXAMPLES / "relabel-general.yaml"),
                  "--clock", clock, "--horizon", "1h"]):
        code, _, err = run_cli(argv)
        check_outcome(code, err, f"--clock {clock!r}", ok=PLAN_OK if argv[0] == "plan" else (0,))
    for horizon in ("-1h", "1e999h", "100000000h", "soon", "0s", "9999999h"):
        code, _, err = run_cli(["plan", "--snapshot", str(snapshot_file), "--nodepools",
                                str(PLAN_EXAMPLES / "relabel-general.yaml"), f"--horizon={horizon}"])
        check_outcome(code, err, f"--horizon {horizon!r}", ok=PLAN_OK)
