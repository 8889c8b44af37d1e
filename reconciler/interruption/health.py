"""The DescribeInstanceStatus poller: unhealthy instances found without any queue.

Every minute, three server-side filter sets (ORed): instance status impaired,
system status impaired, and scheduled events (reboot, maintenance, retirement,
stop). Impaired instances are acted on only after 120 s of continuous
impairment, forcefully (the NodeClaim's termination timestamp is set so the
drain does not wait on PDBs); scheduled events cordon and drain at once.
``classify`` is the pure part; ``HealthPoller`` does the calls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.cloud.aws.clients import AwsCaller, error_code
from reconciler.cloud.aws.ice import UnavailableOfferings
from reconciler.cloud.aws.interruption_metrics import InterruptionMetrics
from reconciler.cloud.aws.metrics import AWSMetrics
from reconciler.interruption.actions import Action, ActionKind
from reconciler.interruption.execution import NodeClaimSource, execute, nodeclaims_by_instance
from reconciler.kube.api import KubeAPI

IMPAIRED_GRACE = timedelta(seconds=120)
SCHEDULED_EVENT_CODES = (
    "instance-reboot",
    "system-reboot",
    "system-maintenance",
    "instance-retirement",
    "instance-stop",
)
FILTER_SETS = (
    [{"Name": "instance-status.status", "Values": ["impaired"]}],
    [{"Name": "system-status.status", "Values": ["impaired"]}],
    [{"Name": "event.code", "Values": list(SCHEDULED_EVENT_CODES)}],
)


@dataclass(slots=True, frozen=True)
class Unhealthy:
    instance_id: str
    category: str  # instance_status | system_status | event_status
    forceful: bool


@dataclass(slots=True)
class ImpairmentTracker:
    """When each instance was first seen impaired (kept between polls)."""

    first_seen: dict[str, datetime] = field(default_factory=dict)


def classify(
    statuses: Iterable[Mapping[str, Any]], tracker: ImpairmentTracker, now: datetime
) -> list[Unhealthy]:
    unhealthy: dict[str, Unhealthy] = {}
    impaired_now = set()
    for status in statuses:
        instance_id = str(status.get("InstanceId", ""))
        if not instance_id:
            continue
        instance_impaired = (status.get("InstanceStatus") or {}).get("Status") == "impaired"
        system_impaired = (status.get("SystemStatus") or {}).get("Status") == "impaired"
        if instance_impaired or system_impaired:
            impaired_now.add(instance_id)
            since = tracker.first_seen.setdefault(instance_id, now)
            if now - since >= IMPAIRED_GRACE:
                category = "instance_status" if instance_impaired else "system_status"
                unhealthy[instance_id] = Unhealthy(instance_id, category, forceful=True)
                continue
        events = [e for e in status.get("Events") or [] if e.get("Code") in SCHEDULED_EVENT_CODES]
        if events and instance_id not in unhealthy:
            unhealthy[instance_id] = Unhealthy(instance_id, "event_status", forceful=False)
    for instance_id in list(tracker.first_seen):
        if instance_id not in impaired_now:
            del tracker.first_seen[instance_id]
    return [unhealthy[key] for key in sorted(unhealthy)]


def actions_for(unhealthy: Iterable[Unhealthy], nodeclaims: Mapping[str, Mapping[str, Any]]) -> list[Action]:
    actions = []
    for item in unhealthy:
        claim = nodeclaims.get(item.instance_id)
        if claim is None:
            continue
        metadata = claim.get("metadata") or {}
        if metadata.get("deletionTimestamp"):
            continue
        actions.append(
            Action(
                ActionKind.DELETE_NODECLAIM if item.forceful else ActionKind.CORDON_DRAIN,
                item.instance_id,
                str(metadata.get("name", "")),
                str((claim.get("status") or {}).get("nodeName", "")),
                reason="InstanceUnhealthy",
                message=f"instance {item.instance_id}: {item.category}",
                forceful=item.forceful,
            )
        )
    return actions


class HealthPoller:
    def __init__(
        self,
        kube: KubeAPI,
        ec2: Any,
        caller: AwsCaller,
        *,
        unavailable: UnavailableOfferings | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        metrics: InterruptionMetrics | None = None,
        nodeclaims: NodeClaimSource | None = None,
    ) -> None:
        self.kube = kube
        self.nodeclaims = nodeclaims
        self.ec2 = ec2
        self.metrics = metrics or AWSMetrics.of(None).interruption
        self.caller = caller
        self.unavailable = unavailable
        self.tracker = ImpairmentTracker()
        self._now = now

    async def poll_once(self) -> list[Action]:
        statuses: dict[str, Mapping[str, Any]] = {}
        for filters in FILTER_SETS:
            try:
                items = await self.caller.paginate(
                    self.ec2,
                    "describe_instance_status",
                    "InstanceStatuses",
                    Filters=filters,
                    IncludeAllInstances=False,
                )
            except Exception as err:
                if error_code(err) in ("UnauthorizedOperation", "AccessDenied"):
                    return []  # the permission is optional; Karpenter only logs
                raise
            for item in items:
                statuses[str(item.get("InstanceId"))] = item
        now = self._now()
        unhealthy = classify(statuses.values(), self.tracker, now)
        if not unhealthy:
            return []
        for item in unhealthy:
            self.metrics.instance_status_unhealthy.labels(category=item.category).inc()
        actions = actions_for(unhealthy, await nodeclaims_by_instance(self.kube, self.nodeclaims))
        for action in actions:
            await execute(self.kube, action, now, self.unavailable, self.metrics)
        return actions
