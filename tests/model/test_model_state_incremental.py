"""ClusterState's StateNodes rebuilt per changed name equal a from-scratch build (issue 27).

After a write that cannot change which Node goes with which NodeClaim (a pod bound or gone, a status update, a
mark or a nomination) only the StateNodes of the names it touches are rebuilt; anything else rebuilds all. And
``node_changes_since`` names every StateNode that is another object than at an earlier version (or came or went).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_model_state import NOW, claim, node, pod

from reconciler.state.cluster import ClusterState

NAMES = ("n0", "n1", "n2", "c0", "c1")


def fresh(state: ClusterState, marked: set[str], nominated: dict[str, Any]) -> ClusterState:
    manifests = [*state.node_manifests.values(), *state.nodeclaim_manifests.values(), *state.pod_manifests.values(),
                 *state.persistent_volume_claims.values()]
    rebuilt = ClusterState.from_manifests(manifests)
    rebuilt.mark_for_deletion(*marked)
    for name, until in nominated.items():
        rebuilt.nominate(name, until)
    return rebuilt


def apply(state: ClusterState, move: tuple[Any, ...], marked: set[str], nominated: dict[str, Any]) -> None:
    """One generated change; ``marked`` and ``nominated`` follow the flags it sets."""
    kind = move[0]
    if kind == "pod":
        state.upsert(pod(f"p{move[1]}", move[2], cpu=move[3]))
    elif kind == "unpod":
        state.remove({"kind": "Pod", "metadata": {"name": f"p{move[1]}", "namespace": "default"}})
    elif kind == "node":
        state.upsert(node(move[1], f"aws:///{move[2]}" if move[2] else ""))
    elif kind == "unnode":
        state.remove({"kind": "Node", "metadata": {"name": move[1]}})
    elif kind == "claim":
        manifest = claim(move[1], f"aws:///{move[2]}" if move[2] else "", initialized=move[3])
        if move[3]:
            manifest["status"]["nodeName"] = move[1].replace("c", "n")
        state.upsert(manifest)
    elif kind == "unclaim":
        state.remove({"kind": "NodeClaim", "metadata": {"name": move[1]}})
    elif kind == "deleting":
        manifest = claim(move[1], "aws:///i-0")
        manifest["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        state.upsert(manifest)
    elif kind == "mark":
        if move[2]:
            state.mark_for_deletion(move[1])
            marked.add(move[1])
        else:
            state.unmark_for_deletion(move[1])
            marked.discard(move[1])
    elif kind == "nominate":
        nominated[move[1]] = NOW + timedelta(minutes=move[2])
        state.nominate(move[1], nominated[move[1]])
    elif kind == "pvc":
        state.upsert({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                      "metadata": {"name": "data", "namespace": "default"},
                      "spec": {"storageClassName": f"sc{move[1]}"}})


operations = st.lists(
    st.one_of(
        st.tuples(st.just("pod"), st.integers(0, 9), st.sampled_from([*NAMES, ""]), st.sampled_from(["1", "2"])),
        st.tuples(st.just("unpod"), st.integers(0, 9)),
        st.tuples(st.just("node"), st.sampled_from(NAMES[:3]), st.sampled_from(["i-0", "i-1", "i-2", ""])),
        st.tuples(st.just("unnode"), st.sampled_from(NAMES[:3])),
        st.tuples(st.just("claim"), st.sampled_from(NAMES), st.sampled_from(["i-0", "i-1", "i-3", ""]),
                  st.booleans()),
        st.tuples(st.just("unclaim"), st.sampled_from(NAMES)),
        st.tuples(st.just("deleting"), st.sampled_from(NAMES)),
        st.tuples(st.just("mark"), st.sampled_from(NAMES), st.booleans()),
        st.tuples(st.just("nominate"), st.sampled_from(NAMES), st.integers(-1, 1)),
        st.tuples(st.just("pvc"), st.integers(0, 1)),
        st.tuples(st.just("look"),),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations)
@example([("node", "n0", "i-1"), ("claim", "c1", "i-1", False), ("node", "n0", "i-2")])  # the claim lets go
@example([("claim", "c1", "i-1", False), ("node", "n0", "i-1"), ("claim", "c1", "i-3", False)])
@example([("node", "n0", "i-0"), ("claim", "c0", "", True), ("mark", "c0", True), ("pod", 1, "n0", "1")])
@example([("node", "n0", "i-0"), ("node", "n1", ""), ("claim", "c1", "i-0", True), ("claim", "c1", "i-0", True)])
@example([("deleting", "n1"), ("node", "n1", "i-0"), ("node", "n0", "i-0")])  # a second Node for one NodeClaim
@example([("claim", "c0", "i-1", False), ("claim", "c1", "i-1", False), ("node", "n0", "i-1"),
          ("unclaim", "c1")])  # two NodeClaims with one provider ID, then one again
def test_state_nodes_after_random_changes_equal_a_fresh_build(moves: list[tuple[Any, ...]]) -> None:
    state = ClusterState()
    marked: set[str] = set()
    nominated: dict[str, Any] = {}
    seen: list[tuple[int, dict[str, Any]]] = []
    for move in moves:
        apply(state, move, marked, nominated)
        current = state.state_nodes_by_name()
        rebuilt = fresh(state, marked, nominated)
        expected = rebuilt.state_nodes_by_name()
        assert list(current) == list(expected)
        # Re-matching only the written names finds what matching every Node and NodeClaim finds.
        assert state._claim_of == rebuilt._claim_of
        assert {k: sorted(v) for k, v in state._keys_of_claim.items()} == \
            {k: sorted(v) for k, v in rebuilt._keys_of_claim.items()}
        assert list(current.values()) == list(expected.values())
        assert state.deleting_nodeclaim_manifests() == [
            m for m in state.nodeclaim_manifests.values() if m["metadata"].get("deletionTimestamp")]
        generation = state.nodes_generation
        for earlier, nodes in seen:
            changes = state.node_changes_since(earlier)
            assert changes is not None
            assert changes >= {name for name in {*nodes, *current} if nodes.get(name) is not current.get(name)}
        seen.append((generation, dict(current)))


def test_a_node_or_nodeclaim_write_rematches_only_the_names_it_can_move() -> None:
    state = ClusterState.from_manifests([*(node(f"n{i}", f"aws:///i-{i}") for i in range(50)),
                                         *(claim(f"c{i}", f"aws:///i-{i}") for i in range(50))])
    state.state_nodes()
    generation = state.nodes_generation
    with mock.patch.object(ClusterState, "_match_claims", side_effect=AssertionError("matched every name")):
        state.upsert(claim("c50", "aws:///i-50"))  # launched: in flight, a StateNode of its own
        assert "c50" in state.state_nodes_by_name()
        state.upsert(node("n50", "aws:///i-50"))  # registered: its Node takes it over
        state.remove({"kind": "NodeClaim", "metadata": {"name": "c7"}})  # n7 is left without a NodeClaim
        after = state.state_nodes_by_name()
    assert "c50" not in after and after["n50"].nodeclaim_name == "c50" and after["n7"].nodeclaim is None
    assert state.node_changes_since(generation) == {"c50", "n50", "n7"}


def test_a_pod_write_rebuilds_only_its_node() -> None:
    state = ClusterState.from_manifests([*(node(f"n{i}", f"aws:///i-{i}") for i in range(50)),
                                         *(claim(f"c{i}", f"aws:///i-{i}") for i in range(50))])
    before = state.state_nodes_by_name()
    generation = state.nodes_generation
    state.upsert(pod("p", "n7"))
    state.mark_for_deletion("c9")  # by NodeClaim name: the StateNode of its Node
    after = state.state_nodes_by_name()
    assert state.node_changes_since(generation) == {"n7", "n9"}
    assert [name for name in after if after[name] is not before[name]] == ["n7", "n9"]
    assert after["n9"].marked_for_deletion and "default/p" in after["n7"].pods


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations, st.integers(0, 3))
def test_views_kept_across_versions_equal_views_computed_afresh(moves: list[tuple[Any, ...]], every: int) -> None:
    """``node_values``/``node_counts`` views read every ``every`` changes (so a view catches up several versions
    at once) equal the same computation over every node."""
    from reconciler.disruption.candidates import _budget_keys
    from reconciler.state.views import node_counts, node_values

    state = ClusterState()
    for index, move in enumerate(moves):
        apply(state, move, set(), {})
        if every and index % every:
            continue
        nodes = state.state_nodes()
        pods = node_values(state, "test.pods", lambda n: sorted(n.pods)).values
        assert pods == {n.name: sorted(n.pods) for n in nodes} and list(pods) == [n.name for n in nodes]
        unordered = node_values(state, "test.unordered", lambda n: sorted(n.pods), ordered=False).values
        assert unordered == {n.name: sorted(n.pods) for n in nodes}
        counts: dict[Any, int] = {}
        for n in nodes:
            for key in _budget_keys(n):
                counts[key] = counts.get(key, 0) + 1
        assert node_counts(state, "test.budget", _budget_keys) == counts
        assert state.nodepool_node_counts() == {"default": sum(1 for n in nodes if n.nodepool == "default")} \
            if any(n.nodepool for n in nodes) else state.nodepool_node_counts() == {}


def test_a_status_write_sharing_the_spec_reuses_its_parse_only_for_never_edited_manifests() -> None:
    from reconciler.model.node import NodeClaim

    first = claim("c0", "aws:///i-0")
    status_write = {**first, "status": {**first["status"], "lastPodEventTime": "2026-01-01T00:00:00Z"}}
    for immutable in (True, False):
        state = ClusterState(immutable_manifests=immutable)
        state.upsert(first)
        before = state.nodeclaims["c0"]
        state.upsert(status_write)
        after = state.nodeclaims["c0"]
        assert after == NodeClaim.from_manifest(status_write) and after.last_pod_event_time is not None
        assert (after.requirements is before.requirements) is immutable
    # A new spec (not the same object) is parsed again, even when it is equal.
    state = ClusterState(immutable_manifests=True)
    state.upsert(first)
    again = {**first, "spec": {**first["spec"], "taints": [{"key": "k", "effect": "NoSchedule"}]}}
    state.upsert(again)
    assert state.nodeclaims["c0"] == NodeClaim.from_manifest(again) and state.nodeclaims["c0"].taints
