"""Scale-up on the real control plane: N pending pods until all are bound by kube-scheduler and Running.

    .venv/bin/python bench/control_plane_scale.py                # 1,000 pods
    .venv/bin/python bench/control_plane_scale.py --pods 60 --json
    .venv/bin/python bench/control_plane_scale.py --keep         # keep the work directory (logs, audit.log)

Starts what ``tests/control_plane`` runs on (``docs/control-plane.md``; the fixture code of ``tests/support``
is imported, not copied): etcd, kube-apiserver (audit log), kube-controller-manager, kube-scheduler and kwok
built by ``scripts/control-plane.sh``, moto as AWS with the aws-us-east-1 catalogue, nodes joining from
moto's instances, and ``python -m reconciler run`` as its own process with the ServiceAccount and RBAC the
Pulumi program deploys, at Karpenter's default periods (not the tests' shortened ones). Two NodePools (a
general c/m pool, spot and on-demand, and a tainted r pool) and four Deployments of pause pods
(``WORKLOAD``: 40 % web 250m/512Mi spread over zones, 30 % api 500m/1Gi, 20 % worker 1 CPU/2Gi, 10 % cache
500m/4Gi on the memory pool) are created once the reconciler is ready; then:

- times from the first pending pod (as a watch on the pods sees it) to all pods created, the first
  NodeClaim, all bound (``spec.nodeName``, set by kube-scheduler's binding) and all Running (kwok), and the
  pods' own pending-to-bound times;
- the reconciler process's CPU time (user + system, ``/proc/<pid>/stat``) per phase (start-up, scale-up,
  a ``--settle`` window after it) and its peak RSS (``VmHWM``: the process's own address space, reset at
  exec, so nothing of this process is counted);
- NodeClaims, instances and Nodes launched, by instance type;
- the reconciler's API requests from the apiserver's audit log (its ServiceAccount only) by verb and
  resource, per second, in the scale-up and settle windows and over its whole run, split into GETs, LISTs,
  WATCHes and writes, with response codes;
- its AWS calls by operation (its own ``aws_sdk_go_request_total`` metric, scraped from ``/metrics``).

Everything it starts is stopped at the end and checked gone (exit 3 if anything is left).
Wall times on a busy machine are inflated by other processes; CPU time and RSS are the process's own.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from support.adze_cluster import AdzeCluster, adze_cluster, prepare_control_plane  # noqa: E402
from support.cluster_watch import changes, wait_for  # noqa: E402
from support.control_plane import ControlPlane, free_port, locate_binaries, scaled  # noqa: E402
from support.cp_manifests import deployment, is_ready, nodepool  # noqa: E402
from support.reconciler_process import ReconcilerProcess, denied_requests  # noqa: E402

from reconciler.cloud.aws.offline import start_offline_aws  # noqa: E402
from reconciler.model import labels as wk  # noqa: E402

NAMESPACE = "scale"
KARPENTER_BAR_MB = 260  # Karpenter's e2e suite fails a run whose controller exceeds this
MEMORY_TAINT = {"key": "workload", "value": "memory", "effect": "NoSchedule"}


@dataclass(frozen=True)
class Shape:
    name: str
    share: float
    cpu: str
    memory: str
    zonal_spread: bool = False
    memory_pool: bool = False


WORKLOAD = (
    Shape("web", 0.4, "250m", "512Mi", zonal_spread=True),
    Shape("api", 0.3, "500m", "1Gi"),
    Shape("worker", 0.2, "1", "2Gi"),
    Shape("cache", 0.1, "500m", "4Gi", memory_pool=True),
)


def replicas(pods: int) -> dict[str, int]:
    """Each shape's share of ``pods`` (the last takes the rounding)."""
    counts = {s.name: int(pods * s.share) for s in WORKLOAD[:-1]}
    counts[WORKLOAD[-1].name] = pods - sum(counts.values())
    return counts


