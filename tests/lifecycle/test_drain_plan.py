from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.lifecycle.drain import (
    EvictionOutcome,
    ForceDelete,
    classify_eviction,
    drain_finished,
    eviction_backoff,
    plan_drain,
    termination_deadline,
    wait_for_volumes,
)
from reconciler.model.pdb import PdbLimits

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def ts(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(
    name: str,
    *,
    owner: str = "ReplicaSet",
    critical: bool = False,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    deleted: datetime | None = None,
    phase: str = "Running",
    grace: int | None = None,
    tolerations: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    api = "v1" if owner == "Node" else "apps/v1"
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "labels": labels or {},
        "annotations": annotations or {},
        "ownerReferences": [{"apiVersion": api, "kind": owner, "name": "o", "uid": "u"}],
    }
    if deleted:
        metadata["deletionTimestamp"] = ts(deleted)
    spec: dict[str, Any] = {"nodeName": "n1", "containers": [{"name": "c"}]}
    if critical:
        spec["priorityClassName"] = "system-node-critical"
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    if tolerations:
        spec["tolerations"] = tolerations
    return {
        "metadata": metadata,
        "spec": spec,
        "status": {
            "phase": phase,
            "startTime": ts(NOW - timedelta(hours=1)),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def test_tiers_drain_in_order() -> None:
    pods = [
        pod("app"),
        pod("ds", owner="DaemonSet"),
        pod("dns", critical=True),
        pod("cni", owner="DaemonSet", critical=True),
    ]
    plan = plan_drain(pods, None, NOW)
    assert plan.tier == "non-critical" and plan.evict == ["default/app"] and not plan.complete
    assert len(plan.waiting) == 4
    plan = plan_drain(pods[1:], None, NOW)
    assert plan.tier == "non-critical DaemonSet" and plan.evict == ["default/ds"]
    plan = plan_drain(pods[2:], None, NOW)
    assert plan.tier == "critical" and plan.evict == ["default/dns"]
    plan = plan_drain(pods[3:], None, NOW)
    assert plan.tier == "critical DaemonSet" and plan.evict == ["default/cni"]
    assert plan_drain([], None, NOW).complete


def test_terminating_pods_hold_their_tier_and_are_not_evicted_again() -> None:
    pods = [pod("app", deleted=NOW - timedelta(seconds=10)), pod("ds", owner="DaemonSet")]
    plan = plan_drain(pods, None, NOW)
    assert plan.evict == [] and plan.blocked == {"default/app": "terminating"}
    assert plan.tier == "non-critical"


def test_pods_not_waited_for() -> None:
    pods = [
        pod("static", owner="Node"),
        pod("tolerant", tolerations=[{"key": "karpenter.sh/disrupted", "operator": "Exists"}]),
        pod("stuck", deleted=NOW - timedelta(minutes=2)),
        pod("done", phase="Succeeded"),
    ]
    plan = plan_drain(pods, None, NOW)
    assert plan.complete and plan.evict == []


def test_do_not_disrupt_and_pdb_block_evictions_but_keep_the_drain_waiting() -> None:
    pods = [
        pod("pinned", annotations={"karpenter.sh/do-not-disrupt": "true"}),
        pod("web-1", labels={"app": "web"}),
        pod("web-2", labels={"app": "web"}),
        pod("web-3", labels={"app": "web"}),
    ]
    pdb = {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 2},
    }
    plan = plan_drain(pods, PdbLimits.from_manifests([pdb], pods), NOW)
    assert plan.evict == ["default/web-1"]  # one allowed disruption: one eviction this round
    assert "do-not-disrupt" in plan.blocked["default/pinned"]
    assert "default/web" in plan.blocked["default/web-2"]
    assert not plan.complete and plan.force_delete == []


def test_termination_deadline_forces_deletion_per_pod_grace_regardless_of_tier() -> None:
    deadline = NOW + timedelta(seconds=60)
    pods = [
        pod("pinned", annotations={"karpenter.sh/do-not-disrupt": "true"}, grace=90),  # 60 < 90: delete now
        pod("app", grace=30),  # deletes at deadline - 30 s
        pod("cni", owner="DaemonSet", critical=True, grace=120),  # last tier, but its grace is long
    ]
    plan = plan_drain(pods, None, NOW, deadline=deadline)
    assert plan.force_delete == [ForceDelete("default/pinned", 60), ForceDelete("default/cni", 60)]
    assert plan.evict == ["default/app"]
    later = plan_drain(pods[1:2], None, NOW + timedelta(seconds=31), deadline=deadline)
    assert later.force_delete == [ForceDelete("default/app", 29)]
    past = plan_drain(pods[1:2], None, deadline + timedelta(seconds=5), deadline=deadline)
    assert past.force_delete == [ForceDelete("default/app", 1)]  # never 0: that would skip graceful shutdown


def test_terminating_pod_with_grace_beyond_the_deadline_is_shortened() -> None:
    deadline = NOW + timedelta(seconds=20)
    slow = pod("slow", deleted=NOW + timedelta(seconds=50))  # kubelet would wait until then
    plan = plan_drain([slow], None, NOW, deadline=deadline)
    assert plan.force_delete == [ForceDelete("default/slow", 20)]


def test_missing_grace_period_defaults_to_thirty_seconds() -> None:
    deadline = NOW + timedelta(seconds=29)
    assert plan_drain([pod("app")], None, NOW, deadline=deadline).force_delete


def test_termination_deadline_from_annotation_or_deletion_plus_tgp() -> None:
    claim = {
        "metadata": {"deletionTimestamp": ts(NOW)},
        "spec": {"terminationGracePeriod": "1h"},
    }
    assert termination_deadline(claim) == NOW + timedelta(hours=1)
    claim["metadata"]["annotations"] = {
        "karpenter.sh/nodeclaim-termination-timestamp": ts(NOW + timedelta(minutes=5))
    }
    assert termination_deadline(claim) == NOW + timedelta(minutes=5)
    assert termination_deadline({"metadata": {"deletionTimestamp": ts(NOW)}, "spec": {}}) is None
    assert termination_deadline(None) is None


def test_eviction_outcomes_and_backoff() -> None:
    assert classify_eviction(None) is EvictionOutcome.EVICTED
    assert classify_eviction(201) is EvictionOutcome.EVICTED
    assert classify_eviction(404) is EvictionOutcome.GONE
    assert classify_eviction(409) is EvictionOutcome.GONE
    assert classify_eviction(429, "Cannot evict pod as it would violate the pod's disruption budget.") is (
        EvictionOutcome.BLOCKED
    )
    multi = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    assert classify_eviction(500, multi) is EvictionOutcome.BLOCKED
    assert classify_eviction(500, "etcd timeout") is EvictionOutcome.ERROR
    assert [eviction_backoff(i) for i in range(3)] == [0.1, 0.2, 0.4]
    assert eviction_backoff(20) == 10.0


def test_minimum_drain_time_and_volume_wait() -> None:
    empty = plan_drain([], None, NOW)
    assert not drain_finished(empty, NOW - timedelta(seconds=4), NOW)
    assert drain_finished(empty, NOW - timedelta(seconds=5), NOW)
    assert wait_for_volumes(None, NOW)
    # Karpenter: the grace period has elapsed once now is not before the deadline.
    assert wait_for_volumes(NOW + timedelta(seconds=1), NOW) and not wait_for_volumes(NOW, NOW)


def test_a_pod_without_a_grace_period_gets_the_api_default_of_30_seconds() -> None:
    from reconciler.model.pod import Pod

    bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c"}]}}
    assert Pod.from_manifest(bare).termination_grace_period_seconds == 30
