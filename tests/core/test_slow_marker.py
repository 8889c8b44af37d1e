"""The ``slow`` marker: registered, and on every end-to-end test, so ``pytest -m "not slow"`` is the fast set."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_slow_is_a_registered_marker() -> None:
    markers = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    assert any(m.startswith("slow:") for m in markers)


def collected(*args: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-p", "no:cacheprovider", *args],  # addopts -q lists ids
        cwd=REPO, capture_output=True, text=True, timeout=120,
    ).stdout
    return [line for line in out.splitlines() if "::" in line]


def test_every_end_to_end_test_is_slow_and_the_crash_loops_too() -> None:
    everything = collected("tests/e2e")
    assert everything and collected("tests/e2e", "-m", "slow") == everything
    assert collected("tests/e2e", "-m", "not slow") == []
    crash_loops = collected("tests/cloud/aws/test_aws_crash_matrix.py", "tests/controllers/test_ctrl_crash.py",
                            "-m", "slow")
    assert len(crash_loops) == 2
