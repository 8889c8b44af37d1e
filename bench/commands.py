"""End-to-end benchmark of the commands users run: process start to output written.

    .venv/bin/python bench/commands.py                   # simulate 1,000/5,000 pods; 50/300-node snapshots
    .venv/bin/python bench/commands.py --quick           # simulate 1,000 pods; 50-node snapshot
    .venv/bin/python bench/commands.py --pods 20000 --nodes 1000 5000   # bigger (minutes)

Each command runs as its own ``python -m reconciler ...`` process, as a user types it; the figures are
that process's wall time, CPU time (user + system) and peak RSS, read with ``wait4``. Inputs are built
beforehand and not timed:

- ``simulate``: a scenario on the bundled aws-us-east-1 catalogue (NodePool of on-demand and spot c/m/r,
  generation > 5) with Deployments totalling ``--pods`` pods of mixed sizes (Karpenter's benchmark mix of
  100m-1.5 CPU and 100Mi-4Gi), one ``provision`` step; ``--json --out`` writes the result document.
- snapshot commands: ``bench/plan.py``'s cluster (one 3-CPU pod per node plus gap fillers and a DaemonSet)
  at ``--nodes`` nodes, written by ``reconciler snapshot`` as ``kubectl get -A -o yaml``-style YAML; then
  ``status``, ``explain pod``, ``explain node`` and ``plan`` with the relabel, allow-spot and no-op changes;
  ``status`` once more on the same snapshot written as JSON.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from plan import CHANGES, cluster  # noqa: E402 - the plan benchmark's cluster and changes

CPUS = ("100m", "250m", "500m", "1", "1500m")
MEMORIES = ("100Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi")
WORKLOADS = 20


def simulate_scenario(pods: int) -> dict[str, Any]:
    rng = random.Random(pods)
    per_workload, extra = divmod(pods, WORKLOADS)
    deployments = []
    for index in range(WORKLOADS):
        name = f"app-{index:02d}"
        requests = {"cpu": rng.choice(CPUS), "memory": rng.choice(MEMORIES)}
        deployments.append({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": per_workload + (1 if index < extra else 0), "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "x",
                                                           "resources": {"requests": requests}}]}}},
        })
    pool = {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
                {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
                {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["5"]},
            ]}}},
    }
    return {"name": f"bench-simulate-{pods}", "settings": {"clock": "2026-01-05T10:00:00Z"},
            "catalog": {"preset": "aws-us-east-1"}, "objects": [pool, *deployments], "steps": [{"provision": {}}]}


def measured(argv: list[str]) -> tuple[float, float, float, int]:
    """(wall s, CPU s, peak RSS MB, exit code) of one ``python -m reconciler`` process."""
    with tempfile.TemporaryFile() as errors:
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "reconciler", *argv], cwd=REPO,
                                   env={**os.environ, "PYTHONPATH": str(REPO)},
                                   stdout=subprocess.DEVNULL, stderr=errors)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        code = os.waitstatus_to_exitcode(status)
        process.returncode = code
        if code not in (0, 3, 4):
            errors.seek(0)
            sys.exit(f"{' '.join(argv)}: exit {code}: {errors.read().decode()[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, code


def row(command: str, size: str, argv: list[str]) -> None:
    wall, cpu, rss, code = measured(argv)
    note = "" if code == 0 else f"  (exit {code})"
    print(f"{command:<22} {size:>12} {wall:>9.2f} {cpu:>9.2f} {rss:>9.0f}{note}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, nargs="*", default=None, help="simulate sizes (default 1000 5000)")
    parser.add_argument("--nodes", type=int, nargs="*", default=None, help="snapshot sizes (default 50 300)")
    parser.add_argument("--quick", action="store_true", help="simulate 1,000 pods and a 50-node snapshot")
    args = parser.parse_args()
    pod_sizes = args.pods if args.pods is not None else ([1000] if args.quick else [1000, 5000])
    node_sizes = args.nodes if args.nodes is not None else ([50] if args.quick else [50, 300])
    print(f"{'command':<22} {'size':>12} {'wall s':>9} {'cpu s':>9} {'peak MB':>9}")
    with tempfile.TemporaryDirectory(prefix="adze-bench-") as folder:
        work = Path(folder)
        for pods in pod_sizes:
            scenario = work / f"simulate-{pods}.yaml"
            scenario.write_text(yaml.safe_dump(simulate_scenario(pods), sort_keys=False))
            row("simulate --json --out", f"{pods} pods", ["simulate", str(scenario), "--json",
                                                          "--out", str(work / "result.json")])
        for name, manifests in CHANGES.items():
            (work / f"{name}.yaml").write_text(yaml.safe_dump_all(manifests))
        for nodes in node_sizes:
            source, snapshot = work / f"cluster-{nodes}.yaml", work / f"snapshot-{nodes}.yaml"
            source.write_text(yaml.safe_dump(cluster(nodes), sort_keys=False))
            subprocess.run([sys.executable, "-m", "reconciler", "snapshot", "--scenario", str(source), "-o",
                            str(snapshot)], check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                           capture_output=True)
            objects = yaml.safe_load(snapshot.read_text())["objects"]
            node = next(o["metadata"]["name"] for o in objects if o["kind"] == "Node")
            pod = next(f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in objects if o["kind"] == "Pod")
            size = f"{nodes} nodes"
            as_json = work / f"snapshot-{nodes}.json"
            subprocess.run([sys.executable, "-m", "reconciler", "snapshot", "--from", str(snapshot), "-o",
                            str(as_json)], check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                           capture_output=True)
            row("status", size, ["status", "--snapshot", str(snapshot)])
            row("status (JSON snapshot)", size, ["status", "--snapshot", str(as_json)])
            row("explain pod", size, ["explain", "pod", pod, "--snapshot", str(snapshot)])
            row("explain node", size, ["explain", "node", node, "--snapshot", str(snapshot)])
            for name in CHANGES:
                row(f"plan ({name})", size, ["plan", "--snapshot", str(snapshot), "--nodepools",
                                             str(work / f"{name}.yaml"), "--json"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
