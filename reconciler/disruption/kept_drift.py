"""The names of the drifted nodes, kept from pass to pass and brought up to date by the nodes that changed.

Drift's filter asked ``node_drift`` of every candidate every pass, though almost no node drifts and a node's
drift reason changes only when its StateNode, its NodePool, its EC2NodeClass or the catalog changes, or when
the clock crosses the instance-type check's age bound (``NodeDrift.until``). This view keeps the set of nodes
whose ``node_drift`` is not None and, for a later pass, recomputes only the names
``ClusterState.node_changes_since`` reports and those whose age bound the clock has reached (a heap of
moments); every node is asked again when the catalog, a NodePool or an EC2NodeClass is another object, when
the changes are too far back to tell, or when the clock goes backwards. Pure: reads the state and the clock.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconciler.disruption.candidates import Catalog, node_drift
from reconciler.state.cluster import ClusterState
from reconciler.state.node import StateNode

_KEY = "disruption.drifted_names"


@dataclass(slots=True)
class _KeptDrift:
    generation: int
    inputs: tuple[Any, ...]
    now: datetime
    drifted: frozenset[str]
    wakes: list[tuple[datetime, str]]  # heap: (age bound, node name) of nodes whose reason may still change


def drifted_names(state: ClusterState, catalog: Catalog, now: datetime) -> frozenset[str]:
    """Every node for which ``node_drift(state, node, its NodePool, catalog.types(its pool), now)`` is not None
    (managed nodes with a NodeClaim whose NodePool is known), kept from pass to pass (see the module)."""
    generation = state.nodes_generation
    inputs = catalog_inputs(state, catalog)
    kept: _KeptDrift | None = state.carried.get(_KEY)
    changes = None
    if kept is not None and kept.now <= now and same_objects(kept.inputs, inputs):
        changes = state.node_changes_since(kept.generation)
    if kept is None or changes is None:
        wakes: list[tuple[datetime, str]] = []
        drifted = {name for name, node in state.state_nodes_by_name().items() if _drifted(state, node, catalog,
                                                                                          now, wakes)}
        heapq.heapify(wakes)
    else:
        if not changes and generation == kept.generation and (not kept.wakes or now < kept.wakes[0][0]):
            kept.now = now
            return kept.drifted
        wakes, names = due(kept.wakes, now)
        names |= changes
        drifted = set(kept.drifted)
        nodes = state.state_nodes_by_name()
        found: list[tuple[datetime, str]] = []
        for name in names:
            drifted.discard(name)
            node = nodes.get(name)
            if node is not None and _drifted(state, node, catalog, now, found):
                drifted.add(name)
        push(wakes, found)
    result = frozenset(drifted)
    state.carried[_KEY] = _KeptDrift(generation, inputs, now, result, wakes)
    return result


def _drifted(
    state: ClusterState, node: StateNode, catalog: Catalog, now: datetime, wakes: list[tuple[datetime, str]]
) -> bool:
    """``node_drift`` of the node at ``now``; its age bound, when it has one, is added to ``wakes``."""
    if not node.managed or node.nodeclaim is None:
        return False
    pool = state.nodepools.get(node.nodepool)
    if pool is None:
        return False
    found = node_drift(state, node, pool, catalog.types(node.nodepool), now) is not None
    memo = node.memo_get("disruption.drift")
    if memo is not None and memo.until is not None:
        wakes.append((memo.until, node.name))
    return found


def catalog_inputs(state: ClusterState, catalog: Catalog) -> tuple[Any, ...]:
    """The catalog, every NodePool and its EC2NodeClass: what a node's drift reason and its assessment read
    besides the node, the PDBs and the clock (compared by identity, ``same_objects``)."""
    found: list[Any] = [catalog]
    for pool in state.nodepools.values():
        found += (pool, state.nodeclass(pool))
    return tuple(found)


def due(wakes: list[tuple[datetime, str]], now: datetime) -> tuple[list[tuple[datetime, str]], set[str]]:
    """A copy of the heap ``wakes`` without the moments ``now`` has reached, and the names those were for."""
    left = list(wakes)
    names = set()
    while left and left[0][0] <= now:
        names.add(heapq.heappop(left)[1])
    return left, names


def push(wakes: list[tuple[datetime, str]], found: list[tuple[datetime, str]]) -> None:
    for wake in found:
        heapq.heappush(wakes, wake)


def same_objects(seen: tuple[Any, ...], given: tuple[Any, ...]) -> bool:
    return len(seen) == len(given) and all(a is b for a, b in zip(seen, given, strict=True))
