"""End-to-end benchmark of the commands users run: process start to output written.

    .venv/bin/python bench/commands.py                 # everything issue 14 asks for (an hour or more)
    .venv/bin/python bench/commands.py --quick         # simulate 1,000 pods; a 50-node cluster
    .venv/bin/python bench/commands.py --pods 5000 --nodes 1000 --only load status plan-spot
    .venv/bin/python bench/commands.py --inputs /tmp/adze-bench   # keep (and reuse) the built inputs there

Each command runs as its own ``python -m reconciler ...`` process, as a user types it; the figures are
that process's wall time, CPU time (user + system) and peak RSS, read with ``wait4``. The reconciler's
bytecode is compiled beforehand and cached, as an installed package's is. Inputs are built beforehand and
not timed:

- ``simulate``: a scenario on the bundled aws-us-east-1 catalogue (NodePool of on-demand and spot c/m/r,
  generation > 5) with Deployments totalling ``--pods`` pods of mixed sizes (Karpenter's benchmark mix of
  100m-1.5 CPU and 100Mi-4Gi), one ``provision`` step; ``--json --out`` writes the result document.
- snapshot commands: ``bench/plan.py``'s cluster (one 3-CPU pod per node plus gap fillers and a DaemonSet)
  at ``--nodes`` nodes, snapshotted by ``reconciler snapshot`` and written as a ``kubectl get -A -o yaml``
  List dump with what a real API server adds (``bench/kubectl_dump.py``); the same dump as ``-o json``
  too. ``load`` is what every snapshot command does before its own work (read, parse, sanitize and
  validate the dump, load the in-memory API server and the cluster state), as a process of its own
  (``bench/commands.py load FILE``); then ``status``, ``explain pod``, ``explain node`` and ``plan`` with
  the relabel, allow-spot and no-op changes, all on the YAML dump; ``load``, ``status`` and ``explain``
  also on the JSON dump (the ``-json`` rows).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))

from kubectl_dump import kubectl_dump  # noqa: E402 - bench modules, run as scripts
from measure import measured as measure_command  # noqa: E402
from plan import CHANGES, cluster  # noqa: E402

CPUS = ("100m", "250m", "500m", "1", "1500m")
MEMORIES = ("100Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi")
WORKLOADS = 20
ROWS = ("simulate", "load", "load-json", "status", "status-json", "explain-pod", "explain-node", "explain-pod-json",
        "explain-node-json",
        *(f"plan-{name}" for name in CHANGES))
# Bytecode cached as an installed package has it (`pip install` compiles; a PYTHONDONTWRITEBYTECODE environment
# would otherwise make every measured process compile the reconciler's sources again, ~0.25 s).
ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "PYTHONPATH": str(REPO)}


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
    """(wall s, CPU s, peak RSS MB, exit code) of one process (bench/measure.py: started by a small launcher, so
    its peak RSS is its own, not this benchmark's)."""
    wall, cpu, peak, code, errors = measure_command(argv, cwd=REPO, env=ENV)
    if code not in (0, 3, 4):
        sys.exit(f"{' '.join(argv)}: exit {code}: {errors[-500:]}")
    return wall, cpu, peak, code


def row(command: str, size: str, argv: list[str]) -> None:
    wall, cpu, rss, code = measured(argv)
    note = "" if code == 0 else f"  (exit {code})"
    print(f"{command:<24} {size:>12} {wall:>9.2f} {cpu:>9.2f} {rss:>9.0f}{note}", flush=True)


def reconciler(*argv: str) -> list[str]:
    return [sys.executable, "-m", "reconciler", *argv]


def snapshot_inputs(work: Path, nodes: int) -> tuple[Path, Path, str, str]:
    """The cluster's kubectl dump as YAML and JSON (built once per folder), a node and a pod to explain."""
    dump, as_json = work / f"dump-{nodes}.yaml", work / f"dump-{nodes}.json"
    if not as_json.exists():
        source, snapshot = work / f"cluster-{nodes}.yaml", work / f"snapshot-{nodes}.json"
        source.write_text(yaml.safe_dump(cluster(nodes), sort_keys=False))
        subprocess.run(reconciler("snapshot", "--scenario", str(source), "-o", str(snapshot)), check=True, cwd=REPO,
                       env=ENV, capture_output=True)
        document = kubectl_dump(json.loads(snapshot.read_text()))
        dump.write_text(yaml.dump(document, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False))
        as_json.write_text(json.dumps(document, indent=4))  # kubectl -o json indents by 4
    items = json.loads(as_json.read_text())["items"]
    node = next(o["metadata"]["name"] for o in items if o["kind"] == "Node")
    pod = next(f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in items
               if o["kind"] == "Pod" and o["metadata"]["name"].startswith("big-"))
    return dump, as_json, node, pod


def load_only(path: str) -> int:
    """What every snapshot command does first: read and validate the file, load the simulated cluster."""
    import asyncio

    from reconciler.collector import skip_final_collection, tune_for_one_shot_command
    from reconciler.insight.frames import RecordingSimulation
    from reconciler.insight.sources import load_snapshot

    tune_for_one_shot_command()  # as the command line does for every offline command
    snapshot = load_snapshot(path)
    sim = RecordingSimulation(snapshot.scenario(), frames=False)
    asyncio.run(sim.load())
    skip_final_collection()
    return 0


def main() -> int:
    if sys.argv[1:2] == ["load"]:
        return load_only(sys.argv[2])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, nargs="*", default=None, help="simulate sizes (default 1000 5000 20000)")
    parser.add_argument("--nodes", type=int, nargs="*", default=None, help="cluster sizes (default 50 300 1000 5000)")
    parser.add_argument("--quick", action="store_true", help="simulate 1,000 pods and a 50-node cluster")
    parser.add_argument("--only", nargs="*", choices=ROWS, help="only these rows")
    parser.add_argument("--inputs", metavar="DIR", help="build the inputs here and reuse them on the next run")
    args = parser.parse_args()
    pod_sizes = args.pods if args.pods is not None else ([1000] if args.quick else [1000, 5000, 20000])
    node_sizes = args.nodes if args.nodes is not None else ([50] if args.quick else [50, 300, 1000, 5000])
    wanted = set(args.only or ROWS)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "reconciler")], check=True, env=ENV)
    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, libyaml {hasattr(yaml, 'CSafeLoader')}")
    print(f"{'command':<24} {'size':>12} {'wall s':>9} {'cpu s':>9} {'peak MB':>9}")
    with tempfile.TemporaryDirectory(prefix="adze-bench-") as folder:
        work = Path(args.inputs or folder)
        work.mkdir(parents=True, exist_ok=True)
        for pods in pod_sizes if "simulate" in wanted else []:
            scenario = work / f"simulate-{pods}.yaml"
            scenario.write_text(yaml.safe_dump(simulate_scenario(pods), sort_keys=False))
            row("simulate --json --out", f"{pods} pods", reconciler("simulate", str(scenario), "--json", "--out",
                                                                    str(work / "result.json")))
        for name, manifests in CHANGES.items():
            (work / f"{name}.yaml").write_text(yaml.safe_dump_all(manifests))
        for nodes in node_sizes if wanted - {"simulate"} else []:
            dump, as_json, node, pod = snapshot_inputs(work, nodes)
            size = f"{nodes} nodes"
            commands = {
                "load": ("load (kubectl YAML)", [sys.executable, __file__, "load", str(dump)]),
                "load-json": ("load (kubectl JSON)", [sys.executable, __file__, "load", str(as_json)]),
                "status": ("status", reconciler("status", "--snapshot", str(dump))),
                "status-json": ("status (kubectl JSON)", reconciler("status", "--snapshot", str(as_json))),
                "explain-pod": ("explain pod", reconciler("explain", "pod", pod, "--snapshot", str(dump))),
                "explain-node": ("explain node", reconciler("explain", "node", node, "--snapshot", str(dump))),
                "explain-pod-json": ("explain pod (JSON)", reconciler("explain", "pod", pod, "--snapshot",
                                                                      str(as_json))),
                "explain-node-json": ("explain node (JSON)", reconciler("explain", "node", node, "--snapshot",
                                                                        str(as_json))),
                **{f"plan-{name}": (f"plan ({name})", reconciler("plan", "--snapshot", str(dump), "--nodepools",
                                                                 str(work / f"{name}.yaml"), "--json"))
                   for name in CHANGES},
            }
            for key, (label, argv) in commands.items():
                if key in wanted:
                    row(label, size, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
