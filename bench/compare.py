"""Adze's scheduling core and Karpenter's own scheduler on the same problems, side by side, in one run.

    .venv/bin/python bench/compare.py                  # 1,000 / 5,000 / 20,000 pods, both catalogues
    .venv/bin/python bench/compare.py --quick          # 1,000 pods, synthetic catalogue only
    .venv/bin/python bench/compare.py --sizes 5000 --catalogues aws-us-east-1 --json figures.json

Karpenter's side is ``bench/karpenter/`` (a Go module over ``sigs.k8s.io/karpenter``'s
``scheduling.NewTopology`` / ``NewScheduler`` / ``Solve``, the version pinned in its go.mod), built on first
use with the machine's ``go`` into ``~/.cache/adze/karpenter-bench/`` (modules, build cache, binary; a warm
run does not rebuild). Each problem (``bench/exchange.py``) is written once as JSON and solved by two child
processes of this one: ``bench/compare.py adze PROBLEM RESULT`` and ``karpenter-bench schedule PROBLEM RESULT``.

Problems are ``bench/scheduling.py``'s: the 400-type synthetic catalogue of Karpenter's benchmark (one NodePool
with its limits) and the real aws-us-east-1 catalogue (no limits), and the workloads ``generic`` (requests
only: 100m-1.5 CPU, 100Mi-4Gi), ``diverse`` (Karpenter's benchmark mix: a fifth each generic, zonal spread,
hostname spread, zonal self-affinity, hostname anti-affinity) at each size, and ``preferences`` (4,000 pods
with a preferred zone and preferred anti-affinity, under PreferencePolicy Respect and Ignore).

For each side: ``core s`` and ``core CPU`` are the in-process wall and CPU (user + system, all threads) time to
build the scheduler for the problem and solve it, excluding process start and reading the input; pods/s is pods /
core CPU (CPU time is what a loaded machine disturbs least). Nodes and $/h are the NodeClaims it decided on, each
priced at the cheapest available offering of its options in the zones and capacity types it allows, from the one
catalogue; wall, CPU and peak RSS are the child process's, start to exit (``wait4``). ``speed`` is Karpenter's core
CPU over Adze's (>1: Adze faster), ``cost`` Adze's $/h over Karpenter's (<=1: Adze at least as cheap). Every run
checks that both sides read the same problem (type, offering and pod counts, price sums, allocatable and
requests), that every pod is placed exactly once, that options come from the catalogue and fit their pods, and
that Karpenter's own prices match the catalogue's. Exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.exchange import (  # noqa: E402
    claim_price,
    input_summary,
    problem_document,
    read_problem,
    summary_differences,
)
from bench.lp_bound import lower_bound  # noqa: E402
from bench.measure import measured  # noqa: E402 - run as a script
from reconciler.cloud.types import InstanceType  # noqa: E402
from reconciler.model.resources import Resources  # noqa: E402

GO_MODULE = REPO / "bench" / "karpenter"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "adze" / "karpenter-bench"
BINARY = CACHE / "bin" / "karpenter-bench"
SIZES = (1000, 5000, 20000)
PREFERENCE_PODS = 4000
CATALOGUES = ("synthetic-400", "aws-us-east-1")
WORKLOADS = ("generic", "diverse", "preferences")
CHILD_ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "PYTHONPATH": str(REPO)}


# --- building the Go side -------------------------------------------------------------------------------------


def go_environment() -> dict[str, str]:
    """Go's caches outside the work tree; the toolchain go.mod names is fetched only if the local one is older."""
    return {**os.environ, "GOMODCACHE": str(CACHE / "gomod"), "GOCACHE": str(CACHE / "gocache"),
            "GOTOOLCHAIN": os.environ.get("ADZE_GOTOOLCHAIN", "auto"), "GOFLAGS": "-mod=readonly",
            "CGO_ENABLED": "0"}


