"""One pod model for every consumer: the Pod carries the start time and readiness that do-not-disrupt durations
and ``unhealthyPodEvictionPolicy: AlwaysAllow`` depend on, and "is this a DaemonSet pod?" has one answer.

Before the pod model carried them, a do-not-disrupt duration read from a ``Pod`` protected for ever and
AlwaysAllow never let an unready ``Pod`` through: these tests go through the consumers that receive Pods
(the static pool's surplus choice, the drain plan)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from disruption_factories import NOW, cluster, managed_node, nodepool, pdb, pod

from reconciler.insight.plan.proposal import _pod_for_fresh_provision
from reconciler.lifecycle.drain import plan_drain
from reconciler.lifecycle.pod_events import PodEventStamper
from reconciler.model.meta import owned_by_daemonset
from reconciler.model.pdb import PdbLimits
from reconciler.model.pod import Pod
from reconciler.provisioning.static import surplus

DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"


@pytest.mark.parametrize(("protection", "chosen"), [("1h", "a-claim"), ("3h", "b-claim"), ("true", "b-claim")])
def test_a_do_not_disrupt_duration_expires_for_a_static_pools_surplus(protection: str, chosen: str) -> None:
    """Two equally busy nodes; ``a`` runs a pod started 2 h ago under do-not-disrupt: a 1 h protection is over
    (``a`` goes first, by name), a 3 h one or ``"true"`` still holds (``b`` goes)."""
    state = cluster(
        nodepool(), managed_node("a"), managed_node("b"),
        pod("guarded", node="a", annotations={DO_NOT_DISRUPT: protection}, started=NOW - timedelta(hours=2)),
        pod("plain", node="b", started=NOW - timedelta(hours=2)),
    )
    nodes = sorted(state.state_nodes(), key=lambda n: n.name)
    assert surplus(nodes, 1, state.nodepools["default"], NOW) == [chosen]


def test_the_pod_model_carries_start_time_and_readiness() -> None:
    started = NOW - timedelta(minutes=5)
    parsed = Pod.from_manifest(pod("a", node="n1", started=started, ready=False))
    assert parsed.start_time == started and parsed.ready is False
    assert Pod.from_manifest(pod("b", node="n1", ready=None)).ready is None
    assert Pod.from_manifest(pod("c")).start_time is None  # not started: a duration then protects (fail safe)


def test_always_allow_lets_an_unready_pod_of_the_cluster_state_drain() -> None:
    """The drain plan, handed the cluster state's Pods: AlwaysAllow evicts the unready pod through a PDB
    allowing nothing, and still holds the ready one."""
    manifests = [pod("sick", node="n1", labels={"app": "web"}, ready=False),
                 pod("well", node="n1", labels={"app": "web"})]
    budget = pdb("web", {"app": "web"}, allowed=0, always_allow=True)
    state = cluster(nodepool(), managed_node("n1"), *manifests, budget)
    pods = [state.pods["default/sick"], state.pods["default/well"]]
    plan = plan_drain(pods, PdbLimits.from_manifests([budget], manifests), NOW)
    assert plan.evict == ["default/sick"] and "default/well" in plan.blocked
    strict = plan_drain(pods, PdbLimits.from_manifests([pdb("web", {"app": "web"}, allowed=0)], manifests), NOW)
    assert strict.evict == []


def _owned(*references: dict[str, Any]) -> dict[str, Any]:
    manifest = pod("p", node="n1", owner=None)
    manifest["metadata"]["ownerReferences"] = list(references)
    return manifest


DAEMONSET = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "d1"}
REPLICASET = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "r1", "controller": True}


@pytest.mark.parametrize(("manifest", "is_daemon"), [
    (_owned({**DAEMONSET, "controller": True}), True),
    # Karpenter's IsOwnedByDaemonSet reads every ownerReference, not only the controller's.
    (_owned(DAEMONSET), True),
    (_owned(REPLICASET, DAEMONSET), True),
    (_owned({"kind": "DaemonSet", "name": "agent"}), True),  # no apiVersion, as hand-written scenario files
    # A DaemonSet kind of another API group (OpenKruise's Advanced DaemonSet) is not one, as upstream.
    (_owned({**DAEMONSET, "apiVersion": "apps.kruise.io/v1alpha1", "controller": True}), False),
    (_owned(REPLICASET), False),
    (_owned(), False),
], ids=["controller", "not-controller", "beside-a-controller", "no-api-version", "other-group", "replicaset",
        "unowned"])
def test_every_consumer_agrees_on_which_pods_are_daemonset_pods(manifest: dict[str, Any], is_daemon: bool) -> None:
    assert owned_by_daemonset(manifest["metadata"]) is is_daemon
    assert Pod.from_manifest(manifest).is_daemonset_pod is is_daemon
    # Pod-event stamping (live and simulated) skips DaemonSet pods: their binding stamps no node.
    assert (PodEventStamper().observe(manifest, False, NOW) == "") is is_daemon
    # A proposal's fresh provision drops a managed node's DaemonSet pods (recreated per node), keeps others.
    assert (_pod_for_fresh_provision(manifest, {"n1"}, NOW) is None) is is_daemon
    # The scheduler does not provision for a pending DaemonSet pod.
    pending = {**manifest, "spec": {k: v for k, v in manifest["spec"].items() if k != "nodeName"}, "status": {}}
    assert Pod.from_manifest(pending).is_provisionable() is not is_daemon
