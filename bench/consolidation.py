"""Consolidation benchmark: scale up, delete 60 % of the pods, run disruption until stable.

    .venv/bin/python bench/consolidation.py                  # 1,000 and 5,000 nodes
    .venv/bin/python bench/consolidation.py --nodes 1000     # one size
    .venv/bin/python bench/consolidation.py --max-passes 50  # stop earlier

Setup, per size: the scheduling benchmark's diverse workload (``bench/scheduling.py``:
generic, zonal spread, hostname spread, zonal self-affinity, hostname anti-affinity)
is scheduled onto the 400-type synthetic catalogue, capped at the requested node
count, and every planned NodeClaim becomes a running, initialized node of its
cheapest option with its pods bound. Then a seeded random 60 % of the pods are
deleted and ``disrupt until: stable`` runs: ``decide`` (timed: that is the pass
time) and the command applied as the executor would (replacements launched,
pods moved where the simulation put them, candidates removed). The NodePool's
budget is 100 % so passes are limited by the methods, not the budget.

Reported: nodes and $/h before and after, the LP lower bound of the remaining
pods' cost (scipy HiGHS on the fractional relaxation: enough node capacity of
each resource for all requests, and at least as many nodes as the largest group
of hostname anti-affine pods), the ratio after / bound, passes, and wall time
per pass (mean / max) and for the whole run; the reference for the end state (the
remaining pods provisioned from scratch onto an empty cluster, and those claims
repacked, each against the bound); the many-to-many exchange over the stable cluster
(``reconciler/disruption/exchange.py``: nodes, $/h, ratio, pods moved, CPU seconds, checked by
``exchange_problems``); then, end to end for the size
(scale-up, deletion, bound and every pass), wall time, CPU time (user + system,
``resource.getrusage``) and the process's peak RSS so far.
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.lp_bound import lower_bound
from bench.scheduling import diverse_pods, synthetic_types
from reconciler.cloud.types import InstanceType, Offering
from reconciler.disruption.decide import decide
from reconciler.disruption.types import Command
from reconciler.model import labels as wk
from reconciler.model.requirements import Requirements
from reconciler.model.taints import untolerated
from reconciler.scheduling import SchedulingContext
from reconciler.scheduling.results import ScheduledClaim
from reconciler.scheduling.scheduler import Scheduler
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState

NOW = datetime(2026, 1, 1, tzinfo=UTC)
PODS_PER_NODE = 5  # the diverse workload lands roughly this many pods per node
# Like Karpenter's single-node consolidation timeout: a pass gives up searching after this long.
PASS_DEADLINE_SECONDS = 180.0


def deadline_after(seconds: float) -> Callable[[], bool]:
    deadline = time.perf_counter() + seconds
    return lambda: time.perf_counter() > deadline


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def nodepool() -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [],
                }
            },
            "disruption": {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]},
        },
    }


def node_manifests(name: str, itype: InstanceType, zone: str, capacity_type: str, now: datetime) -> list[dict]:
    labels = {
        **itype.labels,
        wk.HOSTNAME: name,
        wk.NODEPOOL: "default",
        wk.ZONE: zone,
        wk.CAPACITY_TYPE: capacity_type,
        wk.REGISTERED: "true",
        wk.INITIALIZED: "true",
    }
    status = {
        "capacity": itype.capacity.to_manifest(),
        "allocatable": itype.allocatable.to_manifest(),
    }
    conditions = [
        {"type": t, "status": "True", "lastTransitionTime": stamp(now)}
        for t in ("Launched", "Registered", "Initialized")
    ]
    provider = f"bench:///{zone}/{name}"
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "creationTimestamp": stamp(now)},
        "spec": {"providerID": provider},
        "status": {**status, "conditions": [{"type": "Ready", "status": "True"}]},
    }
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": {k: v for k, v in labels.items() if k != wk.HOSTNAME},
            "creationTimestamp": stamp(now),
        },
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": [itype.name]}],
        },
        "status": {**status, "nodeName": name, "providerID": provider, "conditions": conditions},
    }
    return [node, claim]


def launched_offering(claim: ScheduledClaim) -> Offering:
    """What the cloud would launch for a planned claim: its cheapest option's cheapest allowed offering."""
    zones = claim.requirements.get(wk.ZONE)
    return min(
        (
            o
            for o in claim.instance_types[0].offerings
            if o.available and o.capacity_type in claim.capacity_types and (zones is None or zones.has(o.zone))
        ),
        key=lambda o: (o.price, o.zone, o.capacity_type),
    )


