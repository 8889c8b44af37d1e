"""The kept per-node view (``disruption.kept_per_node``) equals its values computed from scratch (issue 27).

The assessment, the drifted names and consolidation's filter are each such a view; their own property tests are in
``test_disruption_kept_views.py``. Here the helper itself is driven through random sequences of node changes
(new versions, names reported changed though unchanged, nodes coming and going), clock moves (forward, to a
moment exactly, backwards), other inputs replaced and fingerprints changed, and changes too far back to tell; after
every step the view equals a judgement of every node afresh, judging again no more names than
changed or came due, with a heap of moments no larger than twice the live ones (plus a little).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from disruption_factories import LARGE, NOW, SMALL, cluster, node_of, nodepool
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reconciler.disruption.budgets import REASON_DRIFTED
from reconciler.disruption.candidates import Catalog, assess
from reconciler.disruption.drift_method import drift
from reconciler.disruption.kept_assessment import kept_assess
from reconciler.disruption.kept_per_node import _SLACK, Wakes, kept_node_view
from reconciler.disruption.pass_context import PassContext
from reconciler.disruption.types import PassClock
from reconciler.model.pdb import PdbLimits
from reconciler.settings import DEFAULT_FEATURE_GATES, Settings

NAMES = ("a", "b", "c", "d", "e")


@dataclass(frozen=True, eq=False)
class Item:
    """A stand-in for a StateNode: its value changes as the clock crosses each of its ``moments``."""

    name: str
    base: int
    moments: tuple[datetime, ...]
    managed: bool = True


class Versions:
    """A stand-in for ``ClusterState``'s versions of the nodes (``kept_per_node.NodeVersions``)."""

    def __init__(self) -> None:
        self.carried: dict[str, Any] = {}
        self.items: dict[str, Item] = {}
        self.generation = 0
        self.journal: list[tuple[int, frozenset[str]]] = []
        self.forgotten = 0  # changes at or before this generation are too far back to tell

    @property
    def nodes_generation(self) -> int:
        return self.generation

    def node_changes_since(self, generation: int) -> frozenset[str] | None:
        if generation < self.forgotten:
            return None
        return frozenset().union(*(names for seen, names in self.journal if seen > generation))

    def state_nodes_by_name(self) -> Mapping[str, Any]:
        return dict(sorted(self.items.items()))

    def change(self, name: str, item: Item | None) -> None:
        if item is None:
            self.items.pop(name, None)
        else:
            self.items[name] = item
        self.generation += 1
        self.journal.append((self.generation, frozenset([name])))


def value_at(item: Item, inputs: object, fingerprint: int, now: datetime) -> tuple[Any, datetime | None]:
    """The judgement from scratch: the value at ``now`` and the next moment it changes (None: never)."""
    if not item.managed:
        return None, None
    moments = sorted(item.moments)
    crossed = sum(1 for m in moments if m <= now)
    later = [m for m in moments if m > now]
    return (item.name, item.base, crossed, id(inputs), fingerprint), (later[0] if later else None)


