"""How much of a node's ``expireAfter`` is still ahead (Karpenter's ``LifetimeRemaining``). Pure.

Disruption scales a candidate's eviction cost by it and static provisioning removes surplus nodes in that
order; it lives here, below disruption, because provisioning must not depend on disruption.
"""

from __future__ import annotations

import functools
from datetime import datetime

from reconciler.model.durations import DurationError, parse_length
from reconciler.model.nodepool import NodePool
from reconciler.state.node import StateNode


@functools.lru_cache(maxsize=256)
def _duration_seconds(raw: str) -> float | None:
    try:
        return parse_length(raw)
    except DurationError:
        return None


def lifetime_remaining(node: StateNode, nodepool: NodePool, now: datetime) -> float:
    """Fraction of the node's expireAfter still ahead (1 when it never expires)."""
    return remaining_fraction(node_lifetime(node, nodepool), now)


def node_lifetime(node: StateNode, nodepool: NodePool) -> tuple[float, datetime] | None:
    """(expireAfter in seconds, NodeClaim creation) when the node expires at all."""
    claim = node.nodeclaim
    raw = (claim.expire_after if claim else None) or nodepool.expire_after
    created = claim.creation_timestamp if claim else None
    if not raw or raw == "Never" or created is None:
        return None
    total = _duration_seconds(str(raw))
    if total is None or total <= 0:
        return None
    return total, created


def remaining_fraction(lifetime: tuple[float, datetime] | None, now: datetime) -> float:
    if lifetime is None:
        return 1.0
    total, created = lifetime
    return min(1.0, max(0.0, (total - (now - created).total_seconds()) / total))
