"""``plan``: the NodeClaim manifests it writes, nodes being deleted, and the batch window."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reconciler.model import labels as wk
from reconciler.provisioning.batcher import Batcher
from reconciler.provisioning.provisioner import nomination_window
from reconciler.settings import Settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduling"))
from sched_factories import node, nodepool, pod, pods, requirement, solve

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_nodeclaim_manifest_is_complete():
    pool = nodepool(
        "batch",
        requirements=[{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]},
                      {"key": "team", "operator": "In", "values": ["data"]}],
        taints=[{"key": "batch", "effect": "NoSchedule"}],
        startup_taints=[{"key": "init", "effect": "NoSchedule"}],
        labels={"tier": "batch"},
    )
    pool["spec"]["template"]["metadata"]["annotations"] = {"owner": "data-team"}
    pool["spec"]["template"]["spec"]["expireAfter"] = "24h"
    pool["spec"]["template"]["spec"]["terminationGracePeriod"] = "1h"
    job = pod("job", cpu="1", memory="1Gi", tolerations=[{"key": "batch", "operator": "Exists"}],
              nodeSelector={wk.ZONE: "test-zone-2"})
    result = solve([pool, job])
    [planned] = result.nodeclaims
    assert planned.name == "batch-00001" and planned.nodepool == "batch" and planned.pods == ["default/job"]
    manifest = planned.manifest()
    assert manifest["apiVersion"] == "karpenter.sh/v1" and manifest["kind"] == "NodeClaim"
    metadata, spec = manifest["metadata"], manifest["spec"]
    assert metadata["name"] == "batch-00001"
    assert metadata["labels"] == {"tier": "batch", wk.NODEPOOL: "batch", "karpenter.k8s.aws/ec2nodeclass": "default",
                                  "team": "data"}
    assert metadata["annotations"]["owner"] == "data-team"
    assert wk.NODEPOOL_HASH in metadata["annotations"] and wk.NODEPOOL_HASH_VERSION in metadata["annotations"]
    assert metadata["ownerReferences"] == [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "batch",
                                            "blockOwnerDeletion": True, "uid": "uid-batch"}]
    assert requirement(manifest, wk.INSTANCE_TYPE)["values"] == sorted(planned.instance_type_options)
    assert requirement(manifest, wk.CAPACITY_TYPE) == {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}
    assert requirement(manifest, wk.ZONE)["values"] == ["test-zone-2"]
    assert requirement(manifest, wk.HOSTNAME) is None
    assert requirement(manifest, wk.REGISTERED) is None
    assert spec["taints"] == [{"key": "batch", "effect": "NoSchedule"}]
    assert spec["startupTaints"] == [{"key": "init", "effect": "NoSchedule"}]
    assert spec["resources"]["requests"] == {"cpu": "1", "memory": "1Gi", "pods": "1"}
    assert spec["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    assert spec["expireAfter"] == "24h" and spec["terminationGracePeriod"] == "1h"


def test_capacity_types_follow_the_chosen_types_offerings():
    result = solve([nodepool(), pod("p")])
    manifest = result.nodeclaims[0].manifest()
    assert requirement(manifest, wk.CAPACITY_TYPE)["values"] == ["on-demand", "spot"]
    assert requirement(manifest, wk.ZONE) is None  # not constrained: the cloud picks


def test_pods_of_nodes_marked_for_deletion_are_rescheduled():
    objects = [nodepool(), node("old", cpu="2"), pod("web", cpu="1", node_name="old")]
    from sched_factories import NOW, catalog, names

    from reconciler.provisioning.provisioner import plan
    from reconciler.state.cluster import ClusterState

    state = ClusterState.from_manifests(objects)
    assert not plan(state, {"default": catalog()}, Settings(), NOW, names()).nodeclaims
    state.mark_for_deletion("old")
    result = plan(state, {"default": catalog()}, Settings(), NOW, names())
    assert [c.pods for c in result.nodeclaims] == [["default/web"]]
    assert result.pending == {}  # the moving pod is not a pending pod


def test_pods_of_deleting_nodes_follow_upstream_is_currently_reschedulable():
    """Karpenter's rule for a deleting node's pods: a terminating StatefulSet pod is planned for (its
    successor needs the room); a pod a never-allowing PDB or an active do-not-disrupt keeps is not."""
    from sched_factories import NOW, catalog, names

    from reconciler.provisioning.provisioner import plan
    from reconciler.state.cluster import ClusterState

    def owned(manifest: dict, kind: str, name: str) -> dict:
        manifest["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": f"u-{name}", "controller": True}]
        return manifest

    stateful = owned(pod("db-0", cpu="1", node_name="old"), "StatefulSet", "db")
    stateful["metadata"]["deletionTimestamp"] = "2026-01-01T08:59:50Z"
    stateful["metadata"]["deletionGracePeriodSeconds"] = 30
    terminating = pod("gone", cpu="1", node_name="old")
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T08:59:50Z"
    guarded = owned(pod("guarded", cpu="1", node_name="old", labels={"app": "guarded"}), "ReplicaSet", "g")
    pinned = pod("pinned", cpu="1", node_name="old")
    pinned["metadata"]["annotations"] = {wk.DO_NOT_DISRUPT: "1h"}
    pinned["status"]["startTime"] = "2026-01-01T08:30:00Z"
    expired_pin = pod("was-pinned", cpu="1", node_name="old")
    expired_pin["metadata"]["annotations"] = {wk.DO_NOT_DISRUPT: "10m"}
    expired_pin["status"]["startTime"] = "2026-01-01T08:00:00Z"
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "g", "namespace": "default"},
           "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "guarded"}}}}
    objects = [nodepool(), node("old", cpu="8"), stateful, terminating, guarded, pinned, expired_pin, pdb,
               pod("web", cpu="1", node_name="old")]
    state = ClusterState.from_manifests(objects)
    state.mark_for_deletion("old")

    result = plan(state, {"default": catalog()}, Settings(), NOW, names())

    planned = sorted(key for claim in result.nodeclaims for key in claim.pods)
    assert planned == ["default/db-0", "default/was-pinned", "default/web"]


def test_many_identical_pods_share_claims_in_order():
    result = solve([nodepool(), *pods("web", 25, cpu="1", memory="1Gi")])
    assert sum(len(c.pods) for c in result.nodeclaims) == 25
    assert [c.name for c in result.nodeclaims] == [f"default-{i:05d}" for i in range(1, len(result.nodeclaims) + 1)]


def test_events_report_failures_and_planned_claims():
    result = solve([nodepool(), pod("ok"), pod("huge", cpu="500")])
    reasons = {(e["object"], e["reason"]) for e in result.events}
    assert ("Pod/default/huge", "FailedScheduling") in reasons
    assert ("NodeClaim/default-00001", "Nominated") in reasons


def test_batch_window_closes_after_idle_or_max():
    batcher = Batcher(idle=1.0, maximum=10.0)
    assert not batcher.is_open and batcher.closes_at() is None
    batcher.trigger("a", T0)
    assert batcher.closes_at() == T0 + timedelta(seconds=1)
    batcher.trigger("b", T0 + timedelta(milliseconds=800))
    assert batcher.closes_at() == T0 + timedelta(seconds=1.8)
    batcher.trigger("b", T0 + timedelta(milliseconds=1500))  # same UID: does not extend the window
    assert not batcher.ready(T0 + timedelta(milliseconds=1700))
    assert batcher.ready(T0 + timedelta(milliseconds=1800))
    assert batcher.close() == {"a", "b"} and not batcher.is_open


def test_batch_window_never_exceeds_the_maximum():
    batcher = Batcher.from_settings(Settings(batch_idle_duration=1.0, batch_max_duration=3.0))
    for i in range(10):
        batcher.trigger(f"pod-{i}", T0 + timedelta(milliseconds=500 * i))
    assert batcher.closes_at() == T0 + timedelta(seconds=3)


def test_nomination_window():
    assert nomination_window(Settings()) == timedelta(seconds=20)
    assert nomination_window(Settings(batch_idle_duration=1, batch_max_duration=2)) == timedelta(seconds=10)
