"""The disruption pass's views kept from pass to pass equal views computed from scratch (issue 27, the plan's speed).

``kept_assessment.kept_assess`` keeps every node's verdict and Candidate and re-judges only the nodes that
changed or whose verdict's span the clock has left; ``kept_drift.drifted_names`` keeps the names of the drifted
nodes the same way (bounded by the instance-type check's age), and consolidation keeps its verdict with each kept
candidate (all but consolidateAfter's, which moves with the clock) and its chosen candidates in order
(``consolidation_filter.kept_filter``). This property drives one cluster state through
random clock moves and changes — pods, nominations, marks, PDBs, NodePool changes, catalogue refreshes, nodes
coming and going — and compares, after every step, the kept views with ones computed afresh.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from disruption_factories import LARGE, MEDIUM, NOW, SMALL, TYPES, cluster, instance_type, node_of, nodepool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_disruption_assessment_memo import GUARDS, afresh, apply_pod_move, pdbs_of, starting_cluster, summary

from reconciler.disruption import consolidation_filter, underutilized
from reconciler.disruption.candidates import Catalog, consolidation_order
from reconciler.disruption.consolidation_filter import Refusal, consolidatable, kept_filter
from reconciler.disruption.drift_detection import drift_reason
from reconciler.disruption.kept_assessment import kept_assess
from reconciler.disruption.kept_drift import drifted_names
from reconciler.disruption.outcome import MethodOutcome
from reconciler.state.cluster import ClusterState

NODES = ("n0", "n1", "n2", "n3")
EXTRA = ("x0", "x1", "x2")

steps = st.lists(
    st.one_of(
        st.tuples(st.just("advance"), st.sampled_from([1, 29, 31, 90, 600, 1800, 3600])),
        st.tuples(st.just("pod"), st.sampled_from(NODES + EXTRA), st.sampled_from(GUARDS), st.integers(0, 90),
                  st.sampled_from(["a", "b"])),
        st.tuples(st.just("unbind"), st.integers(0, 20)),
        st.tuples(st.just("mark"), st.sampled_from(NODES + EXTRA)),
        st.tuples(st.just("nominate"), st.sampled_from(NODES + EXTRA), st.sampled_from([10, 30, 300])),
        st.tuples(st.just("pdb"), st.sampled_from([None, 0, 1])),
        st.tuples(st.just("pool"), st.sampled_from(["0s", "5m"]), st.sampled_from(["on-demand", "spot"])),
        st.tuples(st.just("catalog")),
        st.tuples(st.just("add"), st.sampled_from(EXTRA), st.sampled_from([SMALL, MEDIUM, LARGE]),
                  st.integers(0, 120)),
        st.tuples(st.just("drop"), st.sampled_from(NODES + EXTRA)),
    ),
    max_size=25,
)


def fresh_drifted(state: ClusterState, catalog: Catalog, now: datetime) -> frozenset[str]:
    found = set()
    for node in state.state_nodes():
        pool = state.nodepools.get(node.nodepool)
        if not node.managed or node.nodeclaim is None or pool is None:
            continue
        if drift_reason(pool, node.nodeclaim, now=now, instance_types=catalog.types(pool.name),
                        nodeclass=state.nodeclass(pool), node_labels=node.labels) is not None:
            found.add(node.name)
    return frozenset(found)


def drop(state: ClusterState, name: str) -> None:
    state.remove({"kind": "Node", "metadata": {"name": name}})
    state.remove({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": f"{name}-claim"}})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps, st.lists(st.sampled_from(GUARDS), min_size=4, max_size=4),
       st.lists(st.sampled_from([None, 1, 4, 20]), min_size=4, max_size=4))
def test_kept_views_equal_fresh_ones_as_the_clock_and_the_cluster_move(
    moves: list[tuple[Any, ...]], guards: list[str | None], events: list[int | None]
) -> None:
    types = list(TYPES)
    state = starting_cluster(guards, events, [50, 30, 50, 30])  # two nodes cross the instance-type age bound
    now = NOW

    def check() -> None:
        catalog = Catalog.of({name: types for name in state.nodepools})
        pdbs = pdbs_of(state)
        kept = kept_assess(state, catalog, pdbs, now)
        fresh = afresh(state, catalog, pdbs, now)
        assert summary(kept) == summary(fresh)
        # Consolidation's filter and order, kept from pass to pass, against the fresh candidates' own.
        ordered, refusals = kept_filter(state.carried, [c for c in kept.for_class(eventual=False)[0]
                                                        if not c.is_empty], now)
        graceful = [c for c in fresh.for_class(eventual=False)[0] if not c.is_empty]
        verdicts = [(c, *consolidation_filter._blocker(c, now)) for c in graceful if not c.nodepool.is_static]
        assert [c.name for c in ordered] == [c.name for c in consolidation_order([c for c, code, _ in verdicts
                                                                                  if not code])]
        assert [(c.name, code, message) for c, code, message in refusals()] == [
            (c.name, code, message) for c, code, message in verdicts if code]
        assert all(c.assessed_at == now for c in kept.candidates)
        assert drifted_names(state, catalog, now) == fresh_drifted(state, catalog, now)
        for candidate in kept.candidates:  # consolidation's verdict, kept with the candidate from pass to pass
            if not candidate.is_empty:
                refused: list[Refusal] = []
                consolidatable([candidate], now, MethodOutcome(""), refused)
                assert (refused[0][1:] if refused else ("", "")) == consolidation_filter._blocker(candidate, now)

    check()
    for serial, move in enumerate(moves):
        kind = move[0]
        if kind == "advance":
            now += timedelta(seconds=move[1])
        elif apply_pod_move(state, move, now, serial):
            pass
        elif kind == "pool":
            requirements = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": [move[2]]}]
            state.upsert(nodepool(consolidate_after=move[1], requirements=requirements))
        elif kind == "catalog":  # the same types as new objects, one of them gone
            types = [replace(t) for t in types if t.name != "large"] or [instance_type("large", 8, 16, 0.2)]
        elif kind == "add":
            for manifest in node_of(move[1], move[2], created=now - timedelta(minutes=move[3])):
                state.upsert(manifest)
        else:
            drop(state, move[1])
        check()


def test_a_node_crossing_the_instance_type_age_bound_drifts_without_changing() -> None:
    """The drifted names follow the clock past the age bound with no change to the node (the heap of moments)."""
    state = cluster(nodepool(), node_of("n0", LARGE, created=NOW - timedelta(minutes=50)))
    catalog = Catalog.of({"default": [SMALL, MEDIUM]})
    assert drifted_names(state, catalog, NOW) == frozenset()
    assert drifted_names(state, catalog, NOW + timedelta(minutes=10)) == frozenset()
    assert drifted_names(state, catalog, NOW + timedelta(minutes=11)) == {"n0"}


@dataclass
class _Pooled:
    name: str
    pool: str
    node: Any = None


@dataclass
class _Allowance:
    remaining: int

    def explain(self) -> str:
        return f"{self.remaining} left"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c"]), max_size=40), st.dictionaries(
    st.sampled_from(["a", "b"]), st.integers(-1, 12)), st.integers(2, 10))
def test_the_budget_prefix_is_the_budget_walks_prefix(
    pools: list[str], remaining: dict[str, int], limit: int
) -> None:
    """Multi-node's budget walk stops at its limit and counts the rest: the same prefix and the same "budget
    constrained" as walking every candidate (``_within_budget``)."""
    ordered: list[Any] = [_Pooled(f"n{i}", pool) for i, pool in enumerate(pools)]
    allowances: Any = {pool: _Allowance(left) for pool, left in remaining.items()}
    walked = MethodOutcome("multi-node")
    original = underutilized.explain
    underutilized.explain = lambda node, code, message, method="": message  # type: ignore[assignment]
    try:
        full = underutilized._within_budget(ordered, allowances, walked)
    finally:
        underutilized.explain = original
    prefix, turned_away = underutilized._budget_prefix(ordered, allowances, limit)
    assert prefix == full[:limit]
    assert turned_away == walked.budget_constrained
