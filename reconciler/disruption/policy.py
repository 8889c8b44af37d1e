"""A NodePool's consolidation settings and whether a node has been quiet long enough.

``consolidateAfter`` counts from the NodeClaim's last pod event
(``status.lastPodEventTime``: a non-DaemonSet pod bound, finished or
terminating), else from when it was initialized. ``Never`` disables both
emptiness and consolidation. Adze derives this from the NodeClaim at ``now``
instead of waiting for a controller to write the ``Consolidatable`` condition,
so a decision needs nothing but the snapshot and the time.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime, timedelta

from reconciler.model.durations import DurationError, format_duration_short, parse_length
from reconciler.model.node import NodeClaim
from reconciler.model.nodepool import NodePool
from reconciler.state.node import StateNode

WHEN_EMPTY = "WhenEmpty"
WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmptyOrUnderutilized"
BALANCED = "Balanced"
# Balanced approves a move when (savings share) / (disruption share) >= 1 / BALANCED_K.
BALANCED_K = 2


@dataclass(slots=True, frozen=True)
class ConsolidationSettings:
    consolidate_after: float | None  # seconds; None = Never
    policy: str

    @property
    def enabled(self) -> bool:
        return self.consolidate_after is not None


def settings_of(nodepool: NodePool) -> ConsolidationSettings:
    # Asked for every node of every pass: kept per NodePool object (immutable; the entry holds it, so its
    # id is not reused while kept).
    kept = _BY_POOL.get(id(nodepool))
    if kept is not None and kept[0] is nodepool:
        return kept[1]
    raw = nodepool.disruption.get("consolidateAfter", "0s")
    policy = str(nodepool.disruption.get("consolidationPolicy") or WHEN_EMPTY_OR_UNDERUTILIZED)
    found = _settings(raw if isinstance(raw, int | float | str) or raw is None else str(raw), policy)
    if len(_BY_POOL) >= 64:
        _BY_POOL.clear()
    _BY_POOL[id(nodepool)] = (nodepool, found)
    return found


_BY_POOL: dict[int, tuple[NodePool, ConsolidationSettings]] = {}


@functools.lru_cache(maxsize=256)
def _settings(raw: int | float | str | None, policy: str) -> ConsolidationSettings:
    # Asked for every candidate of every pass; pools share a handful of distinct values.
    if raw is None or str(raw) == "Never":
        return ConsolidationSettings(None, policy)
    try:
        after = float(raw) if isinstance(raw, int | float) else parse_length(str(raw))
    except DurationError:
        after = None  # unreadable: treat as disabled rather than guess (fail safe)
    return ConsolidationSettings(after, policy)


def quiet_since(node: StateNode) -> datetime | None:
    """When the node's consolidateAfter clock started: last pod event, else initialization."""
    return node.memo("disruption.quiet_since", lambda: _quiet_since(node))


def _quiet_since(node: StateNode) -> datetime | None:
    claim = node.nodeclaim
    if claim is None:
        return None
    if claim.last_pod_event_time is not None:
        return claim.last_pod_event_time
    initialized = claim.conditions.get("Initialized")
    if initialized is not None and initialized.is_true and initialized.last_transition_time is not None:
        return initialized.last_transition_time
    if node.node is not None and node.node.creation_timestamp is not None:
        return node.node.creation_timestamp
    return claim.creation_timestamp


def consolidation_wait(node: StateNode, settings: ConsolidationSettings, now: datetime) -> timedelta | None:
    """Time left before the node is consolidatable (None when it already is)."""
    if settings.consolidate_after is None:
        return timedelta.max
    if settings.consolidate_after <= 0:
        return None
    until = quiet_until(node, settings.consolidate_after)
    if until is None:
        return None
    remaining = until - now
    return remaining if remaining > _ZERO else None


_ZERO = timedelta(0)


def quiet_until(node: StateNode, consolidate_after: float) -> datetime | None:
    """When the node's consolidateAfter runs out (kept on the StateNode per consolidateAfter)."""
    kept = node.memo_get("disruption.quiet_until")
    if kept is not None and kept[0] == consolidate_after:
        return kept[1]
    since = quiet_since(node)
    until = None if since is None else since + timedelta(seconds=consolidate_after)
    node.memo_set("disruption.quiet_until", (consolidate_after, until))
    return until


def describe_wait(nodepool: NodePool, settings: ConsolidationSettings, remaining: timedelta) -> str:
    after = format_duration_short(settings.consolidate_after or 0)
    left = format_duration_short(round(remaining.total_seconds()))
    return f"consolidateAfter {after} ({nodepool.name}) not yet elapsed since the last pod event, {left} left"


def consolidatable(nodepool: NodePool, claim: NodeClaim, now: datetime) -> tuple[bool, datetime | None]:
    """Karpenter's ``Consolidatable`` condition for a NodeClaim: whether it should be set (True) or absent, and
    when that answer next changes (None: not by time alone). Absent while consolidation is disabled
    (``consolidateAfter: Never``) or the claim is not Initialized; set once ``consolidateAfter`` has passed
    since its last pod event, else since it was initialized."""
    settings = settings_of(nodepool)
    initialized = claim.conditions.get("Initialized")
    if settings.consolidate_after is None or initialized is None or not initialized.is_true:
        return False, None
    since = claim.last_pod_event_time or initialized.last_transition_time
    if since is None:
        return True, None
    due = since + timedelta(seconds=settings.consolidate_after)
    return (True, None) if now >= due else (False, due)
