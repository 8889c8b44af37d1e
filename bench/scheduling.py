"""Scheduling benchmark in Karpenter's shape (scheduling_benchmark_test.go), plus the real aws-us-east-1 catalogue.

    .venv/bin/python bench/scheduling.py            # full table
    .venv/bin/python bench/scheduling.py --quick    # a small subset

Catalogue: 400 synthetic instance types; type i has cpu i+1, memory 2(i+1) Gi,
pods 10(i+1), spot offerings in 2 zones and on-demand in 3, price 0.1*cpu +
0.1*memory-GB, overhead 100m / 10Mi. One NodePool with limits cpu 10,000,000
and memory 8,000,000Gi (upstream: 10,000,000Gi, past int64 milli-units); no existing
nodes or DaemonSets. Pods are split evenly
into generic, zonal spread (maxSkew 1), hostname spread, zonal self-affinity
and hostname anti-affinity, CPU from {100m, 250m, 500m, 1, 1.5}, memory from
{100, 256, 512, 1024, 2048, 4096} Mi, seeded. The same workloads also run on the real aws-us-east-1 catalogue (without
limits) when ``reconciler.cloud.aws.preset`` is available. Timed (wall and CPU): building the
scheduler for the snapshot and solving (the snapshot itself is built beforehand); the process's CPU and peak
RSS at the end. Exits 1
when any pod stays unscheduled.
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reconciler.cloud.types import InstanceType, Offering
from reconciler.model import labels as wk
from reconciler.model.resources import Resources
from reconciler.scheduling import SchedulingContext
from reconciler.scheduling.scheduler import Scheduler
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState

GI = 2**30
SIZES = (1, 50, 100, 500, 1000, 2000, 5000, 10000, 20000)
QUICK_SIZES = (1, 100, 1000, 2000)
CPUS = ("100m", "250m", "500m", "1", "1500m")
MEMORIES = ("100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi")
LABEL_VALUES = "abcdefg"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def synthetic_types(count: int = 400) -> list[InstanceType]:
    types = []
    for i in range(count):
        cpu, memory_gi = i + 1, 2 * (i + 1)
        price = 0.1 * cpu + 0.1 * memory_gi * GI / 1e9
        offerings = [Offering(z, wk.CAPACITY_TYPE_SPOT, price) for z in ("test-zone-1", "test-zone-2")]
        offerings += [Offering(z, wk.CAPACITY_TYPE_ON_DEMAND, price) for z in ("test-zone-1", "test-zone-2",
                                                                                 "test-zone-3")]
        types.append(InstanceType(
            name=f"fake-it-{i}",
            capacity=Resources.of(cpu=str(cpu), memory=f"{memory_gi}Gi", pods=str(10 * (i + 1))),
            overhead=Resources.of(cpu="100m", memory="10Mi"),
            offerings=tuple(offerings),
            labels={wk.INSTANCE_TYPE: f"fake-it-{i}", wk.ARCH: "amd64", wk.OS: "linux"},
        ))
    return types


def nodepool(limits: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [],
        }},
    }
    if limits:
        # Upstream's benchmark says 10000000Gi; that is past int64 milli-units (8,589,934Gi), which Adze's input
        # bounds refuse, so the same effectively unlimited pool is written with the largest round figure that fits.
        spec["limits"] = {"cpu": "10000000", "memory": "8000000Gi"}
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"}, "spec": spec}


class PodFactory:
    def __init__(self, seed: int = 42) -> None:
        self.rng = random.Random(seed)
        self.count = 0

    def _value(self) -> str:
        return self.rng.choice(LABEL_VALUES)

    def pod(self, labels: dict[str, str], extra: dict[str, Any] | None = None) -> dict[str, Any]:
        self.count += 1
        spec: dict[str, Any] = {"containers": [{"name": "app", "resources": {"requests": {
            "cpu": self.rng.choice(CPUS), "memory": self.rng.choice(MEMORIES)}}}]}
        spec.update(extra or {})
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"pod-{self.count}", "namespace": "default", "uid": f"uid-{self.count}",
                             "labels": labels},
                "spec": spec}

    def generic(self) -> dict[str, Any]:
        return self.pod({"my-label": self._value()})

    def spread(self, key: str) -> dict[str, Any]:
        labels = {"my-label": self._value()}
        selector = {"matchLabels": {"my-label": self._value()}}
        return self.pod(labels, {"topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}]})

    def affinity(self, key: str) -> dict[str, Any]:
        labels = {"my-affininity": self._value()}
        return self.pod(labels, {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": key}]}}})

    def anti_affinity(self, key: str) -> dict[str, Any]:
        labels = {"app": "nginx"}
        return self.pod(labels, {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": key}]}}})

    def preference(self, zone: str) -> dict[str, Any]:
        nginx = {"matchLabels": {"app": "nginx"}}
        return self.pod({"app": "nginx"}, {"affinity": {
            "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": {"matchExpressions": [
                    {"key": wk.ZONE, "operator": "In", "values": [zone]}]}}]},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "podAffinityTerm": {"labelSelector": nginx, "topologyKey": wk.ZONE}},
                {"weight": 1, "podAffinityTerm": {"labelSelector": nginx, "topologyKey": wk.HOSTNAME}}]}}})


def diverse_pods(count: int, seed: int = 42) -> list[dict[str, Any]]:
    factory = PodFactory(seed)
    share = count // 5
    pods = [factory.generic() for _ in range(share)]
    pods += [factory.spread(wk.ZONE) for _ in range(share)]
    pods += [factory.spread(wk.HOSTNAME) for _ in range(share)]
    pods += [factory.affinity(wk.ZONE) for _ in range(share)]
    pods += [factory.anti_affinity(wk.HOSTNAME) for _ in range(share)]
    pods += [factory.generic() for _ in range(count - len(pods))]
    return pods


def preference_pods(count: int, seed: int = 42, zone: str = "test-zone-1") -> list[dict[str, Any]]:
    """Preferred zone (satisfiable), preferred zone anti-affinity (weight 10) and hostname anti-affinity (1)."""
    factory = PodFactory(seed)
    return [factory.preference(zone) for _ in range(count)]


def run(pods: Sequence[dict[str, Any]], types: list[InstanceType], settings: Settings,
        limits: bool = True) -> dict[str, Any]:
    state = ClusterState.from_manifests([nodepool(limits), *pods])
    pending = state.pending_pods()
    start, cpu_start = time.perf_counter(), time.process_time()
    context = SchedulingContext.build(state, {"default": types}, settings)
    result = Scheduler(context, NOW).solve(pending)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    return {
        "pods": len(pending),
        "nodes": len(result.new_claims),
        "unscheduled": len(result.errors),
        "seconds": elapsed,
        "cpu_seconds": cpu,
        "pods_per_second": len(pending) / elapsed if elapsed else float("inf"),
        "first_error": next(iter(result.errors.items()), None),
    }


def aws_types() -> list[InstanceType] | None:
    try:
        from reconciler.cloud.aws.preset import load_preset
    except ImportError:
        return None
    try:
        return load_preset()
    except Exception as err:
        print(f"(aws-us-east-1 preset unavailable: {err})", file=sys.stderr)
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="run a small subset")
    parser.add_argument("--sizes", type=int, nargs="*", help="pod counts to run")
    parser.add_argument("--no-aws", action="store_true", help="skip the aws-us-east-1 catalogue runs")
    args = parser.parse_args(argv)
    sizes = tuple(args.sizes) if args.sizes else (QUICK_SIZES if args.quick else SIZES)
    catalogues = [("synthetic-400", synthetic_types())]
    if not args.no_aws:
        real = aws_types()
        if real:
            catalogues.append(("aws-us-east-1", real))
    failed = False
    header = (f"{'catalogue':<15} {'workload':<28} {'pods':>6} {'nodes':>6} {'seconds':>8} {'CPU s':>8} {'pods/s':>9} "
              f"{'unsched':>8}")
    print(header)
    print("-" * len(header))
    respect, ignore = Settings(), Settings(preference_policy="Ignore")
    for catalogue, types in catalogues:
        runs: list[tuple[str, list[dict[str, Any]], Settings]] = [
            (f"diverse {n}", diverse_pods(n), respect) for n in sizes
        ]
        pref_count = 400 if args.quick else 4000
        zone = min(o.zone for t in types for o in t.offerings)
        runs.append((f"preferences Respect {pref_count}", preference_pods(pref_count, zone=zone), respect))
        runs.append((f"preferences Ignore {pref_count}", preference_pods(pref_count, zone=zone), ignore))
        for name, pods, settings in runs:
            # The real catalogue has 24 TiB types: Karpenter's pessimistic limit accounting (each claim reserves
            # its largest option) would exhaust the synthetic limits after ~400 claims, so it runs unlimited.
            row = run(pods, types, settings, limits=catalogue == "synthetic-400")
            failed = failed or row["unscheduled"] > 0
            print(f"{catalogue:<15} {name:<28} {row['pods']:>6} {row['nodes']:>6} {row['seconds']:>8.3f} "
                  f"{row['cpu_seconds']:>8.3f} {row['pods_per_second']:>9.0f} {row['unscheduled']:>8}", flush=True)
            if row["first_error"]:
                print(f"    e.g. {row['first_error'][0]}: {row['first_error'][1][:300]}")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"this process: CPU {usage.ru_utime + usage.ru_stime:.1f} s, peak RSS {usage.ru_maxrss / 1024:.0f} MB; "
          f"Karpenter's scheduler on the same problems: bench/compare.py")
    if failed:
        print("FAIL: some pods stayed unscheduled", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
