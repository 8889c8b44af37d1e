"""Pod predicates every decision shares (Karpenter's ``utils/pod``): is the pod still running, is it a DaemonSet
or static pod, would it have to move, can it be evicted, is it protected by ``karpenter.sh/do-not-disrupt`` at
``now``, and how much does evicting it cost. They read ``model.pod.Pod`` only: manifests are parsed once, by
``Pod.from_manifest`` (``as_pod`` at a boundary that receives either)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from reconciler.model import labels as wk
from reconciler.model.durations import DurationError, parse_duration
from reconciler.model.pod import Pod
from reconciler.model.taints import NO_SCHEDULE, Taint

# A pod still terminating this long after its deletion timestamp no longer holds up a drain.
STUCK_TERMINATING_AFTER = timedelta(minutes=1)
DISRUPTED_TAINT = Taint(wk.DISRUPTED_TAINT_KEY, NO_SCHEDULE)


def as_pod(pod: Pod | Mapping[str, Any]) -> Pod:
    """``pod`` itself, or the manifest parsed (``ManifestError`` naming the pod when it cannot be read)."""
    return pod if isinstance(pod, Pod) else Pod.from_manifest(pod)


def manifest_key(manifest: Mapping[str, Any]) -> str:
    """``namespace/name`` of a pod manifest (``Pod.key`` without parsing the rest)."""
    metadata = manifest.get("metadata") or {}
    return f"{metadata.get('namespace') or 'default'}/{metadata.get('name', '')}"


def is_owned_by_statefulset(pod: Pod) -> bool:
    return not pod.is_static and pod.owner is not None and pod.owner.kind == "StatefulSet"


def is_reschedulable(pod: Pod) -> bool:
    """Needs a new home if its node goes (terminating StatefulSet pods count: their successor will)."""
    return (
        (pod.is_active or (is_owned_by_statefulset(pod) and pod.is_terminating))
        and not pod.is_daemonset_pod
        and not pod.is_static
    )


def is_explicitly_unready(pod: Pod) -> bool:
    """Ready condition present and False: what ``unhealthyPodEvictionPolicy: AlwaysAllow`` lets through."""
    return pod.ready is False


def is_critical(pod: Pod) -> bool:
    return pod.priority_class_name in wk.CRITICAL_PRIORITY_CLASSES


@dataclass(slots=True, frozen=True)
class DoNotDisrupt:
    """An active ``karpenter.sh/do-not-disrupt`` protection; ``until`` is None for ``"true"``."""

    until: datetime | None

    def describe(self, key: str) -> str:
        if self.until is None:
            return f'pod {key} has annotation {wk.DO_NOT_DISRUPT}="true"'
        return f"pod {key} has annotation {wk.DO_NOT_DISRUPT} (protected until {self.until.isoformat()})"


def do_not_disrupt(pod: Pod, now: datetime) -> DoNotDisrupt | None:
    """The pod's do-not-disrupt protection if active at ``now``.

    ``"true"`` protects forever; a positive Go duration (``"2m"``) protects until
    the pod has run that long since ``status.startTime`` (forever while it has no
    start time: fail safe). Any other value is ignored, as Karpenter does.
    Only active pods are protected; terminal and terminating pods never block.
    """
    value = pod.annotations.get(wk.DO_NOT_DISRUPT)
    if value is None or not pod.is_active:
        return None
    if value == "true":
        return DoNotDisrupt(until=None)
    try:
        seconds = parse_duration(str(value))
    except DurationError:
        return None
    if seconds <= 0:
        return None
    if pod.start_time is None:
        return DoNotDisrupt(until=None)
    until = pod.start_time + timedelta(seconds=seconds)
    return DoNotDisrupt(until=until) if now < until else None


def tolerates_disrupted_taint(pod: Pod) -> bool:
    """Tolerates ``karpenter.sh/disrupted:NoSchedule``: such pods are never drained (they would come back)."""
    return any(t.tolerates(DISRUPTED_TAINT) for t in pod.tolerations)


def is_evictable(pod: Pod, now: datetime) -> bool:
    """Karpenter would call the Eviction API for it (so PDBs matter for it)."""
    return (
        pod.is_active and not tolerates_disrupted_taint(pod) and not pod.is_static
        and do_not_disrupt(pod, now) is None
    )


def is_stuck_terminating(pod: Pod, now: datetime) -> bool:
    deleted = pod.deletion_timestamp
    return deleted is not None and now - deleted > STUCK_TERMINATING_AFTER


def is_drainable(pod: Pod, now: datetime) -> bool:
    """A drain waits for it to leave (do-not-disrupt pods included: the drain stalls on them)."""
    return not tolerates_disrupted_taint(pod) and not is_stuck_terminating(pod, now) and not pod.is_static


def eviction_cost(pod: Pod) -> float:
    """Relative cost of evicting the pod: 1 + pod-deletion-cost/2^27 + priority/2^25, clamped to [-10, 10]."""
    cost = 1.0
    raw = pod.annotations.get(wk.POD_DELETION_COST)
    if raw is not None:
        try:
            deletion_cost = float(raw)
        except ValueError:
            deletion_cost = 0.0
        cost += deletion_cost / 2**27 if math.isfinite(deletion_cost) else math.copysign(20.0, deletion_cost)
    cost += pod.priority / 2**25
    return min(10.0, max(-10.0, cost))


def reschedule_cost(pods: Iterable[Pod]) -> float:
    """Per-node disruption cost: 1 for the node plus each reschedulable pod's non-negative eviction cost."""
    return 1.0 + sum(max(0.0, eviction_cost(p)) for p in pods)
