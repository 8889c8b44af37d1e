"""Pod predicates that disruption and drain decide on.

Pods reach disruption in two shapes: plain manifests (the lead's terminator, the
API server) and ``reconciler.model.pod.Pod`` (cluster state). ``facts()`` reads
either into one small ``PodFacts`` view; the predicates below answer: is the pod
still running, would it have to move, can it be evicted, is it protected by
``karpenter.sh/do-not-disrupt`` at ``now``, and how much does evicting it cost.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from reconciler.api.durations import DurationError, parse_duration
from reconciler.model import labels as wk
from reconciler.model.meta import controller_owner, parse_time_or_none
from reconciler.model.pod import MIRROR_POD_ANNOTATION, Pod
from reconciler.model.taints import NO_SCHEDULE, Taint, TaintError, Toleration, parse_tolerations

PodLike = Mapping[str, Any] | Pod

# kube-apiserver defaults terminationGracePeriodSeconds to 30 when a pod omits it.
DEFAULT_TERMINATION_GRACE_SECONDS = 30
# A pod still terminating this long after its deletion timestamp no longer holds up a drain.
STUCK_TERMINATING_AFTER = timedelta(minutes=1)
DISRUPTED_TAINT = Taint(wk.DISRUPTED_TAINT_KEY, NO_SCHEDULE)


@dataclass(slots=True, frozen=True)
class PodFacts:
    key: str  # "namespace/name"
    namespace: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    phase: str
    deletion_timestamp: datetime | None
    start_time: datetime | None
    ready: bool | None  # None: no Ready condition known
    owner_kind: str
    owner_api_version: str
    priority: int
    priority_class_name: str
    termination_grace_seconds: int
    tolerates_disrupted: bool


def facts(pod: PodLike | PodFacts) -> PodFacts:
    if isinstance(pod, PodFacts):
        return pod
    if isinstance(pod, Pod):
        return _from_model(pod)
    return _from_manifest(pod)


def _from_model(pod: Pod) -> PodFacts:
    owner = pod.owner
    return PodFacts(
        key=pod.key,
        namespace=pod.namespace,
        labels=pod.labels,
        annotations=pod.annotations,
        phase=pod.phase,
        deletion_timestamp=pod.deletion_timestamp,
        # Read defensively: older Pod models may lack these fields.
        start_time=getattr(pod, "start_time", None),
        ready=getattr(pod, "ready", None),
        owner_kind="Node" if pod.is_static else (owner.kind if owner else ""),
        owner_api_version="v1" if pod.is_static else (owner.api_version if owner else ""),
        priority=pod.priority,
        priority_class_name=pod.priority_class_name,
        termination_grace_seconds=pod.termination_grace_period_seconds,
        tolerates_disrupted=_tolerates(pod.tolerations),
    )


def _from_manifest(pod: Mapping[str, Any]) -> PodFacts:
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    namespace = str(metadata.get("namespace") or "default")
    owner = controller_owner(metadata)
    annotations = metadata.get("annotations") or {}
    if MIRROR_POD_ANNOTATION in annotations:
        owner_kind, owner_api = "Node", "v1"
    else:
        owner_kind, owner_api = (owner.kind, owner.api_version) if owner else ("", "")
    ready = None
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready":
            ready = condition.get("status") == "True"
    try:
        tolerates = _tolerates(parse_tolerations(spec.get("tolerations"), path="spec.tolerations"))
    except TaintError:
        tolerates = False
    grace = spec.get("terminationGracePeriodSeconds")
    priority = spec.get("priority")
    return PodFacts(
        key=f"{namespace}/{metadata.get('name', '')}",
        namespace=namespace,
        labels=metadata.get("labels") or {},
        annotations=annotations,
        phase=str(status.get("phase") or "Pending"),
        # Unreadable timestamps count as absent: disruption must not fail on one odd pod.
        deletion_timestamp=parse_time_or_none(metadata.get("deletionTimestamp")),
        start_time=parse_time_or_none(status.get("startTime")),
        ready=ready,
        owner_kind=owner_kind,
        owner_api_version=owner_api,
        priority=priority if isinstance(priority, int) else 0,
        priority_class_name=str(spec.get("priorityClassName") or ""),
        termination_grace_seconds=DEFAULT_TERMINATION_GRACE_SECONDS if grace is None else int(grace),
        tolerates_disrupted=tolerates,
    )


def _tolerates(tolerations: Iterable[Toleration]) -> bool:
    return any(t.tolerates(DISRUPTED_TAINT) for t in tolerations)


def pod_key(pod: PodLike | PodFacts) -> str:
    return facts(pod).key


def is_owned_by_daemonset(pod: PodLike | PodFacts) -> bool:
    return facts(pod).owner_kind == "DaemonSet"


def is_owned_by_statefulset(pod: PodLike | PodFacts) -> bool:
    return facts(pod).owner_kind == "StatefulSet"


def is_static(pod: PodLike | PodFacts) -> bool:
    """A mirror (static) pod: owned by its Node, managed by the kubelet, never evicted through the API."""
    return facts(pod).owner_kind == "Node"


def is_terminal(pod: PodLike | PodFacts) -> bool:
    return facts(pod).phase in ("Succeeded", "Failed")


def is_terminating(pod: PodLike | PodFacts) -> bool:
    return facts(pod).deletion_timestamp is not None


def is_active(pod: PodLike | PodFacts) -> bool:
    view = facts(pod)
    return not is_terminal(view) and not is_terminating(view)


def is_reschedulable(pod: PodLike | PodFacts) -> bool:
    """Needs a new home if its node goes (terminating StatefulSet pods count: their successor will)."""
    view = facts(pod)
    return (
        (is_active(view) or (is_owned_by_statefulset(view) and is_terminating(view)))
        and not is_owned_by_daemonset(view)
        and not is_static(view)
    )


def is_healthy(pod: PodLike | PodFacts) -> bool:
    """Counts toward a PDB's healthy pods: running, not terminating, Ready (or readiness unknown)."""
    view = facts(pod)
    return is_active(view) and view.phase == "Running" and view.ready is not False


