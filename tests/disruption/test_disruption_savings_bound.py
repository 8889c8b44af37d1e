"""The savings bound: single-node consolidation skips tries that provably cannot pay off, and only those."""

from __future__ import annotations

from typing import Any

from disruption_factories import LARGE, MEDIUM, NOW, SMALL, TYPES, cluster, node_of, nodepool, pod, run_decide, why
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from reconciler.disruption.budgets import REASON_UNDERUTILIZED
from reconciler.disruption.candidates import Catalog, assess
from reconciler.disruption.consolidation import ConsolidationRefusal, ReplacementBuilder, compute_consolidation
from reconciler.disruption.consolidation_filter import consolidatable
from reconciler.disruption.decide import default_namer
from reconciler.disruption.outcome import MethodOutcome
from reconciler.disruption.simulation import Simulator
from reconciler.disruption.types import MULTI_NODE, SINGLE_NODE, Candidate
from reconciler.model.pdb import PdbLimits
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState

ANTI_WEB = {
    "affinity": {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
}


def simulator_and_candidates(state: ClusterState, run_settings: Settings) -> tuple[Simulator, list[Candidate]]:
    """What one disruption pass sees: its simulator and the graceful candidates (as ``decide`` builds them)."""
    types = {name: TYPES for name in state.nodepools}
    pdbs = PdbLimits.from_manifests(state.pdbs.values(), state.pod_manifests.values())
    graceful, _ = assess(state, Catalog.of(types), pdbs, NOW).for_class(eventual=False)
    return Simulator(state, types, run_settings, NOW, pdbs), graceful


def test_a_pod_with_no_other_home_and_no_cheaper_type_is_not_simulated() -> None:
    # n1 (small, $0.05) runs 1.5 CPU: no other node has room and no type that holds 1.5 CPU is cheaper.
    state = cluster(nodepool(), node_of("n1", SMALL), pod("a", node="n1", cpu="1500m"))
    decision = run_decide(state)
    assert decision.command is None
    assert decision.simulations == 0
    assert why(decision, "n1") == (
        "NotCheaper: no replacement is cheaper than the current $0.0500/h (pod default/a fits on no other node "
        "by requests, and the cheapest instance type that could hold it costs $0.0500/h)"
    )


def test_the_bound_counts_several_homeless_pods_together() -> None:
    # Two 1.5-CPU pods fit no other node; together they need a medium ($0.10), the price of the candidate.
    state = cluster(
        nodepool(),
        node_of("n1", MEDIUM),
        node_of("n2", SMALL),
        pod("a", node="n1", cpu="1500m"),
        pod("b", node="n1", cpu="1500m"),
        pod("c", node="n2", cpu="1500m"),
    )
    decision = run_decide(state)
    assert decision.command is None
    assert "pods default/a, default/b fit on no other node" in why(decision, "n1")
    assert "could hold them costs $0.1000/h" in why(decision, "n1")


def test_room_elsewhere_means_the_candidate_is_simulated() -> None:
    # n2 has room for n1's pod: the bound proves nothing and the simulation finds the delete.
    state = cluster(
        nodepool(),
        node_of("n1", MEDIUM),
        node_of("n2", MEDIUM),
        pod("a", node="n1", cpu="1"),
        pod("b", node="n2", cpu="1"),
    )
    decision = run_decide(state)
    assert decision.command is not None and decision.command.action == "delete"
    assert decision.simulations >= 1


def test_a_cheaper_type_that_fits_means_the_candidate_is_simulated() -> None:
    state = cluster(nodepool(), node_of("big", LARGE), pod("a", node="big", cpu="1"))
    decision = run_decide(state)
    assert decision.command is not None and decision.command.action == "replace"
    assert decision.simulations == 1


def test_pods_kept_apart_by_anti_affinity_need_two_new_nodes() -> None:
    # Both web pods have no room elsewhere (n3 is full) and may not share a host: no multi-node move of n1+n2.
    state = cluster(
        nodepool(budgets=[{"nodes": "100%"}]),
        node_of("n1", SMALL),
        node_of("n2", SMALL),
        node_of("n3", SMALL),
        pod("w1", node="n1", cpu="1500m", labels={"app": "web"}, extra_spec=ANTI_WEB),
        pod("w2", node="n2", cpu="1500m", labels={"app": "web"}, extra_spec=ANTI_WEB),
        pod("full", node="n3", cpu="1500m"),
    )
    simulator, graceful = simulator_and_candidates(state, Settings())
    pair = [c for c in graceful if c.name in {"n1", "n2"}]
    code, message = simulator.savings_bound.rejection(pair) or ("", "")
    assert code == "MultipleReplacements"
    assert "default/w1 and default/w2" in message and "separate hosts" in message


# -- soundness: whenever the bound rejects, the full simulation rejects too ---------------------------

CPU = ("100m", "500m", "1", "1500m", "3", "5")


@st.composite
def clusters(draw: st.DrawFn) -> list[Any]:
    capacity = draw(st.sampled_from([["on-demand"], ["spot", "on-demand"], ["spot"]]))
    objects: list[Any] = [
        nodepool(
            budgets=[{"nodes": "100%"}],
            requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": capacity}],
        )
    ]
    for i in range(draw(st.integers(1, 5))):
        itype = draw(st.sampled_from(TYPES))
        objects.append(node_of(f"n{i}", itype, capacity_type=draw(st.sampled_from(capacity))))
        room = itype.capacity.amount("cpu") - 100
        for j in range(draw(st.integers(0, 3))):
            cpu = draw(st.sampled_from(CPU))
            milli = int(float(cpu.removesuffix("m")) * (1 if cpu.endswith("m") else 1000))
            if milli > room:
                continue
            room -= milli
            web = draw(st.booleans())
            objects.append(
                pod(
                    f"p{i}-{j}",
                    node=f"n{i}",
                    cpu=cpu,
                    labels={"app": "web" if web else "x"},
                    extra_spec=ANTI_WEB if web else None,
                )
            )
    if draw(st.booleans()):
        objects.append(pod("pending", cpu=draw(st.sampled_from(CPU))))
    return objects


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.booleans())
def test_the_bound_never_rejects_what_the_simulation_would_accept(objects: list[Any], spot_to_spot: bool) -> None:
    state = cluster(*objects)
    run_settings = Settings(feature_gates={"SpotToSpotConsolidation": spot_to_spot})
    simulator, graceful = simulator_and_candidates(state, run_settings)
    builder = ReplacementBuilder(state, simulator.context, run_settings, default_namer(state))
    chosen = consolidatable(graceful, NOW, MethodOutcome(SINGLE_NODE))
    # Single candidates, and every prefix multi-node consolidation could try.
    for group in [*([c] for c in chosen), *(chosen[:n] for n in range(2, len(chosen) + 1))]:
        proof = simulator.savings_bound.rejection(group)
        simulation = simulator.run(group, consolidation=True)
        method = SINGLE_NODE if len(group) == 1 else MULTI_NODE
        result = compute_consolidation(group, simulation, builder, method=method, reason=REASON_UNDERUTILIZED)
        event(f"{method}: bound {proof[0] if proof else 'silent'}")
        if proof is not None:
            assert isinstance(result, ConsolidationRefusal), ([c.name for c in group], proof, result)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.sampled_from([SMALL, MEDIUM, LARGE]), st.sampled_from(["0", "500m", "1", "1500m", "3"])),
             min_size=1, max_size=7),
    st.lists(st.tuples(st.sampled_from(["100m", "1", "2", "3500m"]),
                       st.sets(st.integers(0, 6), max_size=7)), min_size=1, max_size=12),
)
def test_a_pods_home_found_from_the_first_fitting_nodes_is_the_full_scans_answer(
    nodes: list[Any], asks: list[tuple[str, set[int]]]
) -> None:
    """The bound looks for at most len(removed) + 1 nodes with room per pod shape, extending that list when a
    larger removed set asks: every answer equals one from all nodes with room (asked in any order)."""
    objects: list[Any] = [nodepool()]
    for index, (itype, used) in enumerate(nodes):
        objects.append(node_of(f"n{index}", itype))
        if used != "0":
            objects.append(pod(f"used{index}", node=f"n{index}", cpu=used))
    state = cluster(*objects)
    simulator, _ = simulator_and_candidates(state, Settings())
    bound = simulator.savings_bound
    homes = [(slot.name, slot.room) for slot in bound._homes if slot.name not in bound._refusing]
    for cpu, indexes in asks:
        moving = ClusterState.from_manifests([pod("moving", cpu=cpu)]).pods["default/moving"]
        removed = {f"n{i}" for i in indexes}
        requests = moving.scheduling_requests
        with_room = [name for name, room in homes
                     if all(value <= room.get(resource, 0) for resource, value in requests.items())]
        assert bound._has_home(moving, removed) == any(name not in removed for name in with_room)
