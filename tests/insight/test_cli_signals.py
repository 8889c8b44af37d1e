"""Offline commands stop within a second on SIGINT/SIGTERM with exit 130/143 and one line (issue 15):
`plan` of allowing spot on the 300-node benchmark cluster with --baseline (drift, consolidation and a
second run to stability) runs for about 4.5 s on 2 cores, so it is interrupted mid-plan."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from plan import CHANGES, cluster  # noqa: E402 - the benchmark's cluster and changes


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("snap")
    scenario, path, change = folder / "cluster.yaml", folder / "snapshot.yaml", folder / "change.yaml"
    scenario.write_text(yaml.safe_dump(cluster(300)))
    change.write_text(yaml.safe_dump_all(CHANGES["spot"]))
    subprocess.run([sys.executable, "-m", "reconciler", "snapshot", "--scenario", str(scenario), "-o", str(path)],
                   check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True)
    return path, change


@pytest.mark.parametrize(("sent", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_plan_stops_within_a_second_of_a_signal(snapshot: tuple[Path, Path], sent: int, code: int) -> None:
    cluster_snapshot, change = snapshot
    process = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "plan", "--snapshot", str(cluster_snapshot), "--nodepools",
         str(change), "--baseline", "--json"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    time.sleep(2.5)  # past start-up (about 0.5 s) and snapshot load (about 1 s), well before the result
    assert process.poll() is None, "plan finished before it could be interrupted"
    sent_at = time.monotonic()
    process.send_signal(sent)
    stdout, stderr = process.communicate(timeout=30)
    assert time.monotonic() - sent_at < 1.0
    assert process.returncode == code
    assert stderr.strip().splitlines()[-1] == f"interrupted by {signal.Signals(sent).name}: stopped before writing " \
                                               "any result"
    assert stdout == ""