def source_stamp() -> str:
    digest = hashlib.sha256()
    for path in sorted(GO_MODULE.iterdir()):
        if path.suffix == ".go" or path.name in ("go.mod", "go.sum"):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def ensure_karpenter_binary() -> Path:
    """Build bench/karpenter/ once per source version; a warm call only compares a stamp."""
    stamp_file = BINARY.with_suffix(".stamp")
    stamp = source_stamp()
    if BINARY.exists() and stamp_file.exists() and stamp_file.read_text() == stamp:
        return BINARY
    go = shutil.which("go")
    if go is None:
        sys.exit("bench/compare.py needs Go (https://go.dev/dl) to build Karpenter's side")
    BINARY.parent.mkdir(parents=True, exist_ok=True)
    print(f"building bench/karpenter into {BINARY} (first use; modules and build cache in {CACHE}) ...",
          file=sys.stderr, flush=True)
    started = time.perf_counter()
    subprocess.run([go, "build", "-trimpath", "-o", str(BINARY), "."], cwd=GO_MODULE, env=go_environment(),
                   check=True)
    stamp_file.write_text(stamp)
    print(f"built in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return BINARY


# --- the problems ---------------------------------------------------------------------------------------------


def catalogue(name: str) -> list[InstanceType]:
    from bench.scheduling import synthetic_types

    if name == "synthetic-400":
        return synthetic_types()
    if name == "aws-us-east-1":
        from reconciler.cloud.aws.preset import load_preset

        return load_preset()
    raise ValueError(f"unknown catalogue {name!r}")


def problems(catalogue_name: str, types: list[InstanceType], workloads: Sequence[str], sizes: Sequence[int],
             preference_pods: int) -> list[tuple[str, dict[str, Any]]]:
    from bench.scheduling import PodFactory, diverse_pods, nodepool
    from bench.scheduling import preference_pods as make_preference_pods

    # As bench/scheduling.py: limits on the synthetic catalogue (Karpenter's benchmark), none on the real one.
    pools = [nodepool(limits=catalogue_name == "synthetic-400")]
    found = []
    for workload in workloads:
        if workload == "preferences":
            zone = min(o.zone for t in types for o in t.offerings)
            pods = make_preference_pods(preference_pods, zone=zone)
            for policy in ("Respect", "Ignore"):
                name = f"preferences {policy}"
                found.append((name, problem_document(name, pools, types, pods, policy)))
            continue
        for size in sizes:
            if workload == "generic":
                factory = PodFactory(seed=size)
                pods = [factory.generic() for _ in range(size)]
            elif workload == "diverse":
                pods = diverse_pods(size)
            else:
                raise ValueError(f"unknown workload {workload!r}")
            found.append((workload, problem_document(f"{workload} {size}", pools, types, pods)))
    return found


# --- Adze's side (a child process: `compare.py adze PROBLEM RESULT`) ------------------------------------------


def claim_documents(claims: Sequence[Any], zones: Sequence[str], capacity_types: Sequence[str]) -> list[dict[str, Any]]:
    """Scheduled claims as the exchange's result rows (pods, options, the zones and capacity types allowed)."""
    from reconciler.model import labels as wk

    rows = []
    for claim in claims:
        zone_requirement = claim.requirements.get(wk.ZONE)
        ct_requirement = claim.requirements.get(wk.CAPACITY_TYPE)
        rows.append({
            "nodePool": claim.nodepool.name,
            "pods": claim.pod_keys,
            "instanceTypes": claim.instance_type_names,
            "zones": [z for z in zones if zone_requirement is None or zone_requirement.has(z)],
            "capacityTypes": [c for c in capacity_types if ct_requirement is None or ct_requirement.has(c)],
            "price": claim.cheapest_price(),
        })
    return rows


def adze_child(problem_path: str, result_path: str, with_repack: bool = False) -> int:
    started = time.perf_counter()
    from datetime import UTC, datetime

    from reconciler.scheduling import SchedulingContext
    from reconciler.scheduling.scheduler import Scheduler
    from reconciler.settings import Settings
    from reconciler.state.cluster import ClusterState

    nodepools, types, pods, policy = read_problem(json.loads(Path(problem_path).read_text()))
    state = ClusterState.from_manifests([*nodepools, *pods])
    pending = state.pending_pods()
    settings = Settings(preference_policy=policy)
    pool_types = {name: types for name in state.nodepools}
    parsed, cpu_parsed = time.perf_counter(), time.process_time()
    context = SchedulingContext.build(state, pool_types, settings)
    built = time.perf_counter()
    result = Scheduler(context, datetime(2026, 1, 1, tzinfo=UTC)).solve(pending)
    solved, cpu_solved = time.perf_counter(), time.process_time()
    zones = sorted({o.zone for t in types for o in t.offerings})
    capacity_types = sorted({o.capacity_type for t in types for o in t.offerings})
    claims = claim_documents(result.new_claims, zones, capacity_types)
    document = {
        "input": input_summary(types, pending, state.nodepools),
        "parseSeconds": parsed - started,
        "buildSeconds": built - parsed,
        "solveSeconds": solved - built,
        "coreCpuSeconds": cpu_solved - cpu_parsed,
        "claims": claims,
        "existingPods": len(result.existing),
        "podErrors": dict(result.errors),
    }
    if with_repack:  # the tighter packing (reconciler/provisioning/repack.py): beside, never instead of, the above
        from reconciler.provisioning.repack import repack

        cpu_before = time.process_time()
        repacked = repack(result.new_claims, {t.name: t for t in context.templates}, settings.max_instance_types)
        document["repack"] = {"claims": claim_documents(repacked.claims, zones, capacity_types),
                              "cpuSeconds": time.process_time() - cpu_before,
                              "pools": list(repacked.repacked_pools), "existingPods": 0, "podErrors": {}}
    Path(result_path).write_text(json.dumps(document))
    return 0


# --- a consolidation decision (`compare.py adze-consolidate PROBLEM RESULT`) -----------------------------------


def consolidation_problem(nodes: int, seed: int = 7) -> dict[str, Any]:
    """bench/consolidation.py's cluster at ``nodes`` nodes after its 60 % scale-in, as a problem document.

    The nodes the scale-in emptied are left out (emptiness takes them first, and both sides agree on which): the
    decision compared is a consolidation that moves pods."""
    import random
    from datetime import timedelta

    from bench.consolidation import NOW, PODS_PER_NODE, bind, launch, nodepool
    from bench.scheduling import diverse_pods, synthetic_types
    from reconciler.scheduling import SchedulingContext
    from reconciler.scheduling.scheduler import Scheduler
    from reconciler.settings import Settings
    from reconciler.state.cluster import ClusterState

    types = synthetic_types()
    pods = diverse_pods(nodes * PODS_PER_NODE)
    state = ClusterState.from_manifests([nodepool(), *pods])
    result = Scheduler(SchedulingContext.build(state, {"default": types}, Settings()), NOW).solve(state.pending_pods())
    by_key = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in pods}
    node_manifests: list[dict[str, Any]] = []
    claims: list[dict[str, Any]] = []
    bound: list[dict[str, Any]] = []
    for index, claim in enumerate(result.new_claims[:nodes]):
        name = f"node-{index:05d}"
        (node, nodeclaim), _ = launch(claim, name, NOW - timedelta(hours=1))
        node_manifests.append(node)
        claims.append(nodeclaim)
        bound.extend(bind(by_key[key], name) for key in claim.pod_keys)
    doomed = set(random.Random(seed).sample(range(len(bound)), int(len(bound) * 0.6)))
    remaining = [pod for index, pod in enumerate(bound) if index not in doomed]
    busy = {pod["spec"]["nodeName"] for pod in remaining}
    node_manifests = [n for n in node_manifests if n["metadata"]["name"] in busy]
    claims = [c for c in claims if c["status"]["nodeName"] in busy]
    document = problem_document(f"consolidation {nodes} nodes", [nodepool()], types, remaining)
    document.update(nodes=node_manifests, nodeClaims=claims, now=NOW.strftime("%Y-%m-%dT%H:%M:%SZ"))
    return document


