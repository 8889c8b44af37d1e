"""A per-node view kept from pass to pass: one value per node name, judged again only for the names that changed
and for those whose value holds only until a moment the clock has reached.

A disruption pass reads several views with one value per node (each node's verdict, the drifted nodes,
consolidation's chosen candidates). After a single-node command only a few nodes change, so such a view keeps
its values and, on the next pass, judges again only those names, plus the names whose judgement said "until":
a judgement returns the node's value and the moment, if any, at which the clock alone may change it (a
nomination or a do-not-disrupt duration running out, an age bound). The moments wait in ``Wakes``.

``kept_node_view`` keys such a view by the version of the nodes (``ClusterState.node_changes_since``), by the
identity of its other inputs (catalog, NodePools, ...) and by a fingerprint compared by value (the PDBs): any
of those changed, the changes too far back to tell, or the clock gone backwards, and every node is judged
again. ``KeptPerNode.refresh`` is the part a view whose changes are found otherwise (consolidation's filter, by
the identity of its candidates) calls itself.

What a view holds: its values by name (a judgement's None is not kept), each name's next moment and their heap,
the version of the nodes, the identity of its inputs and the fingerprint it was judged against, one
``PassClock`` (values kept from pass to pass may read it: ``Candidate.assessed_at``) and the caller's answer
derived from the values. No ClusterState, and no StateNode besides what its values hold. Pure.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from reconciler.disruption.types import PassClock
from reconciler.state.node import StateNode
from reconciler.state.views import ClusterState as NodeVersions  # what it reads of ``ClusterState``

T = TypeVar("T")
V = TypeVar("V")

# A judgement of one item (a StateNode, a Candidate) at the view's clock: its value (None: nothing to keep) and
# the moment, if any, from which the same item may be judged otherwise.
Judge = Callable[[T, PassClock], tuple[V | None, datetime | None]]

# Stale entries the heap may hold beyond as many as the live ones before it is rebuilt.
_SLACK = 16


class Wakes:
    """Names due at moments: a heap of (moment, name) and each name's current moment beside it.

    A name judged again replaces its moment; the heap entry of the old one stays behind and is recognised as
    stale when it comes up (lazy deletion: it is not the name's current moment). The heap is rebuilt from the
    current moments once stale entries outnumber live ones (plus ``_SLACK``): its size stays within twice the
    names that have a moment, however often they are judged again."""

    __slots__ = ("_heap", "_moments")

    def __init__(self, moments: dict[str, datetime] | None = None) -> None:
        self._moments: dict[str, datetime] = moments or {}
        self._heap = [(moment, name) for name, moment in self._moments.items()]
        heapq.heapify(self._heap)

    def __len__(self) -> int:
        """The heap's size, stale entries included."""
        return len(self._heap)

    @property
    def moments(self) -> Mapping[str, datetime]:
        return self._moments

    def schedule(self, name: str, moment: datetime | None) -> None:
        """``name``'s next moment from now on (None: none)."""
        moments = self._moments
        if moment is None:
            if moments.pop(name, None) is None:
                return
        elif moments.get(name) == moment:
            return  # its entry is in the heap already
        else:
            moments[name] = moment
            heapq.heappush(self._heap, (moment, name))
        if len(self._heap) > 2 * len(moments) + _SLACK:
            self._heap = [(when, key) for key, when in moments.items()]
            heapq.heapify(self._heap)

    def quiet(self, now: datetime) -> bool:
        """Whether no name's moment has been reached by ``now`` (stale entries on top are dropped)."""
        heap, moments = self._heap, self._moments
        while heap and heap[0][0] <= now:
            moment, name = heap[0]
            if moments.get(name) == moment:
                return False
            heapq.heappop(heap)
        return True

    def due(self, now: datetime) -> set[str]:
        """The names whose moment ``now`` has reached, taken out (judging them again sets their next one)."""
        heap, moments = self._heap, self._moments
        names = set()
        while heap and heap[0][0] <= now:
            moment, name = heapq.heappop(heap)
            if moments.get(name) == moment:
                del moments[name]
                names.add(name)
        return names


@dataclass(slots=True, eq=False)
class KeptPerNode(Generic[V]):
    """One value per node name, kept from pass to pass (see the module)."""

    now: datetime  # the clock it was last brought up to date at
    clock: PassClock  # shared with the values that read it; set to ``now``
    values: dict[str, V]
    wakes: Wakes
    generation: int = -1  # the version of the nodes (``kept_node_view``)
    inputs: tuple[Any, ...] = ()  # compared by identity
    fingerprint: Hashable = None  # compared by value
    answer: Any = None  # what the caller derives from ``values``: dropped whenever a name is judged again

    @classmethod
    def afresh(cls, items: Mapping[str, T], judge: Judge[T, V], now: datetime) -> KeptPerNode[V]:
        """Every item judged at ``now`` (values in ``items`` order)."""
        clock = PassClock(now)
        values: dict[str, V] = {}
        moments: dict[str, datetime] = {}
        for name, item in items.items():
            value, moment = judge(item, clock)
            if value is not None:
                values[name] = value
            if moment is not None:
                moments[name] = moment
        return cls(now, clock, values, Wakes(moments))

    def refresh(
        self, changed: Iterable[str], current: Callable[[str], T | None], judge: Judge[T, V], now: datetime
    ) -> list[tuple[str, V | None]]:
        """Judge again at ``now`` the ``changed`` names and those due by ``now``, each as ``current(name)``
        (None: gone). The names judged again, each with the value it had before (``values`` is in no
        particular order: a caller that needs one reads it through its own, e.g. ``state_nodes``)."""
        self.now = self.clock.now = now
        values, wakes, clock = self.values, self.wakes, self.clock
        rejudged: list[tuple[str, V | None]] = []
        for name in wakes.due(now).union(changed):
            item = current(name)
            before = values.get(name)
            if item is None:
                values.pop(name, None)
                wakes.schedule(name, None)
            else:
                value, moment = judge(item, clock)
                if value is None:
                    values.pop(name, None)
                else:
                    values[name] = value
                wakes.schedule(name, moment)
            rejudged.append((name, before))
        if rejudged:
            self.answer = None
        return rejudged


def kept_node_view(
    state: NodeVersions, key: str, judge: Judge[StateNode, V], now: datetime, *,
    inputs: tuple[Any, ...] = (), fingerprint: Hashable = None,
) -> KeptPerNode[V]:
    """The view ``key`` of ``state.carried`` judging every StateNode with ``judge``, brought up to date at ``now``
    (see the module); ``inputs`` (by identity) and ``fingerprint`` (by value): what else ``judge`` reads besides
    the node and the clock."""
    generation = state.nodes_generation
    kept: KeptPerNode[V] | None = state.carried.pop(key, None)  # put back once up to date
    changes = None
    if kept is not None and kept.now <= now and kept.fingerprint == fingerprint and same_objects(kept.inputs, inputs):
        changes = state.node_changes_since(kept.generation)
    if kept is None or changes is None:
        kept = KeptPerNode.afresh(state.state_nodes_by_name(), judge, now)
    elif not changes and kept.wakes.quiet(now):
        kept.now = kept.clock.now = now
    else:
        kept.refresh(changes, state.state_nodes_by_name().get, judge, now)
    kept.generation, kept.inputs, kept.fingerprint = generation, inputs, fingerprint
    state.carried[key] = kept
    return kept


def same_objects(seen: tuple[Any, ...], given: tuple[Any, ...]) -> bool:
    return len(seen) == len(given) and all(a is b for a, b in zip(seen, given, strict=True))
