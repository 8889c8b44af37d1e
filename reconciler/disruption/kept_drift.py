"""The names of the drifted nodes, kept from pass to pass and brought up to date by the nodes that changed.

Drift's filter asked ``node_drift`` of every candidate every pass, though almost no node drifts and a node's
drift reason changes only when its StateNode, its NodePool, its EC2NodeClass or the catalog changes, or when
the clock crosses the instance-type check's age bound (``NodeDrift.until``). This view keeps the drift reason of
the drifted nodes as a ``kept_per_node`` view: a later pass asks again only the names that changed and those
whose age bound the clock has reached; every node is asked again when the catalog, a NodePool or an
EC2NodeClass is another object, when the changes are too far back to tell, or when the clock goes backwards.

Held between passes: the drifted nodes' names and reasons, the age bounds still ahead, and their frozenset. Pure.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from reconciler.disruption.candidates import Catalog, node_drift
from reconciler.disruption.kept_per_node import kept_node_view
from reconciler.disruption.types import PassClock
from reconciler.state.cluster import ClusterState
from reconciler.state.node import StateNode

_KEY = "disruption.drifted_names"


def drifted_names(state: ClusterState, catalog: Catalog, now: datetime) -> frozenset[str]:
    """Every node for which ``node_drift(state, node, its NodePool, catalog.types(its pool), now)`` is not None
    (managed nodes with a NodeClaim whose NodePool is known), kept from pass to pass (see the module)."""

    def reason(node: StateNode, clock: PassClock) -> tuple[tuple[str, str] | None, datetime | None]:
        """The node's drift reason at the clock, and its age bound while it may still change."""
        if not node.managed or node.nodeclaim is None:
            return None, None
        pool = state.nodepools.get(node.nodepool)
        if pool is None:
            return None, None
        found = node_drift(state, node, pool, catalog.types(node.nodepool), clock.now)
        memo = node.memo_get("disruption.drift")
        return found, memo.until if memo is not None else None

    view = kept_node_view(state, _KEY, reason, now, inputs=catalog_inputs(state, catalog))
    if view.answer is None:
        view.answer = frozenset(view.values)
    drifted: frozenset[str] = view.answer
    return drifted


def catalog_inputs(state: ClusterState, catalog: Catalog) -> tuple[Any, ...]:
    """The catalog, every NodePool and its EC2NodeClass: what a node's drift reason and its assessment read
    besides the node, the PDBs and the clock (compared by identity, ``same_objects``)."""
    found: list[Any] = [catalog]
    for pool in state.nodepools.values():
        found += (pool, state.nodeclass(pool))
    return tuple(found)
