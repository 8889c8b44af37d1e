"""NodePool / EC2NodeClass status, pod-event stamps and stale disrupted taints, step by step."""

from __future__ import annotations

from typing import Any

from ctrl_objects import nodeclass, nodepool
from ctrl_steps import Steps, bound_pod, launched_node

from reconciler.controllers.disruption.disruption_controller import DisruptionController
from reconciler.controllers.nodeclaim.pod_events_controller import PodEventsController
from reconciler.controllers.pools_and_classes.status_controller import StatusController
from reconciler.controllers.runtime.context import NameGenerator
from reconciler.kube.api import EC2NODECLASS, NODE, NODECLAIM, NODEPOOL, POD
from reconciler.lifecycle.conditions import set_condition
from reconciler.model import labels as wk
from reconciler.model.conditions import condition


def conditions(manifest: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (manifest.get("status") or {}).get("conditions") or []}


async def test_nodepool_without_its_nodeclass_is_not_ready_and_says_why() -> None:
    steps = Steps()
    await steps.kube.create(nodepool())
    status = StatusController(steps.context(), steps.store)
    await status.reconcile_once()
    pool = await steps.kube.get(NODEPOOL, "default")
    assert conditions(pool) == {"ValidationSucceeded": "True", "NodeClassReady": "False", "Ready": "False",
                                "NodeRegistrationHealthy": "Unknown"}
    ready = next(c for c in pool["status"]["conditions"] if c["type"] == "Ready")
    # Karpenter's root condition: which dependents are unhealthy; the dependent says why.
    assert (ready["reason"], ready["message"]) == ("UnhealthyDependents", "NodeClassReady=False")
    nodeclass_ready = next(c for c in pool["status"]["conditions"] if c["type"] == "NodeClassReady")
    assert "EC2NodeClass 'default' not found" in nodeclass_ready["message"]
    assert steps.events("NotReady")


async def test_nodeclass_and_nodepool_become_ready_and_count_resources() -> None:
    steps = Steps()
    await steps.basics()
    status = StatusController(steps.context(), steps.store)
    await status.reconcile_once()
    assert conditions(await steps.kube.get(EC2NODECLASS, "default")) == {"Ready": "True"}
    await launched_node(steps)
    await status.reconcile_once()
    pool = await steps.kube.get(NODEPOOL, "default")
    assert conditions(pool)["Ready"] == "True"
    assert pool["status"]["nodes"] == 1
    assert pool["status"]["resources"]["cpu"] == "2" and pool["status"]["resources"]["nodes"] == "1"
    assert steps.metrics.sample("karpenter_nodepools_usage", {"nodepool": "default", "resource_type": "cpu"}) == 2.0
    version = pool["metadata"]["resourceVersion"]
    await status.reconcile_once()  # nothing changed: no write
    assert (await steps.kube.get(NODEPOOL, "default"))["metadata"]["resourceVersion"] == version


async def test_a_provider_that_resolves_nodeclasses_reports_their_status() -> None:
    steps = Steps()

    class ResolvingCloud:
        name = "resolving"

        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def nodeclass_status(self, nodeclass: dict[str, Any]) -> dict[str, Any]:
            return {"subnets": [{"id": "subnet-1", "zone": "us-east-1a"}],
                    "conditions": [condition("SubnetsReady", True, steps.clock.now()),
                                   condition("Ready", False, steps.clock.now(), reason="AMINotFound",
                                             message="no AMI matches al2023@latest")]}

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    steps.cloud = ResolvingCloud(steps.cloud)
    await steps.kube.create(nodeclass())
    await steps.kube.create(nodepool())
    status = StatusController(steps.context(), steps.store)
    await status.reconcile_once()
    stored = await steps.kube.get(EC2NODECLASS, "default")
    assert stored["status"]["subnets"] == [{"id": "subnet-1", "zone": "us-east-1a"}]
    assert conditions(stored) == {"SubnetsReady": "True", "Ready": "False"}
    assert conditions(await steps.kube.get(NODEPOOL, "default"))["NodeClassReady"] == "False"


async def test_pod_binding_stamps_last_pod_event_time_but_daemonset_pods_do_not() -> None:
    steps = Steps()
    await steps.basics()
    node, _ = await launched_node(steps)
    podevents = PodEventsController(steps.context(pod_event_dedupe=10), steps.store)
    daemon = {"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": "agent", "namespace": "default",
                           "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                                                "uid": "u", "controller": True}]},
              "spec": {"nodeName": node, "containers": [{"name": "c", "image": "pause"}]}}
    await steps.kube.create(daemon)
    assert await podevents.flush() == []
    await bound_pod(steps, "web-0", node, {"app": "web"})
    assert await podevents.flush() == ["default-abcde"]
    stamp = (await steps.kube.get(NODECLAIM, "default-abcde"))["status"]["lastPodEventTime"]
    assert stamp == "2026-01-01T09:00:00Z"
    await steps.kube.delete(POD, "web-0", "default")
    assert await podevents.flush() == []  # within the 10 s dedupe window
    steps.clock.advance(11)
    assert await podevents.flush() == ["default-abcde"]


async def test_a_disrupted_taint_left_by_a_dead_leader_is_removed() -> None:
    steps = Steps()
    await steps.basics()
    node, _ = await launched_node(steps)
    taint = {"key": wk.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}
    await steps.kube.patch(NODE, node, {"spec": {"taints": [taint]}})
    await set_condition(steps.kube, "default-abcde", condition("DisruptionReason", True, steps.clock.now(),
                                                               reason="Underutilized"))
    disruption = DisruptionController(steps.context(), steps.store, NameGenerator(lambda name: False, seed=1))
    assert await disruption.clear_stale_taints() == [node]
    assert (await steps.kube.get(NODE, node))["spec"]["taints"] == []
    assert "DisruptionReason" not in conditions(await steps.kube.get(NODECLAIM, "default-abcde"))
    # A node whose claim is being deleted keeps it: the terminator put it there.
    await steps.kube.patch(NODE, node, {"spec": {"taints": [taint]}})
    await steps.kube.delete(NODECLAIM, "default-abcde")
    assert await disruption.clear_stale_taints() == []
