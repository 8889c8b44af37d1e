"""Pod predicates that disruption and drain decide on, read from Pod manifests.

Pods arrive as plain manifests (as the API server returns them). These
functions answer: is the pod still running, would it have to move, can it be
evicted, is it protected by ``karpenter.sh/do-not-disrupt`` at ``now``, and how
much does evicting it cost.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from reconciler.model import labels as wk
from reconciler.settings import SettingsError, parse_duration

Manifest = Mapping[str, Any]

# kube-apiserver defaults terminationGracePeriodSeconds to 30 when a pod omits it.
DEFAULT_TERMINATION_GRACE_SECONDS = 30
# A pod still terminating this long after its deletion timestamp no longer holds up a drain.
STUCK_TERMINATING_AFTER = timedelta(minutes=1)


def pod_key(pod: Manifest) -> str:
    metadata = pod.get("metadata") or {}
    return f"{metadata.get('namespace') or 'default'}/{metadata.get('name', '')}"


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp from a manifest (``2026-01-01T08:00:00Z``), or None when absent/invalid."""
    if isinstance(value, datetime):
        return value
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def _owned_by(pod: Manifest, api_version: str, kind: str) -> bool:
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    return any(o.get("apiVersion") == api_version and o.get("kind") == kind for o in owners)


def is_owned_by_daemonset(pod: Manifest) -> bool:
    return _owned_by(pod, "apps/v1", "DaemonSet")


def is_owned_by_statefulset(pod: Manifest) -> bool:
    return _owned_by(pod, "apps/v1", "StatefulSet")


def is_static(pod: Manifest) -> bool:
    """A mirror (static) pod: owned by its Node, managed by the kubelet, never evicted through the API."""
    return _owned_by(pod, "v1", "Node")


def is_terminal(pod: Manifest) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_terminating(pod: Manifest) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def is_active(pod: Manifest) -> bool:
    return not is_terminal(pod) and not is_terminating(pod)


def is_reschedulable(pod: Manifest) -> bool:
    """Needs a new home if its node goes (terminating StatefulSet pods count: their successor will)."""
    return (
        (is_active(pod) or (is_owned_by_statefulset(pod) and is_terminating(pod)))
        and not is_owned_by_daemonset(pod)
        and not is_static(pod)
    )


def is_explicitly_unready(pod: Manifest) -> bool:
    """Ready condition present and False: what ``unhealthyPodEvictionPolicy: AlwaysAllow`` lets through."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "False"
    return False


def is_ready(pod: Manifest) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def is_critical(pod: Manifest) -> bool:
    return (pod.get("spec") or {}).get("priorityClassName") in wk.CRITICAL_PRIORITY_CLASSES


def termination_grace_seconds(pod: Manifest) -> int:
    value = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return DEFAULT_TERMINATION_GRACE_SECONDS if value is None else int(value)


@dataclass(slots=True, frozen=True)
class DoNotDisrupt:
    """An active ``karpenter.sh/do-not-disrupt`` protection; ``until`` is None for ``"true"``."""

    until: datetime | None

    def describe(self, key: str) -> str:
        if self.until is None:
            return f'pod {key} has annotation {wk.DO_NOT_DISRUPT}="true"'
        return f"pod {key} has annotation {wk.DO_NOT_DISRUPT} (protected until {self.until.isoformat()})"


def do_not_disrupt(pod: Manifest, now: datetime) -> DoNotDisrupt | None:
    """The pod's do-not-disrupt protection if active at ``now``.

    ``"true"`` protects forever; a positive Go duration (``"2m"``) protects until
    the pod has run that long since ``status.startTime`` (forever while it has no
    start time: fail safe). Any other value is ignored, as Karpenter does.
    Only active pods are protected; terminal and terminating pods never block.
    """
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(wk.DO_NOT_DISRUPT)
    if value is None or not is_active(pod):
        return None
    if value == "true":
        return DoNotDisrupt(until=None)
    try:
        seconds = parse_duration(str(value).removeprefix("+"), name=wk.DO_NOT_DISRUPT)
    except SettingsError:
        return None
    if seconds <= 0:
        return None
    started = parse_time((pod.get("status") or {}).get("startTime"))
    if started is None:
        return DoNotDisrupt(until=None)
    until = started + timedelta(seconds=seconds)
    return DoNotDisrupt(until=until) if now < until else None


def tolerates_disrupted_taint(pod: Manifest) -> bool:
    """Tolerates ``karpenter.sh/disrupted:NoSchedule``: such pods are never drained (they would come back)."""
    for toleration in (pod.get("spec") or {}).get("tolerations") or []:
        key = toleration.get("key") or ""
        operator = toleration.get("operator") or "Equal"
        effect = toleration.get("effect") or ""
        if effect not in ("", "NoSchedule"):
            continue
        if operator == "Exists" and key in ("", wk.DISRUPTED_TAINT_KEY):
            return True
        if operator == "Equal" and key == wk.DISRUPTED_TAINT_KEY and (toleration.get("value") or "") == "":
            return True
    return False


def is_evictable(pod: Manifest, now: datetime) -> bool:
    """Karpenter would call the Eviction API for it (so PDBs matter for it)."""
    return (
        is_active(pod)
        and not tolerates_disrupted_taint(pod)
        and not is_static(pod)
        and do_not_disrupt(pod, now) is None
    )


def is_stuck_terminating(pod: Manifest, now: datetime) -> bool:
    deleted = parse_time((pod.get("metadata") or {}).get("deletionTimestamp"))
    return deleted is not None and now - deleted > STUCK_TERMINATING_AFTER


def is_drainable(pod: Manifest, now: datetime) -> bool:
    """A drain waits for it to leave (do-not-disrupt pods included: the drain stalls on them)."""
    return not tolerates_disrupted_taint(pod) and not is_stuck_terminating(pod, now) and not is_static(pod)


def eviction_cost(pod: Manifest) -> float:
    """Relative cost of evicting the pod: 1 + pod-deletion-cost/2^27 + priority/2^25, clamped to [-10, 10]."""
    cost = 1.0
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(wk.POD_DELETION_COST)
    if raw is not None:
        try:
            deletion_cost = float(raw)
        except ValueError:
            deletion_cost = 0.0
        if math.isfinite(deletion_cost):
            cost += deletion_cost / 2**27
        else:
            cost += math.copysign(20.0, deletion_cost)
    priority = (pod.get("spec") or {}).get("priority")
    if isinstance(priority, int):
        cost += priority / 2**25
    return min(10.0, max(-10.0, cost))


def reschedule_cost(pods: list[Manifest]) -> float:
    """Per-node disruption cost: 1 for the node plus each reschedulable pod's non-negative eviction cost."""
    return 1.0 + sum(max(0.0, eviction_cost(p)) for p in pods)