def adze_consolidate_child(problem_path: str, result_path: str) -> int:
    started = time.perf_counter()
    from datetime import datetime

    from bench.consolidation import PASS_DEADLINE_SECONDS, deadline_after
    from reconciler.disruption.decide import decide
    from reconciler.model import labels as wk
    from reconciler.settings import Settings
    from reconciler.state.cluster import ClusterState

    document = json.loads(Path(problem_path).read_text())
    nodepools, types, pods, policy = read_problem(document)
    state = ClusterState.from_manifests([*nodepools, *document["nodeClaims"], *document["nodes"], *pods])
    now = datetime.fromisoformat(document["now"].replace("Z", "+00:00"))
    settings = Settings(preference_policy=policy)
    pool_types = {name: types for name in state.nodepools}
    counter = iter(range(1, 10**9))
    loaded, cpu_loaded = time.perf_counter(), time.process_time()
    # Karpenter's single-node consolidation gives up after 3 minutes; so does bench/consolidation.py's pass.
    decision = decide(state, pool_types, settings, now, name_for=lambda pool: f"{pool}-r{next(counter):05d}",
                      should_stop=deadline_after(PASS_DEADLINE_SECONDS))
    decided, cpu_decided = time.perf_counter(), time.process_time()
    command = decision.command
    zones = sorted({o.zone for t in types for o in t.offerings})
    capacity_types = sorted({o.capacity_type for t in types for o in t.offerings})
    replacements = []
    for replacement in command.replacements if command else []:
        claim = replacement.claim
        zone_requirement = claim.requirements.get(wk.ZONE) if claim else None
        ct_requirement = claim.requirements.get(wk.CAPACITY_TYPE) if claim else None
        replacements.append({
            "nodePool": replacement.nodepool, "pods": list(replacement.pods),
            "instanceTypes": list(replacement.instance_type_options),
            "zones": [z for z in zones if zone_requirement is None or zone_requirement.has(z)],
            "capacityTypes": [c for c in capacity_types if ct_requirement is None or ct_requirement.has(c)],
            "price": replacement.price,
        })
    result = {
        "input": input_summary(types, [p for p in state.pods.values()], state.nodepools),
        "nodes": len(document["nodes"]),
        "loadSeconds": loaded - started,
        "decideSeconds": decided - loaded,
        "decideCpuSeconds": cpu_decided - cpu_loaded,
        "method": f"{command.reason}/{command.method}" if command else "",
        "decision": command.action if command else "no-op",
        "candidatesDisrupted": [{"name": c.name, "price": c.price} for c in command.candidates] if command else [],
        "replacements": replacements,
        "savingsPerHour": command.savings_per_hour if command else 0.0,
        "simulations": decision.simulations,
    }
    Path(result_path).write_text(json.dumps(result))
    return 0


