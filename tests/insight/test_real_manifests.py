"""``plan``, ``explain`` and ``status`` over real published manifests (``tests/data/real``): Karpenter's own
examples and aws-samples/karpenter-blueprints, used as published (workloads scaled as ``kubectl scale``
would). A cluster is built from them in the simulator on the real aws-us-east-1 catalogue and snapshotted;
each command must finish, print no traceback, open with its verdict, exit with the documented code, and
merge the given NodePools over the cluster's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from insight_support import REPO, write_snapshot

pytestmark = pytest.mark.slow  # CLI processes over the published manifests

REAL = REPO / "tests" / "data" / "real"
EXAMPLES = REAL / "karpenter-examples"
BLUEPRINTS = REAL / "karpenter-blueprints"
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
VERDICT = re.compile(r"^(SAFE|REVIEW|BLOCKED): \S")


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def cluster(name: str, files: list[Path], scale: dict[str, int], skip: set[tuple[str, str]] = frozenset()) -> dict:
    """A scenario holding the manifests (minus ``skip`` (kind, name) duplicates), deployments scaled, provisioned."""
    objects = []
    for path in files:
        for document in documents(path):
            key = (document["kind"], document["metadata"]["name"])
            if key in skip:
                continue
            if document["kind"] == "Deployment" and key[1] in scale:
                document["spec"]["replicas"] = scale[key[1]]
            objects.append(document)
    return {
        "name": name,
        "settings": {"clock": "2026-01-05T10:00:00Z"},
        "catalog": {"preset": "aws-us-east-1", "zones": ["us-east-1a", "us-east-1b", "us-east-1c"]},
        "objects": objects,
        "steps": [{"provision": {}}],
    }


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "reconciler", *argv], cwd=REPO, env=ENV, capture_output=True,
                          text=True, timeout=180)
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.fixture(scope="module")
def examples_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    document = cluster(
        "karpenter-examples",
        [EXAMPLES / "v1/general-purpose.yaml", EXAMPLES / "v1/multiple-arch.yaml", EXAMPLES / "workloads/inflate.yaml",
         EXAMPLES / "workloads/arm64.yaml", EXAMPLES / "workloads/disruption-budget.yaml",
         EXAMPLES / "workloads/spread-zone.yaml", EXAMPLES / "workloads/gpu-nvidia.yaml"],
        scale={"inflate": 4, "arm64": 2, "zone-spread": 3, "gpu-nvidia": 1},
        skip={("EC2NodeClass", "default")},  # each v1 file repeats the class: it is added once, below
    )
    [default_class] = [d for d in documents(EXAMPLES / "v1/general-purpose.yaml") if d["kind"] == "EC2NodeClass"]
    document["objects"].insert(0, default_class)
    return write_snapshot(tmp_path_factory.mktemp("examples"), document)


@pytest.fixture(scope="module")
def blueprints_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    document = cluster(
        "karpenter-blueprints",
        [BLUEPRINTS / "od-spot-split/od-spot.yaml", BLUEPRINTS / "disruption-budgets/disruption-budgets.yaml",
         BLUEPRINTS / "od-spot-split/workload.yaml", BLUEPRINTS / "disruption-budgets/workload.yaml",
         BLUEPRINTS / "graviton/workload-graviton.yaml"],
        scale={"disruption-budget": 12},
    )
    # od-spot.yaml's pools use the blueprints' "default" EC2NodeClass (cluster-default.yaml).
    document["objects"] += [d for d in documents(BLUEPRINTS / "cluster-default.yaml") if d["kind"] == "EC2NodeClass"]
    return write_snapshot(tmp_path_factory.mktemp("blueprints"), document)


def plan(snapshot: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``plan`` as text, checked for its verdict line and exit code, and its JSON document."""
    text = run("plan", "--snapshot", str(snapshot), *args)
    as_json = run("plan", "--snapshot", str(snapshot), *args, "--json")
    assert as_json.returncode == text.returncode, (text.stderr, as_json.stderr)
    document = json.loads(as_json.stdout)
    assert VERDICT.match(text.stdout), text.stdout[:300]
    expected = 4 if document["proposed"]["horizonReached"] else (
        3 if "--fail-on-pending" in args and document["unschedulable"]["new"] else 0)
    assert text.returncode == expected, text.stderr
    state = text.stdout.split(":")[0]
    assert (state == "BLOCKED") == bool(document["proposed"]["horizonReached"] or document["unschedulable"]["new"])
    return text, document


