"""Status conditions as Karpenter keeps them (awslabs/operatorpkg ``status.ConditionSet``).

A *root* condition (``Ready``) summarises its dependents: True when every dependent is True, False
(``UnhealthyDependents``) when one is False, else Unknown (``ReconcilingDependents``), its message
listing the dependents that are not True (``Launched=True, Registered=Unknown``), newest first. A
dependent not written yet reads Unknown (``AwaitingReconciliation``), as operatorpkg fills it in.

- NodeClaim: ``Ready`` over Launched, Registered, Initialized (``with_root`` on every condition write,
  ``launch.set_condition``); the termination conditions Drained, VolumesDetached and
  InstanceTerminating through ``mark_termination`` at the points the Terminator reaches them.
- NodePool: ``Ready`` over ValidationSucceeded and NodeClassReady; NodeRegistrationHealthy beside it.

Timestamps are RFC 3339 strings: a condition keeps its ``lastTransitionTime`` while its status stays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from reconciler.kube.api import NODECLAIM, KubeAPI, Manifest, NotFoundError
from reconciler.kube.retry import modify
from reconciler.model.meta import format_time

READY = "Ready"
NODECLAIM_DEPENDENTS = ("Launched", "Registered", "Initialized")
NODEPOOL_DEPENDENTS = ("ValidationSucceeded", "NodeClassReady")
DRAINED = "Drained"
VOLUMES_DETACHED = "VolumesDetached"
INSTANCE_TERMINATING = "InstanceTerminating"
AWAITING = ("AwaitingReconciliation", "object is awaiting reconciliation")


def make(kind: str, status: str, stamp: str, reason: str = "", message: str = "") -> dict[str, Any]:
    """One condition; ``status`` is "True", "False" or "Unknown"; the reason defaults as operatorpkg's."""
    if not reason:
        reason = {"True": kind, "Unknown": AWAITING[0]}.get(status, f"Not{kind}")
        message = message or (AWAITING[1] if status == "Unknown" else "")
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": stamp}


def with_root(conditions: Sequence[Mapping[str, Any]], dependents: Sequence[str], stamp: str,
              root: str = READY) -> list[dict[str, Any]]:
    """``conditions`` with absent dependents filled in as Unknown and ``root`` recomputed from them."""
    current = {str(c.get("type")): dict(c) for c in conditions}
    for kind in dependents:
        current.setdefault(kind, make(kind, "Unknown", stamp))
    unhealthy = sorted((current[k] for k in dependents if current[k].get("status") != "True"),
                       key=lambda c: str(c.get("lastTransitionTime") or ""), reverse=True)
    if not unhealthy:
        desired = make(root, "True", stamp)
    else:
        failed = any(c.get("status") == "False" for c in unhealthy)
        desired = make(root, "False" if failed else "Unknown", stamp,
                       reason="UnhealthyDependents" if failed else "ReconcilingDependents",
                       message=", ".join(f"{c['type']}={c.get('status')}" for c in unhealthy))
    previous = current.get(root)
    if previous is not None and previous.get("status") == desired["status"]:
        desired["lastTransitionTime"] = previous.get("lastTransitionTime") or stamp
    current[root] = desired
    return list(current.values())


def condition_of(manifest: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in (manifest.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


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
