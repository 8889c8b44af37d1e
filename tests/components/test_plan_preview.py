"""`scripts/plan_preview.py`: the pull-request NodePool preview writes a comment whatever happens, saying plainly
when the snapshot or the plan failed (with the error), so an earlier commit's verdict never stays standing.

The AWS CLI and the reconciler are stood in for by a runner that answers each command as scripted."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import pytest
from pulumi_harness import REPO_ROOT


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("plan_preview", REPO_ROOT / "scripts" / "plan_preview.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Scripted:
    """Answers a command by the first (word, exit code, stdout, stderr) whose word is in it."""

    def __init__(self, *answers: tuple[str, int, str, str]) -> None:
        self.answers = answers
        self.commands: list[list[str]] = []

    def __call__(self, command: Sequence[str]) -> subprocess.CompletedProcess[str]:
        self.commands.append(list(command))
        joined = " ".join(command)
        for word, code, out, err in self.answers:
            if word in joined:
                return subprocess.CompletedProcess(list(command), code, out, err)
        return subprocess.CompletedProcess(list(command), 0, "", "")


def preview(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runner: Scripted, cluster: str = "adze-prod"
            ) -> tuple[int, str, str]:
    output = tmp_path / "output"
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary"))
    comment = tmp_path / "adze-comment.md"
    code = script().main(["--stack", "prod", "--cluster", cluster, "--region", "us-east-1", "--workdir",
                          str(tmp_path), "--comment", str(comment), "--python", sys.executable], runner)
    return code, comment.read_text(), output.read_text()


def test_a_plan_is_commented_with_its_exit_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = Scripted((" plan ", 3, ":no_entry: **BLOCKED**: 2 pod(s) would become unschedulable\n", ""))
    code, comment, output = preview(tmp_path, monkeypatch, runner)
    assert (code, output) == (3, "status=3\n")
    assert comment == ("#### Adze NodePool preview: stack `prod`\n"
                       ":no_entry: **BLOCKED**: 2 pod(s) would become unschedulable\n")
    plan = next(c for c in runner.commands if "plan" in c)
    assert plan[plan.index("--stack") + 1] == "Pulumi.prod.yaml" and "--fail-on-pending" in plan
    assert any("--catalog" in c and "live" in c for c in runner.commands)  # live prices first


def test_a_failed_snapshot_says_so_with_the_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = Scripted((" snapshot ", 1, "", "error: reading the cluster failed: 403 Forbidden: nodes is forbidden\n"))
    code, comment, output = preview(tmp_path, monkeypatch, runner)
    assert (code, output) == (1, "status=snapshot-failed\n")
    assert comment.startswith("#### Adze NodePool preview: stack `prod`\n\n:x: **The NodePool preview failed: taking a "
                              "snapshot of cluster adze-prod failed** (exit 1). No verdict for this commit")
    assert "403 Forbidden: nodes is forbidden" in comment
    assert [c for c in runner.commands if "plan" in c] == []
    # Both the live-priced and the estimated snapshot were tried.
    assert [c[c.index("--catalog") + 1] for c in runner.commands if "snapshot" in c] == ["live", "preset"]


def test_estimates_when_live_prices_are_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = Scripted(("sts get-caller-identity", 255, "", "Unable to locate credentials"),
                      (" plan ", 0, ":white_check_mark: **SAFE**\n", ""))
    code, comment, _ = preview(tmp_path, monkeypatch, runner)
    assert code == 0 and "SAFE" in comment
    assert [c[c.index("--catalog") + 1] for c in runner.commands if "snapshot" in c] == ["preset"]


def test_a_failed_plan_says_so_with_the_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = Scripted((" plan ", 2, "", "error: Pulumi.prod.yaml: adze:nodePools[0].template: required field\n"))
    code, comment, output = preview(tmp_path, monkeypatch, runner)
    assert (code, output) == (1, "status=plan-failed\n")
    assert ":x: **The NodePool preview failed: the plan failed** (exit 2)" in comment
    assert "adze:nodePools[0].template: required field" in comment


def test_no_cluster_yet_is_said_and_succeeds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = Scripted()
    code, comment, output = preview(tmp_path, monkeypatch, runner, cluster="")
    assert (code, output) == (0, "status=0\n") and "does not exist yet: nothing to compare" in comment
    assert runner.commands == []