steps = st.lists(
    st.one_of(
        st.tuples(st.just("advance"), st.sampled_from([0, 1, 9, 10, 30, 61, 300])),
        st.tuples(st.just("back"), st.sampled_from([1, 30])),
        st.tuples(st.just("set"), st.sampled_from(NAMES), st.integers(0, 3),
                  st.lists(st.sampled_from([5, 10, 20, 40, 60, 120, 300]), max_size=3), st.booleans()),
        st.tuples(st.just("touch"), st.sampled_from(NAMES)),
        st.tuples(st.just("drop"), st.sampled_from(NAMES)),
        st.tuples(st.just("inputs")),
        st.tuples(st.just("fingerprint"), st.integers(0, 2)),
        st.tuples(st.just("forget")),
        st.tuples(st.just("pass")),
    ),
    max_size=40,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
# A stale moment (c's first) comes up behind a live one at the same moment (b's): not a reason to judge c again.
@example([("set", "c", 0, [20], True), ("advance", 10)])
# A node judged again and again before its moments come due, then the clock past them all.
@example([("set", "a", 1, [5], True), ("set", "a", 2, [10], True), ("touch", "a"), ("advance", 5),
          ("set", "b", 1, [5, 40], False), ("advance", 61)])
def test_the_kept_view_equals_a_judgement_from_scratch(moves: list[tuple[Any, ...]]) -> None:
    versions = Versions()
    for name in NAMES[:3]:
        versions.change(name, Item(name, 0, (NOW + timedelta(seconds=10),)))
    now, inputs, fingerprint = NOW, object(), 0
    judged: list[str] = []

    def judge(item: Item, clock: PassClock) -> tuple[Any, datetime | None]:
        judged.append(item.name)
        return value_at(item, inputs, fingerprint, clock.now)

    def check(before: Any) -> None:
        judged.clear()
        changes = (versions.node_changes_since(before.generation) if before is not None else None)
        kept_now = before.now if before is not None else None
        due = ({n for n, m in before.wakes.moments.items() if m <= now} if before is not None else set())
        view = kept_node_view(versions, "view", judge, now, inputs=(inputs,), fingerprint=fingerprint)
        fresh = {}
        for name, item in versions.state_nodes_by_name().items():
            value, moment = value_at(item, inputs, fingerprint, now)
            if value is not None:
                fresh[name] = (value, moment)
        assert dict(view.values) == {name: value for name, (value, _) in fresh.items()}
        assert dict(view.wakes.moments) == {name: m for name, (_, m) in fresh.items() if m is not None}
        assert len(view.wakes) <= 2 * len(view.wakes.moments) + _SLACK
        assert view.clock.now == now
        if before is not None and changes is not None and kept_now is not None and kept_now <= now \
                and view is before:  # brought up to date, not judged afresh: only the changed and due names
            assert set(judged) <= changes | due and len(judged) == len(set(judged))

    check(None)
    for move in moves:
        kind = move[0]
        before = versions.carried.get("view")
        if kind == "advance":
            now += timedelta(seconds=move[1])
        elif kind == "back":
            now -= timedelta(seconds=move[1])
        elif kind == "set":
            moments = tuple(now + timedelta(seconds=s) for s in move[3])  # ahead of the clock
            versions.change(move[1], Item(move[1], move[2], moments, managed=move[4]))
        elif kind == "touch":  # reported changed, the same object
            if move[1] in versions.items:
                versions.change(move[1], versions.items[move[1]])
        elif kind == "drop":
            versions.change(move[1], None)
        elif kind == "inputs":
            inputs = object()
        elif kind == "fingerprint":
            fingerprint = move[1]
        elif kind == "forget":
            versions.change("a", versions.items.get("a"))
            versions.forgotten = versions.generation
        check(before)


def test_the_heap_of_moments_stays_bounded_however_often_a_node_is_judged_again() -> None:
    """Each judgement again gives a node a new moment: the old ones are dropped, not left in the heap until due."""
    versions = Versions()
    for name in NAMES:
        versions.change(name, Item(name, 0, (NOW + timedelta(seconds=100_000),)))
    now = NOW

    def judge(item: Item, clock: PassClock) -> tuple[Any, datetime | None]:
        return value_at(item, None, 0, clock.now)

    for serial in range(5_000):
        name = NAMES[serial % 2]  # two nodes changing again and again, each with a later moment
        versions.change(name, Item(name, serial, (NOW + timedelta(seconds=100_000 + serial),)))
        view = kept_node_view(versions, "view", judge, now)
        assert len(view.wakes) <= 2 * len(NAMES) + _SLACK
    assert sorted(view.wakes.moments) == sorted(NAMES)
    now += timedelta(seconds=100_000 + 5_000)
    view = kept_node_view(versions, "view", judge, now)
    assert not view.wakes.moments and len(view.wakes) == 0


def test_wakes_report_a_name_once_at_its_current_moment() -> None:
    wakes = Wakes()
    wakes.schedule("n", NOW + timedelta(seconds=10))
    wakes.schedule("n", NOW + timedelta(seconds=20))  # the 10 s entry is stale now
    wakes.schedule("m", NOW + timedelta(seconds=10))
    wakes.schedule("m", None)
    assert wakes.quiet(NOW + timedelta(seconds=15))
    assert wakes.due(NOW + timedelta(seconds=15)) == set()
    assert wakes.due(NOW + timedelta(seconds=20)) == {"n"}
    assert wakes.due(NOW + timedelta(seconds=30)) == set() and len(wakes) == 0


def test_a_kept_candidate_carries_no_drift_from_an_earlier_pass() -> None:
    """Drift found in one pass is that pass's (``PassContext.drift_of``): the same kept Candidate in the next
    pass is not drifted for drift's method until that pass finds it so."""
    state = cluster(nodepool(), node_of("n0", LARGE, created=NOW - timedelta(hours=2)))
    types = {"default": [SMALL]}  # the node's type is no longer offered: it drifted
    settings_ = Settings(feature_gates=dict(DEFAULT_FEATURE_GATES))
    first = PassContext(state, types, settings_, NOW, str)
    (candidate,) = first.assessment.candidates
    assert first.drifted(candidate) and first.drift_of(candidate) is not None

    later = PassContext(state, types, settings_, NOW + timedelta(seconds=10), str)
    assert later.assessment.candidates == [candidate] and later.assessment.candidates[0] is candidate  # kept
    assert later.drift_of(candidate) is None  # not asked this pass
    assert drift(later, [candidate], later.allowances(REASON_DRIFTED)).eligible == 0
    assert later.drifted(candidate)
    assert drift(later, [candidate], later.allowances(REASON_DRIFTED)).eligible == 1


def test_the_kept_assessment_lists_nodes_in_state_nodes_order_after_one_comes_back() -> None:
    """The view's values are in no order; the assessment is in ``state_nodes`` order, as ``assess`` has it."""
    state = cluster(nodepool(), *(node_of(name, SMALL, created=NOW - timedelta(hours=2)) for name in ("a", "b", "c")))
    catalog = Catalog.of({"default": [SMALL]})
    pdbs = PdbLimits.from_manifests([], [])
    assert [c.name for c in kept_assess(state, catalog, pdbs, NOW).candidates] == ["a", "b", "c"]
    state.remove({"kind": "Node", "metadata": {"name": "a"}})
    state.remove({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "a-claim"}})
    assert [c.name for c in kept_assess(state, catalog, pdbs, NOW).candidates] == ["b", "c"]
    for manifest in node_of("a", SMALL, created=NOW - timedelta(hours=2)):
        state.upsert(manifest)
    names = [c.name for c in kept_assess(state, catalog, pdbs, NOW).candidates]
    assert names == [n.name for n in state.state_nodes()]
    assert names == [c.name for c in assess(state, catalog, pdbs, NOW).candidates]
