"""Offline commands stop within a second on SIGINT/SIGTERM with exit 130/143 and one line (issue 15):
`plan` against the dev stack on the example snapshot runs for minutes, so it is interrupted mid-plan."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("snap") / "snapshot.yaml"
    subprocess.run([sys.executable, "-m", "reconciler", "snapshot", "--scenario",
                    str(REPO / "examples/plan/cluster.yaml"), "-o", str(path)],
                   check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True)
    return path


@pytest.mark.parametrize(("sent", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_plan_stops_within_a_second_of_a_signal(snapshot: Path, sent: int, code: int) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "plan", "--snapshot", str(snapshot), "--stack",
         str(REPO / "Pulumi.dev.yaml"), "--json"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    time.sleep(4)  # well into planning (start-up and snapshot load take about a second)
    assert process.poll() is None, "plan finished before it could be interrupted"
    sent_at = time.monotonic()
    process.send_signal(sent)
    stdout, stderr = process.communicate(timeout=30)
    assert time.monotonic() - sent_at < 1.0
    assert process.returncode == code
    assert stderr.strip().splitlines()[-1] == f"interrupted by {signal.Signals(sent).name}: stopped before writing " \
                                               "any result"
    assert stdout == ""
