"""Pure expiration decisions: which NodeClaims have outlived ``spec.expireAfter`` at ``now``.

Expiration is forceful: an expired NodeClaim is deleted with no budget, PDB or
do-not-disrupt check (the drain still honours those until the
terminationGracePeriod deadline). No replacement is launched up front; the
provisioner reacts to the deleting node's pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from reconciler.model import labels as wk
from reconciler.model.durations import DurationError, parse_length
from reconciler.model.meta import parse_time_or_none

Manifest = Mapping[str, Any]

DEFAULT_EXPIRE_AFTER = "720h"  # the NodeClaim CRD default


@dataclass(slots=True, frozen=True)
class Expiration:
    nodeclaim: str
    nodepool: str
    node: str  # status.nodeName ("" before registration)
    expired_at: datetime


def expiration_time(nodeclaim: Manifest) -> datetime | None:
    """creationTimestamp + spec.expireAfter, or None for ``Never`` / an unreadable claim."""
    metadata = nodeclaim.get("metadata") or {}
    created = parse_time_or_none(metadata.get("creationTimestamp"))
    raw = (nodeclaim.get("spec") or {}).get("expireAfter", DEFAULT_EXPIRE_AFTER)
    if created is None or raw is None or str(raw) == "Never":
        return None
    try:
        return created + timedelta(seconds=parse_length(str(raw), path="spec.expireAfter"))
    except DurationError:
        return None


def expired(nodeclaims: Iterable[Manifest], now: datetime) -> list[Expiration]:
    """NodeClaims to delete now because they expired, oldest expiry first (already deleting ones skipped)."""
    found = []
    for claim in nodeclaims:
        metadata = claim.get("metadata") or {}
        if metadata.get("deletionTimestamp"):
            continue
        at = expiration_time(claim)
        if at is None or now < at:
            continue
        found.append(
            Expiration(
                nodeclaim=str(metadata.get("name", "")),
                nodepool=str((metadata.get("labels") or {}).get(wk.NODEPOOL, "")),
                node=str((claim.get("status") or {}).get("nodeName") or ""),
                expired_at=at,
            )
        )
    return sorted(found, key=lambda e: (e.expired_at, e.nodeclaim))


def next_expiration(nodeclaims: Iterable[Manifest], now: datetime) -> datetime | None:
    """The soonest future expiry among live NodeClaims (when to look again), or None."""
    upcoming = [
        at
        for claim in nodeclaims
        if not (claim.get("metadata") or {}).get("deletionTimestamp")
        and (at := expiration_time(claim)) is not None
        and at > now
    ]
    return min(upcoming, default=None)
