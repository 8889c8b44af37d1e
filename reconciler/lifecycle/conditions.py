"""Writing status conditions to the API server, each guarded by the object's resourceVersion so a condition
another writer set meanwhile is kept (what a condition is, and how one is read or merged: ``model/conditions``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from reconciler.kube.api import NODECLAIM, KubeAPI, Manifest, NotFoundError
from reconciler.kube.retry import modify
from reconciler.model.conditions import NODECLAIM_DEPENDENTS, condition_of, make, merged_conditions, with_root
from reconciler.model.meta import format_time


async def set_condition(
    kube: KubeAPI, nodeclaim_name: str, update: dict[str, Any], *, current: Manifest | None = None, **status: Any
) -> Manifest:
    """Set one NodeClaim condition (and other status fields) against the claim, guarded by its
    resourceVersion, so a condition another writer set meanwhile is kept. The root ``Ready`` condition
    (Launched, Registered, Initialized) is recomputed with it. ``current``: a copy already at hand (saves
    the read; a stale one costs a 409 and a read). Returns the claim as stored."""
    def edit(claim: Manifest) -> Manifest:
        conditions = with_root(merged_conditions(claim, update), NODECLAIM_DEPENDENTS,
                               str(update.get("lastTransitionTime") or ""))
        claim["status"] = {**(claim.get("status") or {}), "conditions": conditions, **status}
        return claim

    return await modify(kube, NODECLAIM, nodeclaim_name, edit, subresource="status", current=current)


async def mark_termination(kube: KubeAPI, nodeclaim: Manifest, kind: str, status: str, now: datetime,
                           reason: str = "", message: str = "", *, only_if_absent: bool = False) -> Manifest:
    """Set one of a terminating NodeClaim's conditions (Drained, VolumesDetached, InstanceTerminating) unless it
    already reads so, against the claim as stored (guarded by its resourceVersion); a claim gone meanwhile is
    fine. ``only_if_absent``: leave an existing condition of that type as it is (Karpenter's "Draining").
    ``nodeclaim`` is the copy at hand (written against without a read; a stale one costs a 409 and a read).
    Returns the claim as stored afterwards (``nodeclaim`` itself when nothing was written)."""
    existing = condition_of(nodeclaim, kind)
    if existing is not None and (only_if_absent or (
            existing.get("status") == status and (not reason or existing.get("reason") == reason))):
        return nodeclaim
    desired = make(kind, status, format_time(now), reason, message or reason)

    def edit(current: Manifest) -> Manifest | None:
        found = condition_of(current, kind)
        if found is not None and (only_if_absent or (
                found.get("status") == status and found.get("reason") == desired["reason"])):
            return None
        status_block = current.setdefault("status", {})
        kept = [c for c in status_block.get("conditions") or [] if c.get("type") != kind]
        stamp = found.get("lastTransitionTime") if found is not None and found.get("status") == status else None
        status_block["conditions"] = [*kept, {**desired, "lastTransitionTime": stamp or desired["lastTransitionTime"]}]
        return current

    try:
        return await modify(kube, NODECLAIM, str(nodeclaim["metadata"]["name"]), edit, subresource="status",
                            current=nodeclaim)
    except NotFoundError:
        return nodeclaim