def launch(claim: ScheduledClaim, name: str, now: datetime) -> tuple[list[dict], float]:
    """The Node and NodeClaim of the claim's launched offering, and its price."""
    offering = launched_offering(claim)
    manifests = node_manifests(name, claim.instance_types[0], offering.zone, offering.capacity_type, now)
    return manifests, offering.price


def bind(pod: dict[str, Any], node: str) -> dict[str, Any]:
    bound = {**pod, "spec": {**pod["spec"], "nodeName": node}}
    bound["metadata"] = {**pod["metadata"], "creationTimestamp": stamp(NOW)}
    bound["status"] = {
        "phase": "Running",
        "startTime": stamp(NOW),
        "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
    }
    return bound


def scale_up(nodes: int, types: list[InstanceType], settings: Settings) -> tuple[ClusterState, dict[str, float]]:
    """Schedule the diverse workload and materialize the planned claims (up to ``nodes``) as running nodes."""
    pods = diverse_pods(nodes * PODS_PER_NODE)
    state = ClusterState.from_manifests([nodepool(), *pods])
    context = SchedulingContext.build(state, {"default": types}, settings)
    result = Scheduler(context, NOW).solve(state.pending_pods())
    by_key = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in pods}
    objects: list[dict[str, Any]] = [nodepool()]
    prices: dict[str, float] = {}
    for index, claim in enumerate(result.new_claims[:nodes]):
        name = f"node-{index:05d}"
        manifests, prices[name] = launch(claim, name, NOW - timedelta(hours=1))
        objects.extend(manifests)
        objects.extend(bind(by_key[key], name) for key in claim.pod_keys)
    return ClusterState.from_manifests(objects), prices


