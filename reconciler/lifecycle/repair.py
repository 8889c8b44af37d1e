"""Node auto repair (feature gate ``NodeRepair``): which unhealthy nodes to replace, decided without I/O.

As Karpenter's ``node.health`` controller with the AWS provider's repair policies: a Node whose condition
has held an unhealthy status for its policy's toleration time (Ready False or Unknown 30 min,
AcceleratedHardwareReady False 10 min, StorageReady / NetworkingReady / KernelReady /
ContainerRuntimeReady False 30 min, the last five reported by the EKS node monitoring agent) has its
NodeClaim deleted forcefully: the termination timestamp is set to now, so the drain deletes pods at once
instead of evicting them and does not wait for volumes.

Repair is held back while too much of the pool is unhealthy (the failure is then more likely a bad AMI or
an AZ problem than one broken machine): a NodePool may have at most 20 % of its Nodes unhealthy, rounded
*up* (one of 3 nodes is 33 % and still allowed), counting every Node labelled with the pool and unhealthy
by any policy whatever its toleration. A NodeClaim without a NodePool is judged against all the
cluster's Nodes. The callers (the live ``controllers.nodeclaim.node_repair_controller`` and the simulator) carry
the decisions out with ``delete_forcefully``, this module's only I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.kube.api import NODECLAIM, KubeAPI
from reconciler.model import labels as wk
from reconciler.model.conditions import condition_of
from reconciler.model.meta import format_time, parse_time_or_none

Manifest = Mapping[str, Any]
ALLOWED_UNHEALTHY_PERCENT = 20
# A pool over the limit is looked at again after this long (Karpenter requeues in 5 minutes).
BLOCKED_RECHECK = timedelta(minutes=5)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(slots=True, frozen=True)
class RepairPolicy:
    """A Node condition that, once it has had ``status`` for ``toleration``, makes the node be replaced."""

    condition: str
    status: str
    toleration: timedelta


# aws/karpenter-provider-aws pkg/cloudprovider RepairPolicies() (v1.14).
AWS_REPAIR_POLICIES: tuple[RepairPolicy, ...] = (
    RepairPolicy("Ready", "False", timedelta(minutes=30)),
    RepairPolicy("Ready", "Unknown", timedelta(minutes=30)),
    RepairPolicy("AcceleratedHardwareReady", "False", timedelta(minutes=10)),
    RepairPolicy("StorageReady", "False", timedelta(minutes=30)),
    RepairPolicy("NetworkingReady", "False", timedelta(minutes=30)),
    RepairPolicy("KernelReady", "False", timedelta(minutes=30)),
    RepairPolicy("ContainerRuntimeReady", "False", timedelta(minutes=30)),
)


@dataclass(slots=True, frozen=True)
class Unhealthy:
    """The node's unhealthy condition that reaches its toleration first."""

    condition: str
    status: str
    since: datetime
    toleration: timedelta
    reason: str = ""

    @property
    def due(self) -> datetime:
        return self.since + self.toleration

    def describe(self) -> str:
        detail = f" ({self.reason})" if self.reason else ""
        return (f"{self.condition}={self.status}{detail} since {format_time(self.since)}, "
                f"toleration {_minutes(self.toleration)}")


@dataclass(slots=True, frozen=True)
class RepairDecision:
    """``action``: ``repair`` (delete the NodeClaim now), ``wait`` (until ``at``) or ``blocked`` (the pool has
    too many unhealthy nodes; look again at ``at``)."""

    node: str
    nodeclaim: str
    nodepool: str
    action: str
    unhealthy: Unhealthy
    at: datetime
    message: str


def unhealthy_condition(node: Manifest, policies: Sequence[RepairPolicy] = AWS_REPAIR_POLICIES) -> Unhealthy | None:
    """The matching policy whose toleration runs out first (Karpenter's ``findUnhealthyConditions``).

    A matching condition without a readable ``lastTransitionTime`` counts from the epoch, as Go's zero time
    does upstream: it is overdue at once."""
    found: Unhealthy | None = None
    for policy in policies:
        condition = condition_of(node, policy.condition)
        if condition is None or condition.get("status") != policy.status:
            continue
        since = parse_time_or_none(condition.get("lastTransitionTime")) or _EPOCH
        candidate = Unhealthy(policy.condition, policy.status, since, policy.toleration,
                              str(condition.get("reason") or ""))
        if found is None or candidate.due < found.due:
            found = candidate
    return found