# --- running and checking -------------------------------------------------------------------------------------


@dataclass
class Side:
    name: str
    core: float  # build + solve, in process, wall
    core_cpu: float  # the same, CPU time (user + system) of the process
    nodes: int
    cost: float
    wall: float
    cpu: float
    peak_mb: float
    unscheduled: int
    problems: list[str] = field(default_factory=list)
    repack: Side | None = None  # Adze + repack (--repack): the same run's claims repacked, checked the same way


def measured_child(argv: Sequence[str]) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MB) of one child process, start to exit (bench/measure.py)."""
    wall, cpu, peak, code, errors = measured(argv, cwd=REPO, env=CHILD_ENV)
    if code != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {code}: {errors}")
    return wall, cpu, peak


def check(side: str, result: Mapping[str, Any], pods: Mapping[str, Resources],
          types_by_name: Mapping[str, InstanceType], nodepools: set[str]) -> tuple[float, list[str]]:
    """Total $/h of a side's claims from the catalogue, and what is wrong with its result."""
    problems: list[str] = []
    placed: dict[str, int] = {}
    total = 0.0
    for index, claim in enumerate(result["claims"] or []):
        for key in claim["pods"]:
            placed[key] = placed.get(key, 0) + 1
        if claim["nodePool"] not in nodepools:
            problems.append(f"claim {index}: unknown NodePool {claim['nodePool']!r}")
        unknown = [n for n in claim["instanceTypes"] if n not in types_by_name]
        if unknown or not claim["instanceTypes"]:
            problems.append(f"claim {index}: options {unknown or 'none'} not in the catalogue")
            continue
        price = claim_price(types_by_name, claim["instanceTypes"], claim["zones"], claim["capacityTypes"])
        if price == float("inf"):
            problems.append(f"claim {index}: no available offering in {claim['zones']} / {claim['capacityTypes']}")
            continue
        if abs(price - float(claim["price"])) > 1e-9:
            problems.append(f"claim {index}: {side} priced it {claim['price']}, the catalogue says {price}")
        total += price
        requested = Resources()
        for key in claim["pods"]:
            requested = requested + pods.get(key, Resources())
        cheapest = min(claim["instanceTypes"], key=lambda n: claim_price(types_by_name, [n], claim["zones"],
                                                                         claim["capacityTypes"]))
        if not requested.fits_in(types_by_name[cheapest].allocatable):
            problems.append(f"claim {index}: its pods do not fit its cheapest option {cheapest}")
    missing = [k for k in pods if k not in placed and k not in result["podErrors"]]
    twice = [k for k, n in placed.items() if n > 1]
    strangers = [k for k in placed if k not in pods]
    if result["podErrors"]:
        key, message = next(iter(result["podErrors"].items()))
        problems.append(f"{len(result['podErrors'])} pods unscheduled, e.g. {key}: {message[:200]}")
    if result.get("existingPods"):
        problems.append(f"{result['existingPods']} pods placed on existing nodes, and there are none")
    for label, keys in (("missing from every claim", missing), ("in two claims", twice), ("unknown", strangers)):
        if keys:
            problems.append(f"{len(keys)} pods {label}, e.g. {keys[0]}")
    return total, problems


