"""Property: disruption run to stability on random small clusters never breaks a PDB or a do-not-disrupt pod.

The test plays the executor: it applies each command (launch replacements, drain
the candidates round by round with ``plan_drain``, delete them) and checks every
decision and every eviction against its own, independent reading of the PDBs,
annotations and budgets.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from disruption_factories import NOW, TYPES, cluster, node_of, nodepool, pdb, pod, run_decide, ts
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from reconciler.disruption.types import Command
from reconciler.lifecycle.drain import plan_drain
from reconciler.model.pdb import PdbLimits
from reconciler.state.cluster import ClusterState

APPS = ("a", "b", "c")
CPU_MILLI = {"100m": 100, "250m": 250, "500m": 500, "1": 1000}
TYPE_BY_NAME = {t.name: t for t in TYPES}


@st.composite
def clusters(draw: st.DrawFn) -> dict[str, Any]:
    budget = draw(st.sampled_from(["100%", "1", "50%", "zero-window"]))
    budgets = (
        [{"nodes": "0", "schedule": "0 11 * * *", "duration": "2h"}, {"nodes": "100%"}]
        if budget == "zero-window"
        else [{"nodes": budget}]
    )
    capacity = draw(st.sampled_from([["on-demand"], ["spot", "on-demand"]]))
    pool = nodepool(
        budgets=budgets,
        requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": capacity}],
    )
    objects: list[Any] = [pool]
    count = draw(st.integers(2, 5))
    for i in range(count):
        itype = TYPE_BY_NAME[draw(st.sampled_from(list(TYPE_BY_NAME)))]
        objects.append(node_of(f"n{i}", itype, capacity_type=draw(st.sampled_from(capacity))))
        room = itype.capacity.amount("cpu")
        for j in range(draw(st.integers(0, 4))):
            cpu = draw(st.sampled_from(list(CPU_MILLI)))
            if CPU_MILLI[cpu] > room:
                continue
            room -= CPU_MILLI[cpu]
            annotations = {}
            guard = draw(st.sampled_from([None, None, None, "true", "5m", "2h"]))
            if guard:
                annotations["karpenter.sh/do-not-disrupt"] = guard
            started = NOW - timedelta(minutes=draw(st.sampled_from([1, 30, 300])))
            app = draw(st.sampled_from(APPS))
            objects.append(
                pod(
                    f"p{i}-{j}",
                    node=f"n{i}",
                    cpu=cpu,
                    memory="64Mi",
                    labels={"app": app},
                    annotations=annotations,
                    started=started,
                )
            )
    for app in APPS:
        kind = draw(st.sampled_from([None, "min", "max"]))
        if kind == "min":
            objects.append(pdb(f"pdb-{app}", {"app": app}, min_available=draw(st.integers(0, 2))))
        elif kind == "max":
            objects.append(pdb(f"pdb-{app}", {"app": app}, max_unavailable=draw(st.integers(0, 1))))
    return {"objects": objects}


# -- the test's own oracle ---------------------------------------------------------------------------


def protected(manifest: dict[str, Any], now: Any) -> bool:
    value = manifest["metadata"].get("annotations", {}).get("karpenter.sh/do-not-disrupt")
    if value == "true":
        return True
    if value in ("5m", "2h"):
        started = manifest["status"]["startTime"]
        elapsed = now - NOW.fromisoformat(started.replace("Z", "+00:00"))
        return elapsed < timedelta(minutes=5 if value == "5m" else 120)
    return False


def pdb_allowance(state: ClusterState, pdb_manifest: dict[str, Any]) -> int:
    app = pdb_manifest["spec"]["selector"]["matchLabels"]["app"]
    members = [p for p in state.pod_manifests.values() if p["metadata"]["labels"].get("app") == app]
    healthy = sum(
        1
        for p in members
        if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
    )
    spec = pdb_manifest["spec"]
    desired = spec["minAvailable"] if "minAvailable" in spec else len(members) - spec["maxUnavailable"]
    return max(0, healthy - desired)


def pdbs_of(state: ClusterState, manifest: dict[str, Any]) -> list[dict[str, Any]]:
    app = manifest["metadata"]["labels"].get("app")
    return [p for p in state.pdbs.values() if p["spec"]["selector"]["matchLabels"]["app"] == app]


def budget_limit(pool: dict[str, Any], nodes: int, now: Any) -> int:
    budgets = pool["spec"]["disruption"]["budgets"]
    limit = math.inf
    for budget in budgets:
        if "schedule" in budget and not 11 <= now.hour < 13:
            continue
        value = budget["nodes"]
        limit = min(limit, math.ceil(int(value[:-1]) * nodes / 100) if value.endswith("%") else int(value))
    return int(limit) if limit != math.inf else nodes


def check_command(state: ClusterState, command: Command, now: Any) -> None:
    assert command.savings_per_hour > 0
    pool = state.nodepool_manifests["default"]
    managed = [n for n in state.state_nodes() if n.initialized]
    assert len(command.candidates) <= budget_limit(pool, len(managed), now)
    for candidate in command.candidates:
        for key in candidate.node.pods:
            manifest = state.pod_manifests[key]
            assert not protected(manifest, now), f"{key} is protected by do-not-disrupt"
            covering = pdbs_of(state, manifest)
            assert len(covering) <= 1
            for item in covering:
                assert pdb_allowance(state, item) > 0, f"{key}: PDB allows no disruption"


# -- the test's executor -----------------------------------------------------------------------------


def bind(state: ClusterState, manifest: dict[str, Any], node: str, *, ready: bool) -> None:
    moved = {
        **manifest,
        "metadata": dict(manifest["metadata"]),
        "spec": {**manifest["spec"], "nodeName": node},
    }
    moved["status"] = {
        "phase": "Running",
        "startTime": manifest["status"].get("startTime"),
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    state.upsert(moved)


def execute(state: ClusterState, command: Command, now: Any) -> None:
    targets = dict(command.placements)
    for replacement in command.replacements:
        itype = TYPE_BY_NAME[replacement.instance_type_options[0]]
        offering = itype.cheapest_offering(capacity_types=list(replacement.capacity_types))
        assert offering is not None
        for manifest in node_of(
            replacement.name, itype, capacity_type=offering.capacity_type, zone=offering.zone, created=now
        ):
            state.upsert(manifest)
        targets.update({key: replacement.name for key in replacement.pods})
    names = [c.name for c in command.candidates]
    state.mark_for_deletion(*names)
    for name in names:
        for _ in range(20):
            on_node = [state.pod_manifests[k] for k, p in state.pods.items() if p.node_name == name]
            limits = PdbLimits.from_manifests(state.pdbs.values(), state.pod_manifests.values(), prefer_status=False)
            plan = plan_drain(on_node, limits, now)
            if plan.complete:
                break
            assert plan.evict, f"drain of {name} is stuck: {plan.blocked}"
            for key in plan.evict:
                manifest = state.pod_manifests[key]
                for item in pdbs_of(state, manifest):
                    assert pdb_allowance(state, item) > 0, f"evicting {key} violates {item['metadata']['name']}"
                bind(state, manifest, targets[key], ready=False)  # the new copy starts unready
            for key in plan.evict:
                bind(state, state.pod_manifests[key], targets[key], ready=True)
        else:
            raise AssertionError(f"drain of {name} did not finish")
        state.remove({"kind": "Node", "metadata": {"name": name}})
        state.remove({"kind": "NodeClaim", "metadata": {"name": f"{name}-claim"}})
    state.unmark_for_deletion(*names)


def check_fits(state: ClusterState) -> None:
    for node in state.state_nodes():
        assert node.pod_requests.amount("cpu") <= node.allocatable.amount("cpu"), node.name
    for key, pod_model in state.pods.items():
        assert state.state_node(pod_model.node_name) is not None, f"{key} lost its node"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.sampled_from([NOW, NOW.replace(hour=11, minute=30)]))
def test_disruption_to_stability_never_violates_pdbs_or_do_not_disrupt(spec: dict[str, Any], start: Any) -> None:
    state = cluster(*spec["objects"])
    now = start
    for _ in range(12):
        decision = run_decide(state, now=now)
        if decision.command is None:
            break
        event(f"{decision.command.method} {decision.command.action}")
        check_command(state, decision.command, now)
        execute(state, decision.command, now)
        check_fits(state)
        now += timedelta(minutes=1)
    else:
        raise AssertionError("disruption did not reach a stable cluster in 12 passes")
    for node in state.state_nodes():
        assert node.nodeclaim is not None
    assert ts(now)
