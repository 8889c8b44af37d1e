"""Graceful pod deletion as the API server does it (``DeleteOptions.gracePeriodSeconds``).

Pure decisions for the in-memory cluster, following kube-apiserver's pod strategy
(``CheckGracefulDelete``) and ``rest.BeforeDelete``:

- the requested grace period is forced to 0 for a pod that is not bound to a node or
  has already finished (Succeeded/Failed): nothing runs that could shut down;
- a period above 0 marks the pod: ``deletionTimestamp`` = now + period and
  ``deletionGracePeriodSeconds`` = period; the kubelet removes it once it has stopped
  (at the latest when that time comes);
- a pod already terminating can only have its grace period shortened, and the new
  deadline counts from when its deletion was first requested, not from now;
- 0 removes the pod at once (finalizers still hold it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from reconciler.kube.semantics import parse_time

DeletionKind = Literal["immediate", "graceful", "unchanged"]


@dataclass(slots=True, frozen=True)
class PodDeletion:
    """What one DELETE does to a pod: remove it now, mark it until ``until``, or nothing."""

    kind: DeletionKind
    until: datetime | None = None
    grace_seconds: int = 0


def effective_grace_period(pod: Mapping[str, Any], requested: int) -> int:
    """The period the API server applies: 0 for an unbound or finished pod, else what was asked."""
    if not (pod.get("spec") or {}).get("nodeName"):
        return 0
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return 0
    return requested


def plan_pod_deletion(pod: Mapping[str, Any], requested: int, now: datetime) -> PodDeletion:
    """The effect of ``DELETE`` with ``gracePeriodSeconds=requested`` on ``pod`` at ``now``."""
    metadata = pod.get("metadata") or {}
    pending = metadata.get("deletionGracePeriodSeconds")
    marked = metadata.get("deletionTimestamp")
    if marked:
        if not pending:
            return PodDeletion("immediate")  # a graceless deletion waiting on finalizers: nothing to shorten
        if requested >= int(pending):
            return PodDeletion("unchanged")  # a grace period can only be shortened
        requested_at = parse_time(str(marked)) - timedelta(seconds=int(pending))
        return PodDeletion("graceful", requested_at + timedelta(seconds=requested), requested)
    period = effective_grace_period(pod, requested)
    if period == 0:
        return PodDeletion("immediate")
    return PodDeletion("graceful", now + timedelta(seconds=period), period)