def solve_both(name: str, document: dict[str, Any], work: Path, binary: Path, workers: int,
               with_repack: bool = False) -> tuple[Side, Side, list[str], float]:
    """Both sides' results, input mismatches, and the LP lower bound ($/h) of the problem (``bench/lp_bound.py``,
    over the capacity types either side's claims allow)."""
    from reconciler.state.cluster import ClusterState

    problem = work / "problem.json"
    problem.write_text(json.dumps(document))
    nodepools, types, pod_manifests, _ = read_problem(document)
    state = ClusterState.from_manifests([*nodepools, *pod_manifests])
    pending = state.pending_pods()
    pods = {p.key: p.scheduling_requests for p in pending}
    types_by_name = {t.name: t for t in types}
    expected = input_summary(types, pending, state.nodepools)
    sides = []
    mismatches: list[str] = []
    capacity_types: set[str] = set()
    for side, argv in (
        ("Adze", [sys.executable, str(Path(__file__).resolve()), "adze", str(problem), str(work / "adze.json"),
                  *(["--repack"] if with_repack else [])]),
        ("Karpenter", [str(binary), "schedule", str(problem), str(work / "karpenter.json"), "-workers",
                       str(workers)]),
    ):
        output = work / ("adze.json" if side == "Adze" else "karpenter.json")
        wall, cpu, peak = measured_child(argv)
        result = json.loads(output.read_text())
        mismatches += [f"{side} read: {d}" for d in summary_differences(expected, result["input"])]
        cost, problems = check(side, result, pods, types_by_name, set(state.nodepools))
        capacity_types.update(t for claim in result["claims"] or [] for t in claim["capacityTypes"])
        sides.append(Side(side, result["buildSeconds"] + result["solveSeconds"], result["coreCpuSeconds"],
                          len(result["claims"] or []), cost, wall, cpu, peak, len(result["podErrors"]), problems))
        if "repack" in result:
            repacked = {**result["repack"], "podErrors": result["podErrors"]}
            repack_cost, repack_problems = check("Adze+repack", repacked, pods, types_by_name, set(state.nodepools))
            if repack_cost > cost + 1e-9:
                repack_problems.append(f"repack costs more: {repack_cost:.4f} > {cost:.4f} $/h")
            sides[-1].repack = Side("+repack", 0.0, result["repack"]["cpuSeconds"], len(repacked["claims"]),
                                    repack_cost, 0.0, 0.0, 0.0, len(result["podErrors"]), repack_problems)
    return sides[0], sides[1], mismatches, lower_bound(pending, types, capacity_types or None)


@dataclass
class Decision:
    name: str
    decide: float  # in process, wall
    decide_cpu: float
    method: str
    action: str
    candidates: int
    savings: float  # $/h: candidates' prices minus the replacements', from the catalogue
    wall: float
    cpu: float
    peak_mb: float
    problems: list[str] = field(default_factory=list)
    method_seconds: dict[str, float] = field(default_factory=dict)  # Karpenter: wall time of each method tried


# Karpenter's time limits per method (multinodeconsolidation.go, singlenodeconsolidation.go).
TIME_LIMITS = {"Underutilized/multi": 60.0, "Underutilized/single": 180.0}


