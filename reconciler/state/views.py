"""Views over every StateNode kept across versions of the nodes, recomputed only for the nodes that changed.

A disruption pass, the provisioner and every scheduling run read several views of the whole cluster (slot
bases, topology's counted pods, budget counts, nodes inside consolidateAfter, ...). Each write to the cluster
makes a new version of the nodes, and building such a view from every node again after each write made a
plan's hundreds of passes O(nodes) each many times over. A ``PerNodeView`` keeps ``compute(node)`` per node name
and, on a new version, recomputes it only for the names ``ClusterState.node_changes_since`` reports (all of
them when that is unknown, or when the view's other inputs changed); ``compute`` must depend on the StateNode
and those inputs alone.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from reconciler.state.node import StateNode

T = TypeVar("T")


class ClusterState(Protocol):
    """What these views read of ``reconciler.state.cluster.ClusterState`` (which uses them itself)."""

    carried: dict[str, Any]

    @property
    def nodes_generation(self) -> int: ...

    def node_changes_since(self, generation: int) -> frozenset[str] | None: ...

    def state_nodes_by_name(self) -> Mapping[str, StateNode]: ...


@dataclass(slots=True)
class NodeValues(Generic[T]):
    """``compute(node)`` for every StateNode, in ``state_nodes`` order, at one version of the nodes."""

    generation: int
    inputs: tuple[Any, ...]
    values: dict[str, T]
    changed: frozenset[str] | None  # names recomputed from the previous version (None: all of them)
    derived: dict[Hashable, Any] = field(default_factory=dict)  # what callers derive from ``values``, per version


def node_values(
    state: ClusterState, name: str, compute: Callable[[StateNode], T], inputs: tuple[Any, ...] = (), *,
    ordered: bool = True,
) -> NodeValues[T]:
    """The view ``name`` at the current version of the nodes; ``inputs`` (compared by identity, item by item):
    what else ``compute`` reads, all of it recomputed when they change. ``ordered=False``: a view only looked up
    by name, whose new names go last (putting them in ``state_nodes`` order copied every entry)."""
    generation = state.nodes_generation
    kept: NodeValues[T] | None = state.carried.get(name)
    if kept is not None and kept.generation == generation and _same(kept.inputs, inputs):
        return kept
    nodes = state.state_nodes_by_name()
    changes = state.node_changes_since(kept.generation) if kept is not None and _same(kept.inputs, inputs) else None
    if kept is None or changes is None:
        values = {node_name: compute(node) for node_name, node in nodes.items()}
    else:
        values = dict(kept.values)
        reordered = False
        for node_name in changes:
            node = nodes.get(node_name)
            if node is None:
                values.pop(node_name, None)
            else:
                reordered = reordered or node_name not in values
                values[node_name] = compute(node)
        if reordered and ordered:  # a new name goes where ``state_nodes`` has it (C-level: every name is in ``values``)
            values = dict(zip(nodes, map(values.__getitem__, nodes), strict=True))
    found = NodeValues(generation, inputs, values, changes)
    state.carried[name] = found
    return found


def _same(seen: tuple[Any, ...], given: tuple[Any, ...]) -> bool:
    return len(seen) == len(given) and all(a is b for a, b in zip(seen, given, strict=True))


@dataclass(slots=True)
class _Tally:
    generation: int
    inputs: tuple[Any, ...]
    keys: dict[str, tuple[Hashable, ...]]
    totals: dict[Hashable, int]


def node_counts(
    state: ClusterState, name: str, keys_of: Callable[[StateNode], tuple[Hashable, ...]], inputs: tuple[Any, ...] = ()
) -> dict[Hashable, int]:
    """How many nodes count toward each key (``keys_of(node)``: the keys a node counts toward, each once),
    brought up to date by the nodes that changed; keys no node counts toward are left out. A new dict."""
    generation = state.nodes_generation
    kept: _Tally | None = state.carried.get(name)
    if kept is None or kept.generation != generation or not _same(kept.inputs, inputs):
        nodes = state.state_nodes_by_name()
        changes = state.node_changes_since(kept.generation) if kept is not None and _same(kept.inputs, inputs) \
            else None
        if kept is None or changes is None:
            kept = _Tally(generation, inputs, {}, {})
            changes = frozenset(nodes)
        else:  # brought up to date in place: only ``carried`` holds a tally (copying its keys was O(nodes))
            kept.generation = generation
        state.carried.pop(name, None)  # put back once up to date: a ``keys_of`` that raises leaves no half tally
        totals = kept.totals
        for node_name in changes:
            for key in kept.keys.pop(node_name, ()):
                totals[key] -= 1
                if not totals[key]:
                    del totals[key]
            node = nodes.get(node_name)
            if node is not None:
                keys = kept.keys[node_name] = keys_of(node)
                for key in keys:
                    totals[key] = totals.get(key, 0) + 1
        state.carried[name] = kept
    return dict(kept.totals)
