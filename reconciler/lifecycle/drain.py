"""Pure drain decisions for a terminating node: what to evict now, what to force-delete, when it is done.

The async terminator (lead) calls ``plan_drain`` on every reconcile with the
node's current pods and carries out the plan through the Eviction API; it uses
``classify_eviction`` / ``eviction_backoff`` to interpret the answers.

Semantics (Karpenter v1):

- Pods that tolerate ``karpenter.sh/disrupted:NoSchedule``, static (mirror) pods
  and pods stuck terminating for over a minute are not waited for.
- Graceful evictions go in tiers, a tier only once the previous one is gone:
  non-critical pods, non-critical DaemonSet pods, critical pods, critical
  DaemonSet pods (critical = system-cluster-critical / system-node-critical).
- Evictions respect PDBs (429 = try again later with backoff) and
  ``karpenter.sh/do-not-disrupt`` (never evicted; the drain waits).
- With a termination deadline (deletion time + terminationGracePeriod), a pod is
  force-deleted, whatever its tier, PDB or annotation, once
  ``now > deadline - its terminationGracePeriodSeconds``, with a grace period
  clamped to the time left (at least 1 s).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from reconciler.model import labels as wk
from reconciler.model import podutil
from reconciler.model.durations import DurationError, parse_length
from reconciler.model.meta import parse_time_or_none
from reconciler.model.pdb import PdbLimits
from reconciler.model.pod import Pod

Manifest = Mapping[str, Any]

# The drain lasts at least this long so pods bound just before the taint landed are drained too.
MIN_DRAIN_TIME = timedelta(seconds=5)
EVICTION_BACKOFF_MIN_SECONDS = 0.1
EVICTION_BACKOFF_MAX_SECONDS = 10.0
MULTIPLE_PDBS_MESSAGE = "This pod has more than one PodDisruptionBudget"

TIER_NAMES = ("non-critical", "non-critical DaemonSet", "critical", "critical DaemonSet")


@dataclass(slots=True, frozen=True)
class ForceDelete:
    pod: str  # "namespace/name"
    grace_seconds: int


@dataclass(slots=True)
class DrainPlan:
    evict: list[str] = field(default_factory=list)  # call the Eviction API for these now
    force_delete: list[ForceDelete] = field(default_factory=list)  # delete with a clamped grace period
    blocked: dict[str, str] = field(default_factory=dict)  # pod -> why it is not evicted this round
    waiting: list[str] = field(default_factory=list)  # every pod the drain still waits for
    tier: str | None = None  # the tier being evicted
    deadline: datetime | None = None

    @property
    def complete(self) -> bool:
        """No pod left to wait for (the caller still honours ``MIN_DRAIN_TIME``)."""
        return not self.waiting


def termination_deadline(nodeclaim: Manifest | None) -> datetime | None:
    """When pods get force-deleted: ``karpenter.sh/nodeclaim-termination-timestamp``, else deletion + TGP."""
    if not nodeclaim:
        return None
    metadata = nodeclaim.get("metadata") or {}
    stamped = parse_time_or_none((metadata.get("annotations") or {}).get(wk.NODECLAIM_TERMINATION_TIMESTAMP))
    if stamped is not None:
        return stamped
    deleted = parse_time_or_none(metadata.get("deletionTimestamp"))
    grace = (nodeclaim.get("spec") or {}).get("terminationGracePeriod")
    if deleted is None or not grace:
        return None
    try:
        return deleted + timedelta(seconds=parse_length(str(grace), path="spec.terminationGracePeriod"))
    except DurationError:
        return None


def tier_of(pod: Pod) -> int:
    return (2 if podutil.is_critical(pod) else 0) + (1 if pod.is_daemonset_pod else 0)


def needs_force_delete(pod: Pod, deadline: datetime | None, now: datetime) -> bool:
    """The pod's own grace period would run past the node's deadline if we waited any longer."""
    if deadline is None:
        return False
    if pod.deletion_timestamp is not None:
        # Already deleting, but with a grace period that ends after the deadline: shorten it.
        return pod.deletion_timestamp > deadline
    return now > deadline - timedelta(seconds=pod.termination_grace_period_seconds)


def plan_drain(
    pods: Iterable[Pod | Manifest],
    pdbs: PdbLimits | None,
    now: datetime,
    *,
    deadline: datetime | None = None,
) -> DrainPlan:
    """Decide this round of the drain for one node's pods (all pods bound to it; manifests are parsed)."""
    plan = DrainPlan(deadline=deadline)
    graceful: list[list[Pod]] = [[], [], [], []]
    for item in pods:
        pod = podutil.as_pod(item)
        if pod.is_terminal or not podutil.is_drainable(pod, now):
            continue
        key = pod.key
        plan.waiting.append(key)
        if needs_force_delete(pod, deadline, now):
            remaining = int((deadline - now).total_seconds()) if deadline is not None else 0
            plan.force_delete.append(ForceDelete(key, max(remaining, 1)))
        else:
            graceful[tier_of(pod)].append(pod)
    budget_left: dict[str, int] = {}
    for index, tier in enumerate(graceful):
        if not tier:
            continue
        plan.tier = TIER_NAMES[index]
        for evictee in tier:
            _plan_eviction(evictee, pdbs, now, plan, budget_left)
        break
    return plan