def check_decision(side: str, result: Mapping[str, Any], document: Mapping[str, Any],
                   types_by_name: Mapping[str, InstanceType]) -> tuple[float, list[str]]:
    """The decision's savings from the catalogue, and what is wrong with it."""
    from reconciler.model import labels as wk

    problems: list[str] = []
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in document["nodes"]}
    savings = 0.0
    for candidate in result["candidatesDisrupted"]:
        labels = nodes.get(candidate["name"])
        if labels is None:
            problems.append(f"candidate {candidate['name']} is not a node of the problem")
            continue
        offering = types_by_name[labels[wk.INSTANCE_TYPE]].offering(labels[wk.ZONE], labels[wk.CAPACITY_TYPE])
        price = offering.price if offering else float("nan")
        if abs(price - candidate["price"]) > 1e-9:
            problems.append(f"candidate {candidate['name']}: {side} priced it {candidate['price']}, catalogue {price}")
        savings += price
    for index, claim in enumerate(result["replacements"] or []):
        price = claim_price(types_by_name, claim["instanceTypes"], claim["zones"], claim["capacityTypes"])
        if abs(price - claim["price"]) > 1e-9:
            problems.append(f"replacement {index}: {side} priced it {claim['price']}, the catalogue says {price}")
        savings -= price
    if result["candidatesDisrupted"] and savings <= 0:
        problems.append(f"the command saves nothing ({savings:.4f} $/h)")
    return savings, problems


def decide_both(document: dict[str, Any], work: Path, binary: Path) -> tuple[Decision, Decision, list[str]]:
    problem = work / "cluster.json"
    problem.write_text(json.dumps(document))
    _, types, pods, _ = read_problem(document)
    from reconciler.state.cluster import ClusterState

    state = ClusterState.from_manifests([*document["nodePools"], *document["nodeClaims"], *document["nodes"], *pods])
    expected = input_summary(types, list(state.pods.values()), state.nodepools)
    types_by_name = {t.name: t for t in types}
    decisions, mismatches = [], []
    for side, argv, output in (
        ("Adze", [sys.executable, str(Path(__file__).resolve()), "adze-consolidate", str(problem),
                  str(work / "adze-decision.json")], work / "adze-decision.json"),
        ("Karpenter", [str(binary), "consolidate", str(problem), str(work / "karpenter-decision.json")],
         work / "karpenter-decision.json"),
    ):
        wall, cpu, peak = measured_child(argv)
        result = json.loads(output.read_text())
        mismatches += [f"{side} read: {d}" for d in summary_differences(expected, result["input"])]
        if result["nodes"] != len(document["nodes"]):
            mismatches.append(f"{side} read {result['nodes']} nodes of {len(document['nodes'])}")
        savings, problems = check_decision(side, result, document, types_by_name)
        decisions.append(Decision(side, result["decideSeconds"], result["decideCpuSeconds"], result["method"],
                                  result["decision"], len(result["candidatesDisrupted"]), savings, wall, cpu, peak,
                                  problems, result.get("methodSeconds", {})))
    return decisions[0], decisions[1], mismatches


# --- reporting ------------------------------------------------------------------------------------------------


def machine() -> str:
    model = ""
    with contextlib.suppress(OSError, StopIteration):
        model = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name"))
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{os.cpu_count()} CPUs ({model or platform.machine()}), {memory:.0f} GiB, load average {load}; "
            f"Python {platform.python_version()}")


def go_version(binary: Path) -> str:
    import re

    output = subprocess.run(["go", "version", "-m", str(binary)], capture_output=True, text=True).stdout
    karpenter = re.search(r"dep\s+sigs\.k8s\.io/karpenter\s+(\S+)", output)
    go = re.search(r":\s+(go\S+)", output)
    return f"Karpenter {karpenter.group(1) if karpenter else '?'} built with {go.group(1) if go else '?'}"


HEADER = (f"{'catalogue':<14} {'workload':<20} {'pods':>6} {'side':<9} {'core s':>7} {'core CPU':>8} {'pods/s':>7} "
          f"{'nodes':>6} {'$/h':>9} {'wall s':>7} {'CPU s':>7} {'peak MB':>7}  {'speed':>6} {'cost':>6}")