def nodepools() -> list[dict[str, Any]]:
    general = nodepool("general", consolidate_after="10m")
    general["spec"]["template"]["spec"]["requirements"] = [
        {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot", "on-demand"]},
        {"key": wk.INSTANCE_CATEGORY, "operator": "In", "values": ["c", "m"]},
        {"key": wk.INSTANCE_GENERATION, "operator": "Gt", "values": ["4"]},
        {"key": wk.INSTANCE_CPU, "operator": "Lt", "values": ["33"]},
        {"key": wk.ARCH, "operator": "In", "values": ["amd64"]},
    ]
    memory = nodepool("memory", consolidate_after="10m")
    memory["spec"]["template"]["spec"]["requirements"] = [
        {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        {"key": wk.INSTANCE_CATEGORY, "operator": "In", "values": ["r"]},
        {"key": wk.INSTANCE_GENERATION, "operator": "Gt", "values": ["4"]},
        {"key": wk.INSTANCE_CPU, "operator": "Lt", "values": ["33"]},
        {"key": wk.ARCH, "operator": "In", "values": ["amd64"]},
    ]
    memory["spec"]["template"]["spec"]["taints"] = [dict(MEMORY_TAINT)]
    return [general, memory]


def deployments(pods: int) -> list[dict[str, Any]]:
    made = []
    for shape in WORKLOAD:
        manifest = deployment(
            shape.name, replicas(pods)[shape.name], cpu=shape.cpu, memory=shape.memory,
            spread_key=wk.ZONE if shape.zonal_spread else None,
            node_selector={wk.NODEPOOL: "memory"} if shape.memory_pool else None,
        )
        if shape.memory_pool:
            manifest["spec"]["template"]["spec"]["tolerations"] = [{**MEMORY_TAINT, "operator": "Equal"}]
        made.append(manifest)
    return made


# --- the reconciler process's own usage ------------------------------------------------------------------

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of the process (all its threads, and its waited-for children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / CLOCK_TICKS  # utime, stime, cutime, cstime


def memory_mb(pid: int) -> dict[str, float]:
    """VmHWM (peak resident) and VmRSS (now) in MB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            found[key] = int(value.split()[0]) / 1024
    return found


def aws_calls(metrics_port: int) -> dict[str, int]:
    """``aws_sdk_go_request_total`` by operation (``Service.Action``; non-200 codes appended)."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30) as response:
        text = response.read().decode()
    calls: Counter[str] = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "aws_sdk_go_request_total":
                labels = sample.labels
                code = "" if labels.get("code") == "200" else f" ({labels.get('code')})"
                calls[f"{labels['service']}.{labels['action']}{code}"] += int(sample.value)
    return dict(sorted(calls.items(), key=lambda kv: -kv[1]))


# --- the pods' timeline, from a watch ------------------------------------------------------------------


@dataclass
class Timeline:
    expected: int
    seen: dict[str, float] = field(default_factory=dict)
    bound: dict[str, float] = field(default_factory=dict)
    running: dict[str, float] = field(default_factory=dict)

    def observe(self, pod: dict[str, Any], now: float) -> None:
        key = pod["metadata"]["name"]
        self.seen.setdefault(key, now)
        if pod["spec"].get("nodeName"):
            self.bound.setdefault(key, now)
        if (pod.get("status") or {}).get("phase") == "Running" and is_ready(pod):
            self.running.setdefault(key, now)

    def done(self) -> bool:
        return len(self.running) >= self.expected and len(self.bound) >= self.expected

    def describe(self) -> str:
        return f"{len(self.seen)} seen, {len(self.bound)} bound, {len(self.running)} Running of {self.expected}"


def follow_pods(plane: ControlPlane, timeline: Timeline, timeout: float) -> None:
    for objects, changed in changes(plane, f"/api/v1/namespaces/{NAMESPACE}/pods", scaled(timeout)):
        now = time.time()
        for pod in [changed] if changed is not None else objects.values():
            timeline.observe(pod, now)
        if timeline.done():
            return
    raise TimeoutError(f"not within {scaled(timeout):.0f} s: {timeline.describe()}")


# --- API requests from the audit log -------------------------------------------------------------------

READS = {"get": "GET", "list": "LIST", "watch": "WATCH"}


def _received(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["requestReceivedTimestamp"]).timestamp()


def _resource(event: dict[str, Any]) -> str:
    ref = event.get("objectRef") or {}
    name = ref.get("resource") or event.get("requestURI", "?")
    return f"{name}/{ref['subresource']}" if ref.get("subresource") else name


def api_requests(events: Iterable[dict[str, Any]], start: float, end: float) -> dict[str, Any]:
    """The requests received in [start, end): counts and rates by class, by verb + resource, and codes."""
    seconds = max(end - start, 1e-9)
    by_class: Counter[str] = Counter()
    by_verb: Counter[str] = Counter()
    codes: Counter[str] = Counter()
    for event in events:
        if not start <= _received(event) < end:
            continue
        verb = event["verb"]
        by_class[READS.get(verb, "write")] += 1
        by_verb[f"{verb} {_resource(event)}"] += 1
        codes[str((event.get("responseStatus") or {}).get("code", "?"))] += 1
    total = sum(by_class.values())
    return {
        "seconds": round(seconds, 2),
        "total": total,
        "per_second": round(total / seconds, 2),
        "by_class": {k: {"count": n, "per_second": round(n / seconds, 2)} for k, n in sorted(by_class.items())},
        "by_verb_resource": {k: {"count": n, "per_second": round(n / seconds, 2)} for k, n in by_verb.most_common()},
        "codes": dict(sorted(codes.items())),
    }


# --- the run ------------------------------------------------------------------------------------------


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


def _wait_ready(cluster: AdzeCluster, process: ReconcilerProcess) -> None:
    """The NodePools Ready: the reconciler's controllers are running and have resolved the EC2NodeClass."""
    wait_for(
        cluster.plane, "/apis/karpenter.sh/v1/nodepools",
        lambda pools: len(pools) == 2 and all(is_ready(p) for p in pools.values()), timeout=180,
        what="both NodePools Ready", describe=lambda pools: ", ".join(
            f"{k}: ready={is_ready(p)}" for k, p in pools.items()) + f"\n{process.tail(20)}",
    )


def scale_up(cluster: AdzeCluster, pods: int, settle: float, timeout: float) -> dict[str, Any]:
    plane = cluster.plane
    cluster.apply(cluster.nodeclass())
    for pool in nodepools():
        cluster.apply(pool)
    metrics_port = free_port()
    process = cluster.start_reconciler(env={"METRICS_PORT": str(metrics_port)}, timings={}, settings={})
    assert process.process is not None
    pid = process.process.pid
    started = time.time()
    _wait_ready(cluster, process)
    ready, cpu_ready = time.time(), cpu_seconds(pid)

    timeline = Timeline(pods)
    for manifest in deployments(pods):
        cluster.apply(manifest)
    try:
        follow_pods(plane, timeline, timeout)
    except TimeoutError as err:
        raise TimeoutError(f"{err}; node registration errors: {cluster.nodes.errors[-5:]}") from None
    first = min(timeline.seen.values())
    all_running = max(timeline.running.values())
    cpu_scaled, rss_scaled = cpu_seconds(pid), memory_mb(pid)

    settle_end = time.time() + settle
    while time.time() < settle_end and process.alive():
        time.sleep(min(1.0, max(0.0, settle_end - time.time())))
    if not process.alive():
        raise RuntimeError(f"the reconciler exited during the run:\n{process.tail()}")
    settled, cpu_settled, rss_settled = time.time(), cpu_seconds(pid), memory_mb(pid)
    aws = aws_calls(metrics_port)
    exit_code = process.stop()
    stopped = time.time()

    claims = plane.request("GET", "/apis/karpenter.sh/v1/nodeclaims")["items"]
    instances = [
        i for r in cluster.aws.client("ec2").describe_instances(Filters=[
            {"Name": f"tag:kubernetes.io/cluster/{cluster.aws.cluster}", "Values": ["owned"]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]},
        ])["Reservations"] for i in r["Instances"]
    ]
    user = cluster.identity.user
    events = list(plane.audit_events(lambda e: (e.get("user") or {}).get("username") == user))
    claim_creates = sorted(_received(e) for e in events
                           if e["verb"] == "create" and _resource(e) == "nodeclaims"
                           and (e.get("responseStatus") or {}).get("code") == 201)
    bind_waits = [timeline.bound[k] - timeline.seen[k] for k in timeline.bound]
    return {
        "pods": pods,
        "deployments": replicas(pods),
        "times_s": {
            "first_pending_to_all_created": round(max(timeline.seen.values()) - first, 2),
            "first_pending_to_first_nodeclaim": round(claim_creates[0] - first, 2) if claim_creates else None,
            "first_pending_to_last_nodeclaim": round(claim_creates[-1] - first, 2) if claim_creates else None,
            "first_pending_to_all_bound": round(max(timeline.bound.values()) - first, 2),
            "first_pending_to_all_running": round(all_running - first, 2),
            "pod_pending_to_bound_p50": round(statistics.median(bind_waits), 2),
            "pod_pending_to_bound_p90": round(_percentile(bind_waits, 0.9), 2),
            "pod_pending_to_bound_max": round(max(bind_waits), 2),
            "reconciler_start_to_ready": round(ready - started, 2),
        },
        "reconciler": {
            "cpu_s": {
                "start_to_ready": round(cpu_ready, 2),
                "scale_up": round(cpu_scaled - cpu_ready, 2),
                "settle": round(cpu_settled - cpu_scaled, 2),
                "total_before_stop": round(cpu_settled, 2),
            },
            "settle_s": round(settled - all_running, 1),
            "peak_rss_mb": round(rss_settled["VmHWM"], 1),
            "rss_after_scale_up_mb": round(rss_scaled["VmRSS"], 1),
            "rss_after_settle_mb": round(rss_settled["VmRSS"], 1),
            "karpenter_bar_mb": KARPENTER_BAR_MB,
            "exit_code": exit_code,
        },
        "launched": {
            "nodeclaims": len(claims),
            "nodeclaims_created": len(claim_creates),
            "instances": len(instances),
            "nodes_joined": len(cluster.nodes.joined),
            "by_nodepool": dict(Counter(c["metadata"]["labels"].get(wk.NODEPOOL) for c in claims)),
            "instance_types": dict(Counter(i["InstanceType"] for i in instances).most_common()),
            "node_join_errors": list(cluster.nodes.errors),
        },
        "api": {
            "reconciler": user,
            "scale_up": api_requests(events, first, all_running),
            "settle": api_requests(events, all_running, settled),
            "whole_run": api_requests(events, started, stopped),
            "denied": denied_requests(plane, cluster.identity),
        },
        "aws_calls": aws,
    }


def run(pods: int, settle: float, timeout: float, workdir: Path) -> dict[str, Any]:
    began = time.monotonic()
    plane = ControlPlane.start(workdir / "control-plane", locate_binaries())
    reconciler_pids: list[int] = []
    try:
        prepare_control_plane(plane)
        aws = start_offline_aws(cluster="scale", kubernetes_version="1.33")
        try:
            with adze_cluster(plane, aws, NAMESPACE, workdir / "adze") as cluster:
                try:
                    figures = scale_up(cluster, pods, settle, timeout)
                finally:
                    reconciler_pids = [r.process.pid for r in cluster.reconcilers if r.process is not None]
        finally:
            aws.stop()
    finally:
        plane.stop()
    left = plane.leftovers() + [f"{pid}: the reconciler" for pid in reconciler_pids if Path(f"/proc/{pid}").exists()]
    figures["wall_s"] = round(time.monotonic() - began, 1)
    figures["load_average"] = [round(v, 1) for v in os.getloadavg()]
    figures["leftover_processes"] = left
    return figures


def report(figures: dict[str, Any]) -> str:
    t, r, launched = figures["times_s"], figures["reconciler"], figures["launched"]
    lines = [
        f"{figures['pods']} pods {figures['deployments']}; load average {figures['load_average']} "
        "(wall times inflated by other processes; CPU and RSS are the reconciler's own)",
        f"first pending pod -> all created {t['first_pending_to_all_created']} s, first NodeClaim "
        f"{t['first_pending_to_first_nodeclaim']} s, last NodeClaim {t['first_pending_to_last_nodeclaim']} s, "
        f"all bound {t['first_pending_to_all_bound']} s, all Running {t['first_pending_to_all_running']} s",
        f"pod pending -> bound: p50 {t['pod_pending_to_bound_p50']} s, p90 {t['pod_pending_to_bound_p90']} s, "
        f"max {t['pod_pending_to_bound_max']} s",
        f"reconciler CPU s: start-up {r['cpu_s']['start_to_ready']}, scale-up {r['cpu_s']['scale_up']}, "
        f"settle ({r['settle_s']} s) {r['cpu_s']['settle']}, total {r['cpu_s']['total_before_stop']}; "
        f"peak RSS {r['peak_rss_mb']} MB (Karpenter's bar {r['karpenter_bar_mb']} MB); exit {r['exit_code']}",
        f"launched: {launched['nodeclaims']} NodeClaims {launched['by_nodepool']}, {launched['instances']} "
        f"instances, {launched['nodes_joined']} Nodes; types {launched['instance_types']}",
    ]
    for window in ("scale_up", "settle", "whole_run"):
        api = figures["api"][window]
        classes = ", ".join(f"{k} {v['count']} ({v['per_second']}/s)" for k, v in api["by_class"].items())
        lines.append(f"API {window} ({api['seconds']} s): {api['total']} requests, {api['per_second']}/s: {classes}; "
                     f"codes {api['codes']}")
        top = list(api["by_verb_resource"].items())[:12]
        lines.extend(f"    {name:<40} {v['count']:>6} {v['per_second']:>8}/s" for name, v in top)
    lines.append(f"AWS calls: {figures['aws_calls']}")
    if figures["api"]["denied"]:
        lines.append(f"DENIED by RBAC: {figures['api']['denied']}")
    lines.append(f"wall {figures['wall_s']} s in all; leftover processes: {figures['leftover_processes'] or 'none'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=1000, help="pending pods to create (default 1000)")
    parser.add_argument("--settle", type=float, default=30.0,
                        help="seconds to keep measuring the reconciler after all pods run (default 30)")
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="seconds allowed for all pods to run (x ADZE_TEST_TIME_SCALE; default 1800)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, audit.log)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.pods < len(WORKLOAD):
        parser.error(f"--pods must be at least {len(WORKLOAD)} (one per Deployment)")
    # the components run in their own sessions: a SIGTERM must unwind through the stops, not skip them
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(143))
    workdir = Path(tempfile.mkdtemp(prefix="adze-cp-scale-"))
    keep = args.keep
    try:
        with contextlib.redirect_stdout(sys.stderr):  # moto's server prints its own notices to stdout
            figures = run(args.pods, args.settle, args.timeout, workdir)
    except BaseException:
        keep = True  # the components' logs and the audit log explain the failure
        raise
    finally:
        if keep:
            print(f"work directory kept: {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(figures, indent=2) if args.json else report(figures))
    return 3 if figures["leftover_processes"] else 0


if __name__ == "__main__":
    sys.exit(main())