def pools(snapshot: Path) -> set[str]:
    return {o["metadata"]["name"] for o in yaml.safe_load(snapshot.read_text())["objects"] if o["kind"] == "NodePool"}


def test_examples_cluster_status_and_explain(examples_snapshot: Path) -> None:
    status = run("status", "--snapshot", str(examples_snapshot))
    assert status.returncode == 0 and re.match(r"^\S.*\n\d+ nodes  cpu ", status.stdout)
    nodes = json.loads(run("status", "--snapshot", str(examples_snapshot), "--json").stdout)["nodes"]
    assert nodes and {n["nodepool"] for n in nodes} >= {"general-purpose", "arm64"}
    assert {n["arch"] for n in nodes if n["nodepool"] == "arm64"} == {"arm64"}
    objects = yaml.safe_load(examples_snapshot.read_text())["objects"]
    pods = [o for o in objects if o["kind"] == "Pod" and o["metadata"]["namespace"] == "default"]
    for workload in ("inflate", "arm64", "gpu-nvidia"):
        pod = next(p for p in pods if p["metadata"]["name"].startswith(workload))
        explained = run("explain", "pod", f"default/{pod['metadata']['name']}", "--snapshot", str(examples_snapshot))
        assert explained.returncode == 0 and explained.stdout.startswith(f"Pod default/{pod['metadata']['name']}")
    # The GPU workload has no NodePool offering nvidia.com/gpu: pending, and explain says why.
    gpu = next(p for p in pods if p["metadata"]["name"].startswith("gpu-nvidia"))
    assert "nvidia.com/gpu" in run("explain", "pod", f"default/{gpu['metadata']['name']}", "--snapshot",
                                   str(examples_snapshot)).stdout
    node = run("explain", "node", nodes[0]["name"], "--snapshot", str(examples_snapshot))
    assert node.returncode == 0 and nodes[0]["name"] in node.stdout.splitlines()[0]


def test_examples_adding_a_published_pool_merges_over_the_cluster(examples_snapshot: Path) -> None:
    _, document = plan(examples_snapshot, "--nodepools", str(EXAMPLES / "v1/spot.yaml"))
    changes = {c["name"]: c["change"] for c in document["nodepools"]}
    assert changes["spot"] == "added"
    assert {name for name, change in changes.items() if change == "unchanged"} == pools(examples_snapshot)
    assert document["unschedulable"]["new"] == {}
    # Several files at once, and a directory, merge the same way.
    _, both = plan(examples_snapshot, "--nodepools", str(EXAMPLES / "v1/spot.yaml"), "--nodepools",
                   str(EXAMPLES / "v1/100-cpu-limit.yaml"))
    assert {c["name"] for c in both["nodepools"] if c["change"] == "added"} == {"spot", "limitcpu100"}
    # The whole v1 directory: its files repeat EC2NodeClass "default" (identical: merged), but two of them
    # declare different NodePools named "default", which cannot both be applied.
    whole = run("plan", "--snapshot", str(examples_snapshot), "--nodepools", str(EXAMPLES / "v1"))
    assert whole.returncode == 2 and "NodePool 'default' is declared differently in" in whole.stderr
    assert len(whole.stderr.strip().splitlines()) == 1