def _plan_eviction(
    pod: Pod, pdbs: PdbLimits | None, now: datetime, plan: DrainPlan, budget_left: dict[str, int]
) -> None:
    key = pod.key
    if pod.is_terminating:
        plan.blocked[key] = "terminating"
        return
    protection = podutil.do_not_disrupt(pod, now)
    if protection is not None:
        plan.blocked[key] = protection.describe(key)
        return
    if pdbs is not None:
        reason = pdbs.eviction_blocker(pod, now)
        if reason is not None:
            plan.blocked[key] = reason
            return
        matching = pdbs.matching(pod)
        if matching and not (matching[0].always_allow_unhealthy and podutil.is_explicitly_unready(pod)):
            # One eviction per allowed disruption per round; the rest retry once the PDB recovers.
            pdb = matching[0]
            left = budget_left.setdefault(pdb.key, pdb.disruptions_allowed)
            if left <= 0:
                plan.blocked[key] = f"PDB {pdb.key} allows no further disruptions this round"
                return
            budget_left[pdb.key] = left - 1
    plan.evict.append(key)


class EvictionOutcome(Enum):
    EVICTED = "evicted"  # the pod will terminate: done with it
    GONE = "gone"  # 404/409: the pod no longer exists (or was replaced): done with it
    BLOCKED = "blocked"  # 429 / several PDBs: retry after backoff
    ERROR = "error"  # anything else: retry after backoff


def classify_eviction(status: int | None, message: str = "") -> EvictionOutcome:
    """Interpret an Eviction API answer (``status`` None or 2xx = accepted)."""
    if status is None or 200 <= status < 300:
        return EvictionOutcome.EVICTED
    if status in (404, 409):
        return EvictionOutcome.GONE
    if status == 429 or MULTIPLE_PDBS_MESSAGE in message:
        return EvictionOutcome.BLOCKED
    return EvictionOutcome.ERROR


def eviction_backoff(attempt: int) -> float:
    """Seconds to wait before retry ``attempt`` (0-based): exponential from 100 ms, capped at 10 s."""
    return min(EVICTION_BACKOFF_MAX_SECONDS, EVICTION_BACKOFF_MIN_SECONDS * 2 ** max(0, attempt))


def drain_finished(
    plan: DrainPlan, drain_started: datetime, now: datetime, minimum: timedelta = MIN_DRAIN_TIME
) -> bool:
    """The drain step is over: nothing left to wait for and the minimum drain time has passed."""
    return plan.complete and now - drain_started >= minimum


def wait_for_volumes(deadline: datetime | None, now: datetime) -> bool:
    """Whether to keep waiting for VolumeAttachments to detach: not once the terminationGracePeriod deadline
    is reached (Karpenter: the grace period has elapsed when now is not before the deadline)."""
    return deadline is None or now < deadline


def undrained_claims(pods: Iterable[Pod | Manifest], now: datetime) -> set[str]:
    """``namespace/claim`` of the PersistentVolumeClaims (ephemeral volumes' included) of pods on the node
    that the drain leaves alone: their volumes stay attached while the node runs, so they never block."""
    claims: set[str] = set()
    for item in pods:
        pod = podutil.as_pod(item)
        if not podutil.is_drainable(pod, now):
            claims.update(f"{pod.namespace}/{volume.claim_name}" for volume in pod.volumes)
    return claims


def blocking_volume_attachments(attachments: Iterable[Manifest], undrained_volumes: Iterable[str]) -> list[str]:
    """Names of the node's VolumeAttachments the instance deletion waits for: those of a PersistentVolume,
    except the volumes (PV names) of pods the drain leaves alone (``undrained_claims``, resolved to PVs)."""
    exempt = set(undrained_volumes)
    blocking = []
    for attachment in attachments:
        source = (attachment.get("spec") or {}).get("source") or {}
        volume = source.get("persistentVolumeName")
        if not volume or volume in exempt:
            continue
        blocking.append(str((attachment.get("metadata") or {}).get("name", "")))
    return sorted(blocking)
