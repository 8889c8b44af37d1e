"""Record the result documents the result-identity test compares against (run from the repository root).

    PYTHONPATH=. .venv/bin/python tests/identity/record_results.py            # expected/ from today's code
    PYTHONPATH=. .venv/bin/python tests/identity/record_results.py --inputs   # also regenerate inputs/

Record only when a change is meant to alter decisions or their explanations, and say so in the commit; a
speed-up must leave every document as it is. ``--inputs`` rebuilds the generated inputs: random scenarios
from the invariant campaign's generator (derandomized, so the same ones each time), bench-shaped clusters,
and snapshots of them (as a snapshot document and as a kubectl List dump).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "sim"))
sys.path.insert(0, str(HERE.parent.parent))

from identity_cases import EXAMPLE_PLAN, EXPECTED, INPUTS, canonical, cases, expected_path, snapshot_of  # noqa: E402

RANDOM_SCENARIOS = 8


def random_scenarios(count: int) -> list[dict[str, Any]]:
    """The first scenarios the invariant campaign's generator draws (derandomized: stable across runs)."""
    from hypothesis import HealthCheck, given, settings
    from invariant_scenarios import scenarios

    drawn: list[dict[str, Any]] = []

    @settings(max_examples=count * 6, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(scenarios())
    def collect(document: dict[str, Any]) -> None:
        drawn.append(json.loads(json.dumps(document)))

    collect()
    # Hypothesis starts with minimal examples; keep the richer ones, spread over the run.
    rich = [d for d in drawn if len(d["steps"]) >= 4 and len(d["objects"]) >= 3]
    return rich[:: max(1, len(rich) // count)][:count]


def write_inputs() -> None:
    from bench.commands import simulate_scenario
    from bench.kubectl_dump import kubectl_dump
    from bench.plan import CHANGES, cluster

    INPUTS.mkdir(exist_ok=True)
    for index, document in enumerate(random_scenarios(RANDOM_SCENARIOS)):
        document["name"] = f"random-{index:02d}"
        (INPUTS / f"scenario-random-{index:02d}.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    # A generic mix of 400 pods, then a scale-in and disruption until stable.
    mixed = simulate_scenario(400)
    scaled = [dict(o, spec={**o["spec"], "replicas": o["spec"]["replicas"] // 3})
              for o in mixed["objects"] if o["kind"] == "Deployment"][:10]
    mixed["name"] = "bench-simulate-400-scale-in"
    mixed["steps"] = [{"provision": {}}, {"advance": "2m"}, {"apply": scaled}, {"advance": "10m"},
                      {"disrupt": {"until": "stable"}}]
    (INPUTS / "scenario-bench-simulate-400.yaml").write_text(yaml.safe_dump(mixed, sort_keys=False))
    # The plan benchmark's cluster at 30 nodes, scaled in and consolidated.
    small = cluster(30)
    big = next(o for o in small["objects"] if o["metadata"]["name"] == "big")
    small["name"] = "bench-cluster-30-scale-in"
    small["steps"] = [{"provision": {}}, {"advance": "2m"},
                      {"apply": [dict(big, spec={**big["spec"], "replicas": 12})]}, {"advance": "10m"},
                      {"disrupt": {"until": "stable"}}]
    (INPUTS / "scenario-bench-cluster-30.yaml").write_text(yaml.safe_dump(small, sort_keys=False))
    # Snapshot inputs: the plan benchmark's cluster at 40 nodes and the plan example's cluster.
    (INPUTS / "bench-cluster-40.yaml").write_text(yaml.safe_dump(cluster(40), sort_keys=False))
    snapshot = snapshot_of(INPUTS / "bench-cluster-40.yaml")
    (INPUTS / "bench-cluster-40.snapshot.json").write_text(json.dumps(snapshot, sort_keys=True))
    (INPUTS / "bench-cluster-40.dump.json").write_text(json.dumps(kubectl_dump(snapshot), sort_keys=True))
    (INPUTS / "bench-cluster-40.picks.json").write_text(json.dumps(picks(snapshot, 3, 4)))
    example = snapshot_of(EXAMPLE_PLAN / "cluster.yaml")
    (INPUTS / "example-snapshot.json").write_text(json.dumps(example, sort_keys=True, indent=1))
    (INPUTS / "example-snapshot.picks.json").write_text(json.dumps(picks(example, 4, 4)))
    for name, manifests in CHANGES.items():
        (INPUTS / f"change-{name}.yaml").write_text(yaml.safe_dump_all(manifests, sort_keys=False))


def picks(snapshot: dict[str, Any], nodes: int, pods: int) -> dict[str, list[str]]:
    """Nodes and pods to explain, spread over the snapshot (every kind of pod: workload, DaemonSet)."""
    node_names = sorted(o["metadata"]["name"] for o in snapshot["objects"] if o["kind"] == "Node")
    pod_names = sorted(f"{o['metadata'].get('namespace', 'default')}/{o['metadata']['name']}"
                       for o in snapshot["objects"] if o["kind"] == "Pod")
    return {"nodes": node_names[:: max(1, len(node_names) // nodes)][:nodes],
            "pods": pod_names[:: max(1, len(pod_names) // pods)][:pods]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", action="store_true", help="regenerate the generated inputs first")
    parser.add_argument("--only", help="record only cases whose name contains this")
    args = parser.parse_args()
    if args.inputs:
        write_inputs()
    EXPECTED.mkdir(exist_ok=True)
    for case in cases():
        if args.only and args.only not in case.name:
            continue
        if case.expected is not None:
            continue  # recorded as an input (--inputs)
        document = canonical(case.produce())
        expected_path(case).write_text(json.dumps(document, sort_keys=True, indent=1) + "\n")
        print(f"recorded {case.name}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
