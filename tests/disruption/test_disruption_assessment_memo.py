"""Node assessments kept across passes equal assessments made from scratch (issue 14, the plan's speed).

``assess`` keeps each node's eligibility, pod blocker, moving pods and price on its StateNode and reuses them
while the node, its NodePool, its instance type and the PDBs are unchanged and the clock has not crossed a
do-not-disrupt duration or a nomination; ``node_drift`` does the same for the drift reason (bounded by the
instance-type check's age), and consolidation its verdict (``consolidation_filter._kept_blocker``: all but
consolidateAfter's, which moves with the clock). These properties drive one cluster state through random
clock moves and changes and compare, after every step, the kept answers with ones computed afresh.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from disruption_factories import LARGE, MEDIUM, NOW, SMALL, TYPES, cluster, instance_type, node_of, nodepool, pdb, pod
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.disruption import candidates
from reconciler.disruption.candidates import Assessment, Catalog, assess, assess_node_afresh, node_drift
from reconciler.disruption.consolidation_filter import _blocker, _kept_blocker
from reconciler.disruption.drift_detection import drift_reason
from reconciler.model.nodepool import NodePool
from reconciler.model.pdb import PdbLimits
from reconciler.state.cluster import ClusterState

NODES = ("n0", "n1", "n2", "n3")
GUARDS = (None, "true", "30s", "2m", "10m", "1h")  # karpenter.sh/do-not-disrupt values


def summary(assessment: Assessment) -> tuple[Any, ...]:
    rows = [
        (c.name, c.nodepool.name, c.instance_type.name if c.instance_type else None, c.price,
         [v.key for v in c.pods], [p.key for p in c.reschedulable], c.reschedule_cost, c.disruption_cost)
        for c in assessment.candidates
    ]
    return rows, dict(assessment.pod_blockers), [e.as_dict() for e in assessment.explanations]


def afresh(state: ClusterState, catalog: Catalog, pdbs: PdbLimits, now: datetime) -> Assessment:
    original = candidates.assess_node
    candidates.assess_node = assess_node_afresh  # type: ignore[assignment]
    try:
        return assess(state, catalog, pdbs, now)
    finally:
        candidates.assess_node = original  # type: ignore[assignment]


def by_node(assessment: Assessment) -> dict[str, Any]:
    rows, blockers, explanations = summary(assessment)
    found: dict[str, Any] = {row[0]: ("candidate", row, blockers.get(row[0])) for row in rows}
    found.update((e["node"], ("explained", e)) for e in explanations)
    return found


def assert_named_assessment_is_the_full_ones_part(
    state: ClusterState, catalog: Catalog, pdbs: PdbLimits, now: datetime, full: Assessment
) -> None:
    """``assess(names=...)`` (what validation asks) is the full assessment's verdict on those nodes, in the
    names' order; names that are no node are skipped."""
    whole = by_node(full)
    for names in (["n3", "n1"], ["n2", "gone", "n2"], [], list(NODES)):
        part = assess(state, catalog, pdbs, now, names=names)
        assert by_node(part) == {name: whole[name] for name in names if name in whole}
        order = [c.name for c in part.candidates]
        assert order == [name for name in dict.fromkeys(names) if name in order]


def pdbs_of(state: ClusterState) -> PdbLimits:
    return PdbLimits.from_manifests(state.pdbs.values(), state.pod_manifests.values())


def guarded_pod(name: str, node: str, guard: str | None, started: datetime, app: str) -> dict[str, Any]:
    annotations = {"karpenter.sh/do-not-disrupt": guard} if guard else {}
    return pod(name, node=node, annotations=annotations, started=started, labels={"app": app})


def starting_cluster(guards: list[str | None], events: list[int | None], ages: list[int]) -> ClusterState:
    """Four nodes of the ``NODES`` names, each with a pod under ``guards[i]``, created ``ages[i]`` minutes and
    with a pod event ``events[i]`` minutes (None: none) before ``NOW``."""
    return cluster(
        nodepool(consolidate_after="5m"),
        *(node_of(name, (SMALL, MEDIUM, LARGE, MEDIUM)[i], created=NOW - timedelta(minutes=ages[i]),
                  last_pod_event=None if events[i] is None else NOW - timedelta(minutes=events[i]))
          for i, name in enumerate(NODES)),
        *(guarded_pod(f"p-{name}", name, guards[i], NOW - timedelta(minutes=1), "a") for i, name in enumerate(NODES)),
    )


