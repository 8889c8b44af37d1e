"""ClusterState: built incrementally from manifests, merged per-node views, pending pods, pool totals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from reconciler.model import labels as wk
from reconciler.model.meta import ManifestError
from reconciler.model.resources import Resources
from reconciler.state.cluster import ClusterState

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def node(name: str, provider: str, pool: str | None = "default") -> dict:
    labels = {wk.INSTANCE_TYPE: "m5.large", wk.ZONE: "z1", wk.CAPACITY_TYPE: "spot"}
    if pool:
        labels[wk.NODEPOOL] = pool
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": {"providerID": provider, "taints": [{"key": "agent", "effect": "NoSchedule"}]},
            "status": {"capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                       "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"}}}


def claim(name: str, provider: str = "", initialized: bool = False) -> dict:
    conditions = [{"type": "Initialized", "status": "True"}] if initialized else []
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {wk.NODEPOOL: "default"}},
            "spec": {"requirements": [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["c5.xlarge"]}],
                     "startupTaints": [{"key": "agent", "effect": "NoSchedule"}],
                     "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
            "status": {"providerID": provider, "conditions": conditions,
                       "capacity": {"cpu": "4", "memory": "8Gi", "pods": "58"}}}


def pod(name: str, node_name: str = "", cpu: str = "100m", owner: str | None = None, **meta) -> dict:
    metadata = {"name": name, "namespace": "default", **meta}
    if owner:
        metadata["ownerReferences"] = [{"kind": owner, "name": "o", "uid": "u", "controller": True}]
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def test_node_and_nodeclaim_merge_by_provider_id():
    state = ClusterState.from_manifests([node("n1", "aws:///i-1"), claim("default-abc", "aws:///i-1")])
    [merged] = state.state_nodes()
    assert merged.name == "n1" and merged.nodeclaim_name == "default-abc"
    assert merged.managed and merged.nodepool == "default" and merged.instance_type == "m5.large"
    assert state.state_node("default-abc") is merged


def test_in_flight_claim_is_a_node_with_claim_labels_and_capacity():
    state = ClusterState.from_manifests([claim("default-new")])
    [inflight] = state.state_nodes()
    assert inflight.node is None and inflight.name == "default-new"
    assert inflight.labels[wk.INSTANCE_TYPE] == "c5.xlarge"  # single-valued requirement
    assert inflight.capacity == Resources.of(cpu="4", memory="8Gi", pods="58")
    assert not inflight.initialized


def test_pods_requests_daemonsets_and_host_ports_per_node():
    ds = pod("ds", "n1", cpu="200m", owner="DaemonSet")
    web = pod("web", "n1", cpu="1")
    web["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80}]
    done = pod("done", "n1", cpu="1")
    done["status"] = {"phase": "Succeeded"}
    state = ClusterState.from_manifests([node("n1", "p1"), ds, web, done])
    [n1] = state.state_nodes()
    assert set(n1.pods) == {"default/ds", "default/web"}
    assert n1.pod_requests == Resources.of(cpu="1200m", pods="2")
    assert n1.daemonset_requests == Resources.of(cpu="200m", pods="1")
    assert n1.available.amount("cpu") == 730
    assert [str(p) for _, p in n1.host_ports] == ["0.0.0.0:80/TCP"]
    assert [p.key for p in n1.reschedulable_pods()] == ["default/web"]


def test_upsert_replaces_and_remove_forgets():
    state = ClusterState.from_manifests([node("n1", "p1"), pod("web", "n1")])
    moved = pod("web", "n2")
    state.upsert(node("n2", "p2"))
    state.upsert(moved)
    assert state.state_node("n1").pods == {}
    assert set(state.state_node("n2").pods) == {"default/web"}
    state.remove(moved)
    state.remove({"kind": "Node", "metadata": {"name": "n1"}})
    assert [n.name for n in state.state_nodes()] == ["n2"]
    assert state.state_node("n2").pods == {}


def test_pending_pods_are_the_provisionable_ones():
    state = ClusterState.from_manifests([pod("a"), pod("b", "n1"), pod("c", owner="DaemonSet"),
                                         pod("d", deletionTimestamp="2026-01-01T00:00:00Z")])
    assert [p.key for p in state.pending_pods()] == ["default/a"]


def test_pending_and_unbound_indexes_follow_every_write():
    # The indexes kept as pods are written answer as a scan of every pod would, order included.
    state = ClusterState()
    writes = [pod("b"), pod("a"), pod("c", "n1"), pod("a", "n1"), pod("d", owner="DaemonSet"),
              {**pod("e"), "status": {"phase": "Succeeded"}}, pod("b"), pod("c"),
              pod("f", deletionTimestamp="2026-01-01T00:00:00Z"), {**pod("g"), "status": {"phase": "Pending"}}]
    for manifest in writes:
        state.upsert(manifest)
        scan = [p for _, p in sorted(state.pods.items()) if p.is_provisionable()]
        assert state.pending_pods() == scan
        unbound = [m for m in state.pod_manifests.values()
                   if not m["spec"].get("nodeName") and (m.get("status") or {}).get("phase") not in ("Succeeded",
                                                                                                    "Failed")
                   and not m["metadata"].get("deletionTimestamp")]
        assert state.unbound_pod_manifests() == unbound
    state.remove(pod("c"))
    assert "default/c" not in {p.key for p in state.pending_pods()}
    assert all(m["metadata"]["name"] != "c" for m in state.unbound_pod_manifests())


def test_marking_and_nomination_are_flags():
    state = ClusterState.from_manifests([node("n1", "p1"), claim("c1", "p1")])
    state.mark_for_deletion("c1")
    assert state.state_node("n1").marked_for_deletion
    state.unmark_for_deletion("c1")
    state.nominate("n1", NOW + timedelta(seconds=20))
    n1 = state.state_node("n1")
    assert not n1.marked_for_deletion
    assert n1.nominated(NOW) and not n1.nominated(NOW + timedelta(seconds=21))


def test_uninitialized_managed_nodes_hide_startup_taints_from_scheduling():
    state = ClusterState.from_manifests([node("n1", "p1"), claim("c1", "p1")])
    assert state.state_node("n1").scheduling_taints() == ()
    state.upsert(claim("c1", "p1", initialized=True))
    assert [t.key for t in state.state_node("n1").scheduling_taints()] == ["agent"]


def test_nodepool_usage_sums_capacity_and_counts_nodes():
    state = ClusterState.from_manifests([node("n1", "p1"), claim("c1", "p1"), claim("c2"),
                                         node("other", "p3", pool=None)])
    usage = state.nodepool_usage("default")
    assert usage == Resources.of(cpu="6", memory="16Gi", pods="87", nodes="2")


def test_runtime_and_priority_classes_apply_whatever_the_order():
    kata = pod("kata")
    kata["spec"]["runtimeClassName"] = "kata"
    kata["spec"]["priorityClassName"] = "high"
    state = ClusterState.from_manifests([kata])
    state.upsert({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "kata"},
                  "handler": "kata", "overhead": {"podFixed": {"cpu": "250m"}}})
    state.upsert({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
                  "value": 1000})
    parsed = state.pods["default/kata"]
    assert parsed.requests == Resources.of(cpu="350m") and parsed.priority == 1000


def test_daemonset_pods_come_from_templates():
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "kube-system"},
          "spec": {"template": {"metadata": {"labels": {"app": "agent"}},
                                "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "50m"}}}]}}}}
    state = ClusterState.from_manifests([ds])
    [template] = state.daemonset_pods()
    assert template.is_daemonset_pod and template.requests == Resources.of(cpu="50m")


def test_bad_manifests_raise_a_named_error():
    bad = node("n1", "p1")
    bad["status"]["capacity"]["cpu"] = "two"
    with pytest.raises(ManifestError, match=r"Node n1: status\.capacity\.cpu"):
        ClusterState.from_manifests([bad])
    pool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"},
            "spec": {"template": {"spec": {"requirements": [{"key": wk.NODEPOOL, "operator": "In",
                                                               "values": ["x"]}]}}}}
    with pytest.raises(ManifestError, match=r"NodePool p: spec.template.spec.requirements\[0\].key"):
        ClusterState.from_manifests([pool])