def is_explicitly_unready(pod: PodLike | PodFacts) -> bool:
    """Ready condition present and False: what ``unhealthyPodEvictionPolicy: AlwaysAllow`` lets through."""
    return facts(pod).ready is False


def is_critical(pod: PodLike | PodFacts) -> bool:
    return facts(pod).priority_class_name in wk.CRITICAL_PRIORITY_CLASSES


def termination_grace_seconds(pod: PodLike | PodFacts) -> int:
    return facts(pod).termination_grace_seconds


@dataclass(slots=True, frozen=True)
class DoNotDisrupt:
    """An active ``karpenter.sh/do-not-disrupt`` protection; ``until`` is None for ``"true"``."""

    until: datetime | None

    def describe(self, key: str) -> str:
        if self.until is None:
            return f'pod {key} has annotation {wk.DO_NOT_DISRUPT}="true"'
        return f"pod {key} has annotation {wk.DO_NOT_DISRUPT} (protected until {self.until.isoformat()})"


def do_not_disrupt(pod: PodLike | PodFacts, now: datetime) -> DoNotDisrupt | None:
    """The pod's do-not-disrupt protection if active at ``now``.

    ``"true"`` protects forever; a positive Go duration (``"2m"``) protects until
    the pod has run that long since ``status.startTime`` (forever while it has no
    start time: fail safe). Any other value is ignored, as Karpenter does.
    Only active pods are protected; terminal and terminating pods never block.
    """
    view = facts(pod)
    value = view.annotations.get(wk.DO_NOT_DISRUPT)
    if value is None or not is_active(view):
        return None
    if value == "true":
        return DoNotDisrupt(until=None)
    try:
        seconds = parse_duration(str(value))
    except DurationError:
        return None
    if seconds <= 0:
        return None
    if view.start_time is None:
        return DoNotDisrupt(until=None)
    until = view.start_time + timedelta(seconds=seconds)
    return DoNotDisrupt(until=until) if now < until else None


def tolerates_disrupted_taint(pod: PodLike | PodFacts) -> bool:
    """Tolerates ``karpenter.sh/disrupted:NoSchedule``: such pods are never drained (they would come back)."""
    return facts(pod).tolerates_disrupted


def is_evictable(pod: PodLike | PodFacts, now: datetime) -> bool:
    """Karpenter would call the Eviction API for it (so PDBs matter for it)."""
    view = facts(pod)
    return (
        is_active(view) and not view.tolerates_disrupted and not is_static(view) and do_not_disrupt(view, now) is None
    )


def is_stuck_terminating(pod: PodLike | PodFacts, now: datetime) -> bool:
    deleted = facts(pod).deletion_timestamp
    return deleted is not None and now - deleted > STUCK_TERMINATING_AFTER


def is_drainable(pod: PodLike | PodFacts, now: datetime) -> bool:
    """A drain waits for it to leave (do-not-disrupt pods included: the drain stalls on them)."""
    view = facts(pod)
    return not view.tolerates_disrupted and not is_stuck_terminating(view, now) and not is_static(view)


def eviction_cost(pod: PodLike | PodFacts) -> float:
    """Relative cost of evicting the pod: 1 + pod-deletion-cost/2^27 + priority/2^25, clamped to [-10, 10]."""
    view = facts(pod)
    cost = 1.0
    raw = view.annotations.get(wk.POD_DELETION_COST)
    if raw is not None:
        try:
            deletion_cost = float(raw)
        except ValueError:
            deletion_cost = 0.0
        cost += deletion_cost / 2**27 if math.isfinite(deletion_cost) else math.copysign(20.0, deletion_cost)
    cost += view.priority / 2**25
    return min(10.0, max(-10.0, cost))


def reschedule_cost(pods: Iterable[PodLike | PodFacts]) -> float:
    """Per-node disruption cost: 1 for the node plus each reschedulable pod's non-negative eviction cost."""
    return 1.0 + sum(max(0.0, eviction_cost(p)) for p in pods)
