"""Offline commands stop within a second on SIGINT/SIGTERM with exit 130/143 and one line, also when the signal
comes during start-up (issue 15); here
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

pytestmark = pytest.mark.slow  # CLI processes interrupted by signals


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


@pytest.fixture(scope="module")
def big_scenario(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20,000 pods on the aws-us-east-1 catalogue: simulate takes about 10 s on 2 cores."""
    from commands import simulate_scenario  # bench/commands.py

    path = tmp_path_factory.mktemp("sim") / "big.yaml"
    path.write_text(yaml.safe_dump(simulate_scenario(20000), sort_keys=False))
    return path


def _interrupted(argv: list[str], sent: int, after: float) -> tuple[int, str, str, float]:
    process = subprocess.Popen([sys.executable, "-m", "reconciler", *argv], cwd=REPO,
                               env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    time.sleep(after)
    assert process.poll() is None, "the command finished before it could be interrupted"
    sent_at = time.monotonic()
    process.send_signal(sent)
    stdout, stderr = process.communicate(timeout=30)
    return process.returncode, stdout, stderr, time.monotonic() - sent_at


@pytest.mark.parametrize(("command", "sent", "code"), [
    ("simulate", signal.SIGINT, 130), ("simulate", signal.SIGTERM, 143),
    ("snapshot", signal.SIGINT, 130), ("snapshot", signal.SIGTERM, 143),
])
def test_simulate_and_snapshot_stop_within_a_second_of_a_signal(big_scenario: Path, command: str, sent: int,
                                                                  code: int) -> None:
    argv = ["simulate", str(big_scenario), "--json"] if command == "simulate" else \
        ["snapshot", "--scenario", str(big_scenario)]
    returncode, stdout, stderr, took = _interrupted(argv, sent, after=2.5)
    assert took < 1.0
    assert returncode == code
    assert stderr.strip().splitlines()[-1] == f"interrupted by {signal.Signals(sent).name}: stopped before " \
                                              "writing any result"
    assert "Traceback" not in stderr and stdout == ""


def _interrupt_once_importing(argv: list[str], module_prefix: str, env: dict[str, str] | None = None
                              ) -> tuple[int, str]:
    """SIGINT while the command imports ``module_prefix`` (seen through ``-X importtime``), i.e. mid start-up."""
    process = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "reconciler", *argv], cwd=REPO,
                               env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    seen: list[str] = []
    for line in process.stderr:
        seen.append(line)
        if line.rsplit("|", 1)[-1].strip().startswith(module_prefix):
            break
    process.send_signal(signal.SIGINT)
    rest = process.stderr.read()
    process.wait(timeout=30)
    lines = [line for line in [*seen, *rest.splitlines(keepends=True)] if not line.startswith("import time:")]
    return process.returncode, "".join(lines)


def test_an_interrupt_during_start_up_ends_plan_with_one_line_not_a_traceback() -> None:
    # reconciler.insight.* is imported while the parser is built, the slowest part of start-up.
    returncode, stderr = _interrupt_once_importing(["plan", "--snapshot", "missing.yaml"], "reconciler.insight")
    assert returncode == 130, stderr
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == "interrupted by SIGINT: stopped before writing any result"


def test_an_interrupt_during_start_up_ends_run_with_one_line_not_a_traceback() -> None:
    env = {"CLUSTER_NAME": "c", "AWS_REGION": "us-east-1", "KUBECONFIG": "/nonexistent"}
    returncode, stderr = _interrupt_once_importing(["run"], "reconciler.controllers", env)
    assert returncode == 130, stderr
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == "interrupted by SIGINT during start-up"