def test_examples_removing_the_arm64_pool_strands_its_pods_and_fails_the_job(examples_snapshot: Path) -> None:
    text, document = plan(examples_snapshot, "--remove", "arm64", "--fail-on-pending")
    assert text.returncode == 3
    assert text.stdout.startswith("BLOCKED: 2 pod(s) would become unschedulable (default/Deployment/arm64 x2)")
    markdown = run("plan", "--snapshot", str(examples_snapshot), "--remove", "arm64", "--fail-on-pending", "--markdown")
    assert markdown.returncode == 3
    assert markdown.stdout.startswith(
        ":no_entry: **BLOCKED**: 2 pod(s) would become unschedulable (default/Deployment/arm64 x2)"
    )
    assert {c["name"]: c["change"] for c in document["nodepools"]}["arm64"] == "removed"


def test_examples_replace_all_with_one_published_file_removes_the_rest(examples_snapshot: Path) -> None:
    _, document = plan(examples_snapshot, "--nodepools", str(EXAMPLES / "v1/max-node-lifetime.yaml"),
                       "--replace-all")
    changes = {c["name"]: c["change"] for c in document["nodepools"]}
    assert changes == {**{name: "removed" for name in pools(examples_snapshot)}, "default": "added"}
    assert any(p.startswith("default/arm64-") for p in document["unschedulable"]["new"])  # amd64-only pool


def test_blueprints_cluster_and_plans(blueprints_snapshot: Path) -> None:
    status = run("status", "--snapshot", str(blueprints_snapshot))
    assert status.returncode == 0 and "node-od" in status.stdout and "node-spot" in status.stdout
    # The graviton workload wants intent=apps on arm64, which no pool of this cluster offers; some split pods
    # wait too (limits are checked against the largest type a NodeClaim could launch, as Karpenter does).
    pending = json.loads(run("status", "--snapshot", str(blueprints_snapshot), "--json").stdout)["pendingPods"]
    assert pending >= 5
    why = run("explain", "pod", "default/workload-graviton-0", "--snapshot", str(blueprints_snapshot))
    assert why.returncode == 0 and "cannot be scheduled" in why.stdout.splitlines()[0]

    # The Auto Mode variant of a pool points at EKS's own NodeClass: not Ready, launches nothing, said first.
    text, document = plan(blueprints_snapshot, "--nodepools",
                          str(BLUEPRINTS / "disruption-budgets/disruption-budgets-automode.yaml"))
    assert text.stdout.startswith("REVIEW: NodePool disruption-budget is not Ready: its nodeClassRef "
                                  "eks.amazonaws.com/NodeClass disruption-budget belongs to another provider")
    # Its nodes drift (new nodeClassRef) but cannot be replaced, and its budget (nodes 0, daily for 24h) never
    # opens: they stay, reported as stuck, not as "still changing at the horizon".
    assert document["proposed"]["horizonReached"] is False
    assert {s["nodepool"] for s in document["stuckDrift"]} == {"disruption-budget"}
    assert "another provider" in document["notReadyNodePools"]["disruption-budget"]
    pool = "disruption-budget"
    assert document["proposed"]["byNodePool"][pool]["nodes"] == document["current"]["byNodePool"][pool]["nodes"]
    assert not [m for m in document["proposed"]["nodeMix"] if m["nodepool"] == pool and m["instanceType"] not in
                {n["instanceType"] for n in document["current"]["nodeMix"] if n["nodepool"] == pool}]

    # Removing the spot half of the on-demand/spot split.
    text, document = plan(blueprints_snapshot, "--remove", "node-spot", "--fail-on-pending")
    assert {c["name"]: c["change"] for c in document["nodepools"]}["node-spot"] == "removed"
    assert document["removedNodes"]


def test_a_published_v1_pool_with_a_field_v1_dropped_is_rejected_with_its_path(blueprints_snapshot: Path) -> None:
    """The blueprints' default NodePool still carries v1beta1's ``spec.template.spec.kubelet`` (v1 moved it to
    the EC2NodeClass); like ``kubectl apply`` with its default strict validation, plan names the field."""
    done = run("plan", "--snapshot", str(blueprints_snapshot), "--nodepools", str(BLUEPRINTS / "cluster-default.yaml"))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (f"error: {BLUEPRINTS / 'cluster-default.yaml'}: NodePool default: "
                                   "spec.template.spec.kubelet: unknown field")