def apply_pod_move(state: ClusterState, move: tuple[Any, ...], now: datetime, serial: int) -> bool:
    """Apply one of the moves about pods and nodes' flags (see ``steps``); False for any other move."""
    kind = move[0]
    if kind == "pod":
        state.upsert(guarded_pod(f"q{serial}", move[1], move[2], now - timedelta(minutes=move[3]), move[4]))
    elif kind == "unbind":
        bound = sorted(key for key, p in state.pods.items() if p.node_name)
        if bound:
            namespace, _, name = bound[move[1] % len(bound)].partition("/")
            state.remove({"kind": "Pod", "metadata": {"name": name, "namespace": namespace}})
    elif kind == "mark":
        state.mark_for_deletion(move[1])
    elif kind == "nominate":
        state.nominate(move[1], now + timedelta(seconds=move[2]))
    elif kind == "pdb":
        state.upsert(pdb("guard", {"app": "a"}, max_unavailable=1, allowed=move[1]))
    else:
        return False
    return True


# One step: ("advance", seconds) | ("pod", node, guard, minutes ago, app) | ("unbind", index) | ("mark", node) |
# ("nominate", node, seconds) | ("pdb", allowed) | ("pool", consolidateAfter) | ("catalog",)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("advance"), st.sampled_from([1, 15, 29, 31, 59, 90, 119, 600, 3600, 7200])),
        st.tuples(st.just("pod"), st.sampled_from(NODES), st.sampled_from(GUARDS), st.integers(0, 90),
                  st.sampled_from(["a", "b"])),
        st.tuples(st.just("unbind"), st.integers(0, 20)),
        st.tuples(st.just("mark"), st.sampled_from(NODES)),
        st.tuples(st.just("nominate"), st.sampled_from(NODES), st.sampled_from([10, 30, 300])),
        st.tuples(st.just("pdb"), st.sampled_from([None, 0, 1])),
        st.tuples(st.just("pool"), st.sampled_from(["0s", "5m"])),
        st.tuples(st.just("catalog")),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps, st.lists(st.sampled_from(GUARDS), min_size=4, max_size=4),
       st.lists(st.sampled_from([None, 1, 4, 20]), min_size=4, max_size=4))
def test_kept_assessments_equal_fresh_ones_as_the_clock_and_the_cluster_move(
    moves: list[tuple[Any, ...]], guards: list[str | None], events: list[int | None]
) -> None:
    types = list(TYPES)
    state = starting_cluster(guards, events, [50] * len(NODES))
    now = NOW

    def check() -> None:
        catalog = Catalog.of({name: types for name in state.nodepools})
        pdbs = pdbs_of(state)
        full = assess(state, catalog, pdbs, now)
        assert summary(full) == summary(afresh(state, catalog, pdbs, now))
        assert_named_assessment_is_the_full_ones_part(state, catalog, pdbs, now, full)
        for candidate in full.candidates:  # consolidation's verdict, kept on the node from pass to pass
            if not candidate.is_empty:
                assert _kept_blocker(candidate, now) == _blocker(candidate, now)
        for node in state.state_nodes():
            pool = state.nodepools.get(node.nodepool)
            if pool is None or node.nodeclaim is None:
                continue
            kept = node_drift(state, node, pool, catalog.types(pool.name), now)
            fresh = drift_reason(pool, node.nodeclaim, now=now, instance_types=catalog.types(pool.name),
                                 nodeclass=state.nodeclass(pool), node_labels=node.labels)
            assert kept == fresh

    check()
    for serial, move in enumerate(moves):
        kind = move[0]
        if kind == "advance":
            now += timedelta(seconds=move[1])
        elif apply_pod_move(state, move, now, serial):
            pass
        elif kind == "pool":
            state.upsert(nodepool(consolidate_after=move[1]))
        else:  # a catalogue refresh: the same types as new objects, one of them gone
            types = [replace(t) for t in types if t.name != "large"] or [instance_type("large", 8, 16, 0.2)]
        check()


def test_a_do_not_disrupt_duration_running_out_ends_the_kept_assessment() -> None:
    state = cluster(nodepool(), node_of("n0", MEDIUM), guarded_pod("p", "n0", "2m", NOW - timedelta(minutes=1), "a"))
    catalog = Catalog.of({"default": TYPES})
    pdbs = pdbs_of(state)
    assert assess(state, catalog, pdbs, NOW).pod_blockers["n0"][0] == "DoNotDisrupt"
    assert assess(state, catalog, pdbs, NOW + timedelta(seconds=59)).pod_blockers["n0"][0] == "DoNotDisrupt"
    after = assess(state, catalog, pdbs, NOW + timedelta(seconds=60))
    assert "n0" not in after.pod_blockers and [p.key for p in after.candidates[0].reschedulable] == ["default/p"]


def test_a_nodepool_change_is_seen_by_the_kept_drift_reason() -> None:
    state = cluster(nodepool(), node_of("n0", MEDIUM))
    [node] = state.state_nodes()
    catalog = Catalog.of({"default": TYPES})
    assert node_drift(state, node, state.nodepools["default"], catalog.types("default"), NOW) is None
    state.upsert(nodepool(requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]))
    pool: NodePool = state.nodepools["default"]
    [node] = state.state_nodes()
    found = node_drift(state, node, pool, catalog.types("default"), NOW)
    assert found is not None and found[0] == "RequirementsDrifted"