def is_unhealthy(node: Manifest, policies: Sequence[RepairPolicy] = AWS_REPAIR_POLICIES) -> bool:
    return any((condition_of(node, p.condition) or {}).get("status") == p.status for p in policies)


def unhealthy_threshold(total: int) -> int:
    """How many of ``total`` nodes may be unhealthy: 20 %, rounded up (intstr's scaled value, round up)."""
    return math.ceil(total * ALLOWED_UNHEALTHY_PERCENT / 100)


def healthy_enough(nodes: Iterable[Manifest], policies: Sequence[RepairPolicy] = AWS_REPAIR_POLICIES) -> bool:
    counted = list(nodes)
    unhealthy = sum(1 for node in counted if is_unhealthy(node, policies))
    return unhealthy <= unhealthy_threshold(len(counted))


def decide_repairs(
    claims_and_nodes: Iterable[tuple[Manifest, Manifest]],
    all_nodes: Sequence[Manifest],
    now: datetime,
    policies: Sequence[RepairPolicy] = AWS_REPAIR_POLICIES,
) -> list[RepairDecision]:
    """A decision per registered node with an unhealthy condition; ``claims_and_nodes`` pairs each managed
    Node with its NodeClaim (claims already being deleted are left alone), ``all_nodes`` is every Node."""
    by_pool: dict[str, list[Manifest]] = {}
    for node in all_nodes:
        pool = ((node.get("metadata") or {}).get("labels") or {}).get(wk.NODEPOOL)
        if pool:
            by_pool.setdefault(pool, []).append(node)
    pool_health: dict[str, bool] = {}
    decisions = []
    for claim, node in claims_and_nodes:
        claim_meta = claim.get("metadata") or {}
        if claim_meta.get("deletionTimestamp"):
            continue
        unhealthy = unhealthy_condition(node, policies)
        if unhealthy is None:
            continue
        node_name = str((node.get("metadata") or {}).get("name", ""))
        pool = str((claim_meta.get("labels") or {}).get(wk.NODEPOOL, ""))
        base = (node_name, str(claim_meta.get("name", "")), pool)
        if now < unhealthy.due:
            decisions.append(RepairDecision(*base, "wait", unhealthy, unhealthy.due,
                                            f"unhealthy: {unhealthy.describe()}; replaced at {unhealthy.due:%H:%M:%S}"))
            continue
        scope = by_pool.get(pool, []) if pool else list(all_nodes)
        key = pool or "\x00cluster"
        if key not in pool_health:
            pool_health[key] = healthy_enough(scope, policies)
        if not pool_health[key]:
            where = "nodepool" if pool else "cluster"
            decisions.append(RepairDecision(
                *base, "blocked", unhealthy, now + BLOCKED_RECHECK,
                f"more than {ALLOWED_UNHEALTHY_PERCENT}% nodes are unhealthy in the {where}"))
            continue
        decisions.append(RepairDecision(*base, "repair", unhealthy, now,
                                        f"deleting unhealthy node: {unhealthy.describe()}"))
    return decisions


def _minutes(length: timedelta) -> str:
    minutes = int(length.total_seconds() // 60)
    return f"{minutes}m" if minutes * 60 == length.total_seconds() else f"{int(length.total_seconds())}s"


async def delete_forcefully(kube: KubeAPI, nodeclaim: Manifest, now: datetime) -> None:
    """Stamp the termination timestamp with now (an earlier one stays) and delete the claim: its pods are
    then deleted, not evicted, and volumes are not waited for. Raises ``NotFoundError`` when it is gone."""
    metadata = nodeclaim.get("metadata") or {}
    name = str(metadata.get("name", ""))
    stamped = parse_time_or_none((metadata.get("annotations") or {}).get(wk.NODECLAIM_TERMINATION_TIMESTAMP))
    if stamped is None or stamped > now:
        await kube.patch(NODECLAIM, name, {"metadata": {"annotations": {
            wk.NODECLAIM_TERMINATION_TIMESTAMP: format_time(now)}}})
    await kube.delete(NODECLAIM, name)