def print_rows(catalogue_name: str, workload: str, pods: int, adze: Side, karpenter: Side, bound: float) -> None:
    speed = karpenter.core_cpu / adze.core_cpu if adze.core_cpu else float("inf")
    cost = adze.cost / karpenter.cost if karpenter.cost else float("inf")
    for index, side in enumerate((adze, karpenter)):
        rate = pods / side.core_cpu if side.core_cpu else float("inf")
        ratios = f"  {speed:>5.2f}x {cost:>6.3f}" if index == 0 else ""
        print(f"{catalogue_name if index == 0 else '':<14} {workload if index == 0 else '':<20} "
              f"{pods if index == 0 else '':>6} {side.name:<9} {side.core:>7.3f} {side.core_cpu:>8.3f} {rate:>7.0f} "
              f"{side.nodes:>6} {side.cost:>9.2f} {side.wall:>7.2f} {side.cpu:>7.2f} {side.peak_mb:>7.0f}{ratios}",
              flush=True)
        for problem in side.problems[:5]:
            print(f"    {side.name}: {problem}")
    if adze.repack is not None:
        repacked = adze.repack
        print(f"{'':<14} {'':<20} {'':>6} {repacked.name:<9} {'':>7} {repacked.core_cpu:>8.3f} {'':>7} "
              f"{repacked.nodes:>6} {repacked.cost:>9.2f}  (Adze's claims repacked: reconciler/provisioning/repack.py; "
              f"{repacked.cost / karpenter.cost if karpenter.cost else float('inf'):.3f} of Karpenter's $/h)")
        for problem in repacked.problems[:5]:
            print(f"    Adze+repack: {problem}")
    if bound > 0:
        tighter = f", Adze+repack {adze.repack.cost / bound:.3f}x" if adze.repack is not None else ""
        print(f"{'':<14} {'':<20} {'':>6} LP bound {bound:.2f} $/h: Adze {adze.cost / bound:.3f}x, "
              f"Karpenter {karpenter.cost / bound:.3f}x{tighter}", flush=True)


DECISION_HEADER = (f"{'cluster':<14} {'side':<9} {'decide s':>8} {'CPU s':>7} {'method':<28} {'action':<8} "
                   f"{'nodes':>5} {'saves $/h':>9} {'wall s':>7} {'CPU s':>7} {'peak MB':>7}  {'speed':>6} "
                   f"{'saved':>6}")


