"""Topology's counted pods, kept per node across versions of the nodes, equal a from-scratch count (issue 27).

``_counted_pods`` keeps each node's counted pods on its StateNode and the namespaces they are in as per-namespace
node counts brought up to date by the nodes that changed (``state_views.node_counts``); after random pod and node
writes the by-node lists, their order, the flat list and the namespaces equal those computed from every node of
the same version.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "model"))

from test_model_state import node, pod

from reconciler.scheduling.context import _counted_pods, _node_counted_pods
from reconciler.state.cluster import ClusterState

NODES = ("n0", "n1", "n2")
NAMESPACES = ("default", "team-a", "team-b")


def counted(state: ClusterState) -> tuple[Any, ...]:
    by_node, flat, namespaces = _counted_pods(state)
    # As a list of pairs: the by-node map's order is compared too (the map is kept from version to version).
    return [(name, [c.pod.key for c in pods]) for name, pods in by_node.items()], [c.pod.key for c in flat], namespaces


def from_scratch(state: ClusterState) -> tuple[Any, ...]:
    """The same views computed from every StateNode of this version, nothing kept."""
    nodes = state.state_nodes_by_name()
    by_node = {name: [c.pod.key for c in _node_counted_pods(nodes[name])[0]]
               for name in state.bound_node_names() if name in nodes}
    flat = [key for keys in by_node.values() for key in keys]
    return list(by_node.items()), flat, {key.partition("/")[0] for key in flat}


operations = st.lists(
    st.one_of(
        st.tuples(st.just("pod"), st.integers(0, 7), st.sampled_from([*NODES, ""]), st.sampled_from(NAMESPACES)),
        st.tuples(st.just("unpod"), st.integers(0, 7), st.sampled_from(NAMESPACES)),
        st.tuples(st.just("node"), st.sampled_from(NODES)),
        st.tuples(st.just("unnode"), st.sampled_from(NODES)),
        st.tuples(st.just("look"),),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations)
def test_counted_pods_after_random_changes_equal_a_fresh_count(moves: list[tuple[Any, ...]]) -> None:
    state = ClusterState()
    for move in moves:
        if move[0] == "pod":
            state.upsert(pod(f"p{move[1]}", move[2], namespace=move[3]))
        elif move[0] == "unpod":
            state.remove({"kind": "Pod", "metadata": {"name": f"p{move[1]}", "namespace": move[2]}})
        elif move[0] == "node":
            state.upsert(node(move[1], f"aws:///{move[1]}"))
        elif move[0] == "unnode":
            state.remove({"kind": "Node", "metadata": {"name": move[1]}})
        else:
            continue  # no write: the views are read again at the same version
        assert counted(state) == from_scratch(state)
