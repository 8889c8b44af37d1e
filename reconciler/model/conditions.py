"""Status conditions as Karpenter keeps them (awslabs/operatorpkg ``status.ConditionSet``).

A *root* condition (``Ready``) summarises its dependents: True when every dependent is True, False
(``UnhealthyDependents``) when one is False, else Unknown (``ReconcilingDependents``), its message
listing the dependents that are not True (``Launched=True, Registered=Unknown``), newest first. A
dependent not written yet reads Unknown (``AwaitingReconciliation``), as operatorpkg fills it in.

- NodeClaim: ``Ready`` over Launched, Registered, Initialized (``with_root`` on every condition write,
  ``lifecycle.conditions.set_condition``); the termination conditions Drained, VolumesDetached and
  InstanceTerminating (``lifecycle.conditions.mark_termination``, at the points the Terminator reaches them).
- NodePool: ``Ready`` over ValidationSucceeded and NodeClassReady; NodeRegistrationHealthy beside it.

Timestamps are RFC 3339 strings: a condition keeps its ``lastTransitionTime`` while its status stays.
This module builds, reads and merges conditions (pure); ``lifecycle/conditions.py`` writes them to the API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from reconciler.model.meta import format_time, parse_time_or_none

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


def condition(kind: str, status: bool, now: datetime, reason: str = "", message: str = "") -> dict[str, Any]:
    """A True/False condition stamped ``now`` (``make`` for any status and a stamp already formatted)."""
    return make(kind, "True" if status else "False", format_time(now), reason, message)


def condition_of(manifest: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    """The manifest's ``status.conditions`` entry of this type (entries that are not objects are skipped)."""
    return next((c for c in (manifest.get("status") or {}).get("conditions") or []
                 if isinstance(c, Mapping) and c.get("type") == kind), None)


def is_true(manifest: Mapping[str, Any], kind: str, *, absent: bool = False) -> bool:
    """Whether the condition reads True; ``absent``: the answer when the manifest has no such condition."""
    found = condition_of(manifest, kind)
    return absent if found is None else found.get("status") == "True"


def transition_time(manifest: Mapping[str, Any], kind: str) -> datetime | None:
    """When the condition last changed status; None when absent or unreadable."""
    return parse_time_or_none((condition_of(manifest, kind) or {}).get("lastTransitionTime"))


def merged_conditions(manifest: Mapping[str, Any], *updates: dict[str, Any]) -> list[dict[str, Any]]:
    """Conditions with ``updates`` applied; an unchanged status keeps its transition time."""
    current = {c["type"]: c for c in (manifest.get("status") or {}).get("conditions") or []}
    for update in updates:
        previous = current.get(update["type"])
        if previous is not None and previous.get("status") == update["status"]:
            update = {**update, "lastTransitionTime": previous.get("lastTransitionTime", update["lastTransitionTime"])}
        current[update["type"]] = update
    return list(current.values())
