"""``plan`` benchmark: a preview on a snapshot of a few hundred nodes (the issue asks for seconds).

    .venv/bin/python bench/plan.py                 # 300 nodes
    .venv/bin/python bench/plan.py --nodes 600     # bigger
    .venv/bin/python bench/plan.py --quick         # 60 nodes
    .venv/bin/python bench/plan.py --change relabel

The cluster is built in the simulator with the bundled aws-us-east-1 catalogue (on-demand, zones
a-c): NodePool ``general`` (c/m/r, generation > 5) runs ``--nodes`` pods of 3 CPU each, which
no 4-vCPU type can pair up, plus 4 smaller Deployments that fill the gaps, and a DaemonSet. The
snapshot is taken through the ``KubeAPI`` as ``snapshot`` does; then three changes are previewed:

- ``relabel``: a template label, so every node drifts and is replaced (one per pass);
- ``spot``: spot allowed too, so nodes drift (requirements) and cheaper replacements launch;
- ``no-op``: the same NodePools (only the three simulations and the stability loop).

Timed: ``compute_plan`` (current, proposed-to-stability and floor simulations), not the snapshot.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reconciler.insight.plan.compute import compute_plan
from reconciler.insight.snapshot import simulated_snapshot
from reconciler.insight.sources import ProposedConfig, Snapshot
from reconciler.sim.scenario import parse_scenario


def nodepool(capacity_types: list[str], labels: dict[str, str] | None = None) -> dict[str, Any]:
    template: dict[str, Any] = {
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": capacity_types},
                {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
                {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["5"]},
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            ],
        }
    }
    if labels:
        template["metadata"] = {"labels": labels}
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "general"},
        "spec": {
            "template": template,
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "5m"},
        },
    }


def deployment(name: str, replicas: int, cpu: str, memory: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": name, "image": "x",
                                         "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
            },
        },
    }  # fmt: skip


def cluster(nodes: int) -> dict[str, Any]:
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"tolerations": [{"operator": "Exists"}],
                         "containers": [{"name": "a", "image": "x",
                                         "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}]},
            },
        },
    }  # fmt: skip
    return {
        "name": f"bench-plan-{nodes}",
        "settings": {"clock": "2026-01-05T10:00:00Z"},
        "catalog": {"preset": "aws-us-east-1", "zones": ["us-east-1a", "us-east-1b", "us-east-1c"]},
        "objects": [
            nodepool(["on-demand"]),
            daemonset,
            # Each node is launched for one 3-CPU pod with a 2-CPU partner at most: a few hundred nodes.
            {**deployment("big", nodes, "3", "6Gi"),
             "spec": {**deployment("big", nodes, "3", "6Gi")["spec"], "template": {
                 "metadata": {"labels": {"app": "big"}},
                 "spec": {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                     {"labelSelector": {"matchLabels": {"app": "big"}},
                      "topologyKey": "kubernetes.io/hostname"}]}},
                     "containers": [{"name": "big", "image": "x",
                                     "resources": {"requests": {"cpu": "3", "memory": "6Gi"}}}]}}}},
            deployment("api", nodes // 2, "500m", "1Gi"),
            deployment("worker", nodes // 3, "250m", "512Mi"),
            deployment("cache", nodes // 6, "1", "4Gi"),
            deployment("cron", nodes // 4, "100m", "128Mi"),
        ],
        "steps": [{"provision": {}}],
    }  # fmt: skip


CHANGES = {
    "relabel": [nodepool(["on-demand"], {"team": "platform"})],
    "spot": [nodepool(["spot", "on-demand"])],
    "no-op": [nodepool(["on-demand"])],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="60 nodes")
    parser.add_argument("--change", choices=sorted(CHANGES), action="append", help="only these changes")
    args = parser.parse_args()
    nodes = 60 if args.quick else args.nodes
    started = time.perf_counter()
    document = asyncio.run(simulated_snapshot(parse_scenario(cluster(nodes))))
    snapshot = Snapshot(document, "bench")
    node_count = sum(1 for o in document["objects"] if o["kind"] == "Node")
    pod_count = sum(1 for o in document["objects"] if o["kind"] == "Pod")
    print(f"snapshot: {node_count} nodes, {pod_count} pods (built in {time.perf_counter() - started:.1f}s)")
    print(f"{'change':<8} {'seconds':>8} {'steps':>6} {'disrupted':>10} {'evicted':>8} {'$/h now':>9} "
          f"{'$/h after':>10} {'$/h fresh':>10} {'pending':>8}")  # fmt: skip
    for name, pools in CHANGES.items():
        if args.change and name not in args.change:
            continue
        proposed = ProposedConfig(copy.deepcopy(pools), [], name)
        started = time.perf_counter()
        plan = asyncio.run(compute_plan(snapshot, proposed, frames=False))
        elapsed = time.perf_counter() - started
        print(
            f"{name:<8} {elapsed:>8.2f} {len(plan.records):>6} {plan.churn['nodesDisrupted']:>10} "
            f"{plan.churn['podsEvicted']:>8} {plan.current.cost_per_hour:>9.3f} "
            f"{plan.proposed.cost_per_hour:>10.3f} {plan.floor.cost_per_hour:>10.3f} "
            f"{len(plan.proposed.pending):>8}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