def print_decisions(label: str, adze: Decision, karpenter: Decision) -> None:
    speed = karpenter.decide_cpu / adze.decide_cpu if adze.decide_cpu else float("inf")
    saved = adze.savings / karpenter.savings if karpenter.savings else float("inf")
    for index, side in enumerate((adze, karpenter)):
        ratios = f"  {speed:>5.2f}x {saved:>6.3f}" if index == 0 else ""
        print(f"{label if index == 0 else '':<14} {side.name:<9} {side.decide:>8.3f} {side.decide_cpu:>7.3f} "
              f"{side.method or '-':<28} {side.action:<8} {side.candidates:>5} {side.savings:>9.2f} {side.wall:>7.2f} "
              f"{side.cpu:>7.2f} {side.peak_mb:>7.0f}{ratios}", flush=True)
        for problem in side.problems[:5]:
            print(f"    {side.name}: {problem}")
        for method, seconds in side.method_seconds.items():
            if seconds >= TIME_LIMITS.get(method, float("inf")) * 0.95:
                print(f"    {side.name}: {method} ran {seconds:.0f} s, into its time limit: it gave up early")


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if arguments[:1] == ["adze"]:
        return adze_child(arguments[1], arguments[2], with_repack="--repack" in arguments[3:])
    if arguments[:1] == ["adze-consolidate"]:
        return adze_consolidate_child(arguments[1], arguments[2])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", help=f"pod counts (default {' '.join(map(str, SIZES))})")
    parser.add_argument("--quick", action="store_true", help="1,000 pods, 400 preference pods, synthetic catalogue")
    parser.add_argument("--catalogues", nargs="*", choices=CATALOGUES, help="(given alone: none)")
    parser.add_argument("--workloads", nargs="*", choices=WORKLOADS, help="(given alone: no scheduling rows)")
    parser.add_argument("--karpenter-workers", type=int, default=1,
                        help="Karpenter's NumConcurrentReconciles (its provisioner's default is 1; its benchmark 5)")
    parser.add_argument("--preference-pods", type=int, help=f"pods of the preferences workload (default "
                        f"{PREFERENCE_PODS}, upstream's; --quick 400)")
    parser.add_argument("--consolidation", type=int, nargs="*", metavar="NODES",
                        help="cluster sizes for one consolidation decision (default 1000; --quick 100; none: skip)")
    parser.add_argument("--json", metavar="FILE", help="also write every row as JSON here")
    parser.add_argument("--repack", action="store_true",
                        help="also repack Adze's claims (reconciler/provisioning/repack.py) and print that row")
    parser.add_argument("--build-only", action="store_true", help="build Karpenter's side and stop")
    args = parser.parse_args(arguments)
    sizes = args.sizes or ([1000] if args.quick else list(SIZES))
    catalogues = args.catalogues if args.catalogues is not None else (["synthetic-400"] if args.quick
                                                                       else list(CATALOGUES))
    workloads = args.workloads if args.workloads is not None else list(WORKLOADS)  # "--workloads": none
    preference_pods = args.preference_pods or (400 if args.quick else PREFERENCE_PODS)
    clusters = args.consolidation if args.consolidation is not None else ([100] if args.quick else [1000])
    binary = ensure_karpenter_binary()
    if args.build_only:
        return 0
    print(machine())
    print(f"{go_version(binary)}, {args.karpenter_workers} worker(s); Adze from {REPO}")
    if catalogues and workloads:
        print("core s / core CPU: building the scheduler + solving, in process (wall / user+system CPU);")
        print("pods/s = pods / core CPU; wall s / CPU s / peak MB: the child process, start to exit;")
        print("speed = Karpenter core CPU / Adze core CPU (>1: Adze faster); cost = Adze $/h / Karpenter $/h")
        print(HEADER)
        print("-" * len(HEADER))
    rows: list[dict[str, Any]] = []
    failed = False
    with tempfile.TemporaryDirectory(prefix="adze-compare-") as folder:
        work = Path(folder)
        for catalogue_name in catalogues:
            types = catalogue(catalogue_name)
            for label, document in problems(catalogue_name, types, workloads, sizes, preference_pods):
                adze, karpenter, mismatches, bound = solve_both(document["name"], document, work, binary,
                                                                args.karpenter_workers, args.repack)
                pods = len(document["pods"])
                print_rows(catalogue_name, label, pods, adze, karpenter, bound)
                for mismatch in mismatches:
                    print(f"    INPUT MISMATCH {mismatch}")
                failed = failed or bool(mismatches or adze.problems or karpenter.problems
                                        or (adze.repack is not None and adze.repack.problems))
                rows.append({"catalogue": catalogue_name, "workload": label, "pods": pods, "lpBound": bound,
                             "adze": asdict(adze), "karpenter": asdict(karpenter), "mismatches": mismatches})
        if clusters:
            if catalogues and workloads:
                print()
            print("One disruption decision on bench/consolidation.py's cluster after its 60 % scale-in")
            print("(synthetic-400 catalogue). decide s / CPU s: the decision in process (methods in order until one")
            print("acts); saves $/h: the candidates' prices minus the replacements', from the catalogue;")
            print("speed = Karpenter decide CPU / Adze decide CPU; saved = Adze's savings / Karpenter's")
            print(DECISION_HEADER)
            print("-" * len(DECISION_HEADER))
        for nodes in clusters:
            adze_decision, karpenter_decision, mismatches = decide_both(consolidation_problem(nodes), work, binary)
            print_decisions(f"{nodes} nodes", adze_decision, karpenter_decision)
            for mismatch in mismatches:
                print(f"    INPUT MISMATCH {mismatch}")
            failed = failed or bool(mismatches or adze_decision.problems or karpenter_decision.problems)
            rows.append({"consolidation": nodes, "adze": adze_decision.__dict__,
                         "karpenter": karpenter_decision.__dict__, "mismatches": mismatches})
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine(), "karpenter": go_version(binary),
                                               "rows": rows}, indent=2))
    if failed:
        print("FAIL: a check above did not hold", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
