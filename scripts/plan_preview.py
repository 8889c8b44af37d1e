#!/usr/bin/env python3
"""The pull-request NodePool preview of one stack: snapshot its cluster, plan the stack's NodePools, write the comment.

    scripts/plan_preview.py --stack prod --cluster adze-prod --region us-east-1 --workdir "$RUNNER_TEMP"

Run by ``.github/workflows/pulumi-stack.yml``. Whatever happens, ``adze-comment.md`` (``--comment``) says it: the
plan's Markdown (exit 0, 3 pods left pending, 4 still changing at the horizon); that the cluster does not exist
yet; or, plainly, that the snapshot or the plan failed, with the error. So a new commit never keeps an earlier
commit's verdict. The status goes to ``$GITHUB_OUTPUT`` (``status=0|3|4|snapshot-failed|plan-failed``) and the
comment to ``$GITHUB_STEP_SUMMARY``. Exit: the plan's 0, 3 or 4 (the workflow comments first, then fails the
job on 3 and 4); 1 when the snapshot or the plan failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

Runner = Callable[[Sequence[str]], subprocess.CompletedProcess[str]]
PLAN_RESULTS = (0, 3, 4)  # 3: pods left unschedulable, 4: still changing at the horizon
ERROR_LINES = 20  # of a failed command's stderr, quoted in the comment


def run(command: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(command), capture_output=True, text=True, check=False)


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines[-ERROR_LINES:]) or "(no error output)"


def _failure(stack: str, what: str, done: subprocess.CompletedProcess[str]) -> str:
    return (f"#### Adze NodePool preview: stack `{stack}`\n\n:x: **The NodePool preview failed: {what}** "
            f"(exit {done.returncode}). No verdict for this commit; an earlier one no longer applies.\n\n"
            f"```\n{_tail(done.stderr)}\n```\n")


def preview(args: argparse.Namespace, runner: Runner = run) -> tuple[str, str]:
    """(status, the comment's Markdown)."""
    header = f"#### Adze NodePool preview: stack `{args.stack}`\n"
    if not args.cluster:
        return "0", f"{header}The cluster of {args.stack} does not exist yet: nothing to compare.\n"
    workdir = Path(args.workdir)
    kubeconfig, snapshot = str(workdir / "kubeconfig"), str(workdir / "snapshot.yaml")
    reconciler = [args.python, "-m", "reconciler"]
    done = runner(["aws", "eks", "update-kubeconfig", "--name", args.cluster, "--region", args.region,
                   "--kubeconfig", kubeconfig])
    if done.returncode != 0:
        return "snapshot-failed", _failure(args.stack, f"reading cluster {args.cluster}'s kubeconfig failed", done)
    # Real prices for the cluster's region from EC2 and the Pricing API with the job's credentials; when those
    # cannot be read, the bundled catalogue, and the comment says its prices are estimates.
    done = runner(["aws", "sts", "get-caller-identity"])
    if done.returncode == 0:
        done = runner([*reconciler, "snapshot", "--kubeconfig", kubeconfig, "--catalog", "live", "-o", snapshot])
    if done.returncode != 0:
        print(f"::warning::Adze NodePool preview for {args.stack}: live prices unavailable; using estimates")
        done = runner([*reconciler, "snapshot", "--kubeconfig", kubeconfig, "--catalog", "preset", "-o", snapshot])
    if done.returncode != 0:
        return "snapshot-failed", _failure(args.stack, f"taking a snapshot of cluster {args.cluster} failed", done)
    done = runner([*reconciler, "plan", "--snapshot", snapshot, "--stack", f"Pulumi.{args.stack}.yaml", "--markdown",
                   "--fail-on-pending", "--report", str(workdir / "adze-plan.html")])
    if done.returncode not in PLAN_RESULTS:
        return "plan-failed", _failure(args.stack, "the plan failed", done)
    return str(done.returncode), header + done.stdout


def main(argv: list[str] | None = None, runner: Runner = run) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", required=True)
    parser.add_argument("--cluster", default="", help="the stack's cluster name (empty: not created yet)")
    parser.add_argument("--region", default=os.environ.get("AWS_REGION", ""))
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--comment", default="adze-comment.md")
    parser.add_argument("--python", default=sys.executable, help="the interpreter that has the reconciler")
    args = parser.parse_args(argv)
    status, comment = preview(args, runner)
    Path(args.comment).write_text(comment)
    for variable, text in (("GITHUB_STEP_SUMMARY", comment), ("GITHUB_OUTPUT", f"status={status}\n")):
        if os.environ.get(variable):
            with open(os.environ[variable], "a") as file:
                file.write(text)
    print(comment)
    return int(status) if status.isdigit() else 1


if __name__ == "__main__":
    raise SystemExit(main())