def unbound(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod as its controller would create it again: pending, on no node."""
    spec = {k: v for k, v in pod["spec"].items() if k != "nodeName"}
    return {k: v for k, v in pod.items() if k != "status"} | {"spec": spec}


def fresh_schedule(state: ClusterState, types: list[InstanceType], settings: Settings) -> dict[str, float]:
    """What provisioning the remaining pods from scratch would cost: the scheduler's packing (what Karpenter's
    provisioner would launch for them on an empty cluster), each claim at its cheapest allowed offering, and
    the same claims repacked (``reconciler/provisioning/repack.py``). The reference for consolidation's end
    state: consolidation replays single- and multi-node commands from a packed cluster, a fresh schedule sees
    every pod at once."""
    from reconciler.provisioning.repack import repack

    fresh = ClusterState.from_manifests([nodepool(), *(unbound(p) for p in state.pod_manifests.values())])
    context = SchedulingContext.build(fresh, {"default": types}, settings)
    result = Scheduler(context, NOW).solve(fresh.pending_pods())
    if result.errors:
        reason = next(iter(result.errors.values()))
        raise RuntimeError(f"fresh schedule left {len(result.errors)} pods pending: {reason}")
    cost = sum(launched_offering(claim).price for claim in result.new_claims)
    repacked = repack(result.new_claims, {t.name: t for t in context.templates}, settings.max_instance_types)
    return {"nodes": len(result.new_claims), "cost": cost,
            "repacked_nodes": len(repacked.claims), "repacked_cost": cost - repacked.savings}


def exchange_row(state: ClusterState, types: list[InstanceType], settings: Settings,
                 prices: dict[str, float]) -> dict[str, Any]:
    """The many-to-many exchange (``reconciler/disruption/exchange.py``) over the stable cluster, its CPU
    seconds, and what an independent check of it found wrong (``exchange_problems``)."""
    from reconciler.disruption.exchange import exchange

    started = _cpu_seconds()
    context = SchedulingContext.build(state, {"default": types}, settings)
    result = exchange(state.state_nodes(), {t.name: t for t in context.templates})
    cpu = _cpu_seconds() - started
    return {"nodes": sum(1 for n in result.nodes if n.new_instance_type is not None) + len(result.left_alone),
            "cost": result.cost + sum(prices[name] for name in result.left_alone), "cpu": cpu,
            "moves": len(result.moves), "sweeps": result.sweeps,
            "problems": exchange_problems(state, result, types, prices)}


def exchange_problems(state: ClusterState, result: Any, types: list[InstanceType],
                      prices: dict[str, float]) -> list[str]:
    """Checked from the cluster and the catalogue, not from the exchange's own views: every pod on exactly one
    node, each node's pods fit its new type's allocatable and are the ones it had or moved plain pods of its own
    NodePool, each new price is that type's offering in the node's zone and capacity type, and the total is no
    costlier than before."""
    problems: list[str] = []
    by_name = {t.name: t for t in types}
    nodes = state.state_nodes_by_name()
    seen: Counter[str] = Counter()
    for name in result.left_alone:
        seen.update(k for k, p in nodes[name].pods.items() if not p.is_daemonset_pod)
    for outcome in result.nodes:
        seen.update(outcome.pods)
        node = nodes[outcome.name]
        if abs(outcome.price - prices[outcome.name]) > 1e-9:
            problems.append(f"{outcome.name}: priced {outcome.price} before, costs {prices[outcome.name]}")
        if outcome.new_instance_type is None:
            if outcome.pods or outcome.new_price:
                problems.append(f"{outcome.name}: removed but holds {len(outcome.pods)} pods")
            continue
        itype = by_name[outcome.new_instance_type]
        offers = [o.price for o in itype.offerings if o.available and o.zone == node.zone
                  and o.capacity_type == node.capacity_type]
        if not offers or abs(min(offers) - outcome.new_price) > 1e-9:
            problems.append(f"{outcome.name}: {itype.name} has no offering at {outcome.new_price} in its zone")
        old_type = by_name[node.instance_type]
        labels = {k: v for k, v in node.labels.items() if k not in old_type.labels} | dict(itype.labels)
        as_requirements = Requirements.from_labels(labels)
        load: dict[str, int] = {}
        for key in outcome.pods:
            pod = state.pods[key]
            for name, value in pod.scheduling_requests.items():
                load[name] = load.get(name, 0) + value
            origin = nodes[pod.node_name]
            if origin.name != outcome.name and (
                    origin.nodepool != node.nodepool or pod.topology_spread or pod.affinity_required
                    or pod.anti_affinity_required or untolerated(node.taints, pod.tolerations)):
                problems.append(f"{key}: a constrained pod, another pool's or an intolerant one moved to "
                                f"{outcome.name}")
            if any(labels.get(k) != v for k, v in pod.node_selector.items()) or (pod.required_terms and not any(
                    as_requirements.is_compatible(term.requirements) for term in pod.required_terms)):
                problems.append(f"{key}: its node selector or affinity refuses {outcome.name} as {itype.name}")
        if any(value > itype.allocatable.amount(name) for name, value in load.items()):
            problems.append(f"{outcome.name}: its pods do not fit {itype.name}")
    expected = Counter(k for k, p in state.pods.items() if p.node_name and not p.is_daemonset_pod)
    if seen != expected:
        problems.append(f"pods placed differently from once each: {len(seen)} placed, {len(expected)} expected, "
                        f"{sum((seen - expected).values())} extra, {sum((expected - seen).values())} missing")
    if result.cost > result.original_cost + 1e-9:
        problems.append(f"costlier: {result.cost:.4f} > {result.original_cost:.4f} $/h")
    return problems


def delete_pods(state: ClusterState, fraction: float, seed: int) -> int:
    rng = random.Random(seed)
    keys = sorted(state.pods)
    doomed = rng.sample(keys, int(len(keys) * fraction))
    for key in doomed:
        state.remove(state.pod_manifests[key])
    return len(doomed)


def apply(state: ClusterState, command: Command, prices: dict[str, float], now: datetime) -> None:
    targets = dict(command.placements)
    for replacement in command.replacements:
        assert replacement.claim is not None
        manifests, prices[replacement.name] = launch(replacement.claim, replacement.name, now)
        for manifest in manifests:
            state.upsert(manifest)
        targets.update({key: replacement.name for key in replacement.pods})
    for candidate in command.candidates:
        for key in list(candidate.node.pods):
            if key in targets:
                state.upsert(bind(state.pod_manifests[key], targets[key]))
            else:  # DaemonSet / static pods die with the node
                state.remove(state.pod_manifests[key])
        state.remove({"kind": "Node", "metadata": {"name": candidate.name}})
        state.remove({"kind": "NodeClaim", "metadata": {"name": candidate.nodeclaim}})
        prices.pop(candidate.name, None)


def command_record(command: Command) -> dict[str, Any]:
    """What a pass decided: method, action, candidates, replacements and where each moving pod goes."""
    return {
        "method": command.method,
        "action": command.action,
        "candidates": [c.name for c in command.candidates],
        "replacements": [
            {"name": r.name, "options": list(r.instance_type_options), "price": r.price, "pods": sorted(r.pods)}
            for r in command.replacements
        ],
        "placements": dict(sorted(command.placements.items())),
    }


def run(nodes: int, *, max_passes: int, seed: int, verbose: bool = False) -> dict[str, Any]:
    types = synthetic_types()
    settings = Settings()
    state, prices = scale_up(nodes, types, settings)
    start_nodes, start_cost = len(prices), sum(prices.values())
    deleted = delete_pods(state, 0.6, seed)
    before_nodes, before_cost = len(prices), sum(prices.values())
    bound = lower_bound(state.pods.values(), types)
    counter = iter(range(1, 10**9))
    now = NOW
    timings: list[float] = []
    simulations: list[int] = []
    methods: Counter[str] = Counter()
    commands: list[dict[str, Any]] = []
    stable = False
    for _ in range(max_passes):
        started = time.perf_counter()
        decision = decide(
            state,
            {"default": types},
            settings,
            now,
            name_for=lambda pool: f"{pool}-r{next(counter):05d}",
            should_stop=deadline_after(PASS_DEADLINE_SECONDS),
        )
        timings.append(time.perf_counter() - started)
        simulations.append(decision.simulations)
        if decision.command is None:
            stable = True
            break
        methods[f"{decision.command.method}/{decision.command.action}"] += 1
        commands.append(command_record(decision.command))
        apply(state, decision.command, prices, now)
        if verbose:
            print(f"    pass {len(timings):4d}: {timings[-1]:6.2f}s {decision.simulations:4d} sims  "
                  f"{decision.command.method}/{decision.command.action} x{len(decision.command.candidates)}  "
                  f"-> {len(prices)} nodes {sum(prices.values()):.2f} $/h", file=sys.stderr, flush=True)
        now += timedelta(seconds=30)
    after_cost = sum(prices.values())
    fresh = fresh_schedule(state, types, settings)
    exchanged = exchange_row(state, types, settings, prices)
    return {
        "nodes": start_nodes,
        "scaled_cost": start_cost,
        "pods_deleted": deleted,
        "before_nodes": before_nodes,
        "before_cost": before_cost,
        "after_nodes": len(prices),
        "after_cost": after_cost,
        "bound": bound,
        "ratio": after_cost / bound if bound else float("inf"),
        "passes": len(timings),
        "stable": stable,
        "pass_mean": sum(timings) / len(timings),
        "pass_max": max(timings),
        "total": sum(timings),
        "methods": dict(methods),
        "simulations": sum(simulations),
        "commands": commands,
        "fresh": fresh,
        "exchange": exchanged,
    }


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="*", default=[1000, 5000])
    parser.add_argument("--max-passes", type=int, default=400)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--verbose", action="store_true", help="print every pass on stderr")
    args = parser.parse_args(argv)
    header = (
        f"{'nodes':>6} {'before $/h':>10} {'after':>6} {'after $/h':>10} {'LP bound':>9} {'ratio':>6} "
        f"{'passes':>6} {'stable':>6} {'s/pass':>7} {'max s':>7} {'total s':>8}"
    )
    print(header)
    print("-" * len(header))
    for size in args.nodes:
        started, cpu_started = time.perf_counter(), _cpu_seconds()
        row = run(size, max_passes=args.max_passes, seed=args.seed, verbose=args.verbose)
        wall, cpu = time.perf_counter() - started, _cpu_seconds() - cpu_started
        print(
            f"{row['before_nodes']:>6} {row['before_cost']:>10.2f} {row['after_nodes']:>6} "
            f"{row['after_cost']:>10.2f} {row['bound']:>9.2f} {row['ratio']:>6.2f} {row['passes']:>6} "
            f"{row['stable']!s:>6} {row['pass_mean']:>7.3f} {row['pass_max']:>7.3f} {row['total']:>8.1f}",
            flush=True,
        )
        print(
            f"    commands: {row['methods']}; pods deleted: {row['pods_deleted']}; "
            f"simulations: {row['simulations']}; scaled-up cost {row['scaled_cost']:.2f} $/h"
        )
        fresh = row["fresh"]
        print(
            f"    the remaining pods scheduled from scratch: {fresh['nodes']} nodes {fresh['cost']:.2f} $/h "
            f"({fresh['cost'] / row['bound']:.2f}x LP); repacked: {fresh['repacked_nodes']} nodes "
            f"{fresh['repacked_cost']:.2f} $/h ({fresh['repacked_cost'] / row['bound']:.2f}x LP)"
        )
        exchanged = row["exchange"]
        print(
            f"    consolidation + exchange: {exchanged['nodes']} nodes {exchanged['cost']:.2f} $/h "
            f"({exchanged['cost'] / row['bound']:.3f}x LP; consolidation alone {row['ratio']:.3f}x), "
            f"{exchanged['moves']} pods moved in {exchanged['sweeps']} sweeps, CPU {exchanged['cpu']:.1f} s"
            + "".join(f"\n    exchange problem: {problem}" for problem in exchanged["problems"][:5])
        )
        print(f"    end to end: wall {wall:.1f} s, CPU {cpu:.1f} s, peak RSS {_peak_rss_mb():.0f} MB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
