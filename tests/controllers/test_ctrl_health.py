"""Node auto repair in the live controller (node.health, gate NodeRepair), step by step on a manual clock."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ctrl_steps import Steps, bound_pod, launched_node

from reconciler.controllers.nodeclaim.node_repair_controller import HealthController
from reconciler.controllers.nodeclaim.termination_controller import TerminationController
from reconciler.kube.api import NODE, NODECLAIM, POD, NotFoundError
from reconciler.model import labels as wk
from reconciler.model.meta import format_time


async def set_condition(steps: Steps, node: str, kind: str, status: str, ago: timedelta) -> None:
    current = await steps.kube.get(NODE, node)
    conditions = [c for c in current["status"].get("conditions") or [] if c["type"] != kind]
    conditions.append({"type": kind, "status": status, "reason": "KubeletNotReady",
                       "lastTransitionTime": format_time(steps.clock.now() - ago)})
    await steps.kube.patch(NODE, node, {"status": {"conditions": conditions}}, subresource="status")


async def gone(steps: Steps, kind: Any, name: str, namespace: str | None = None) -> bool:
    try:
        await steps.kube.get(kind, name, namespace)
    except NotFoundError:
        return True
    return False


async def test_an_unhealthy_node_is_replaced_without_a_drain_past_its_toleration() -> None:
    steps = Steps()
    await steps.basics()
    node, provider_id = await launched_node(steps)
    await bound_pod(steps, "web-0", node, {"app": "web"})
    # A PDB that would refuse any eviction: repair deletes the pod instead of evicting it.
    await steps.kube.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                             "metadata": {"name": "web", "namespace": "default"},
                             "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    health = HealthController(steps.context(), steps.store)

    await set_condition(steps, node, "Ready", "False", timedelta(minutes=29))
    (decision,) = await health.reconcile_once()
    assert decision.action == "wait" and decision.at == steps.clock.now() + timedelta(minutes=1)
    assert not (await steps.kube.get(NODECLAIM, "default-abcde"))["metadata"].get("deletionTimestamp")

    steps.clock.advance(60)
    (decision,) = await health.reconcile_once()
    assert decision.action == "repair"
    claim = await steps.kube.get(NODECLAIM, "default-abcde")
    assert claim["metadata"]["deletionTimestamp"]
    assert claim["metadata"]["annotations"][wk.NODECLAIM_TERMINATION_TIMESTAMP] == format_time(steps.clock.now())
    labels = {"nodepool": "default", "capacity_type": "on-demand"}
    assert steps.metrics.sample("karpenter_nodeclaims_disrupted_total", {"reason": "unhealthy", **labels}) == 1
    assert steps.metrics.sample("karpenter_nodeclaims_unhealthy_disrupted_total",
                                {"condition": "ready", "image_id": "ami-simulated", **labels}) == 1
    assert steps.events("NodeRepair")

    termination = TerminationController(steps.context(), steps.store)
    for _ in range(3):
        await termination.reconcile_all()
        await termination.workers.drain()
        steps.clock.advance(1)
    assert await gone(steps, POD, "web-0", "default")
    assert steps.metrics.sample("karpenter_pods_eviction_requests_total", {"code": "200"}) is None  # not evicted
    assert await gone(steps, NODECLAIM, "default-abcde") and await steps.cloud.list() == []
    assert ("delete", provider_id) in steps.cloud.calls


async def test_repair_waits_while_too_many_nodes_of_the_pool_are_unhealthy() -> None:
    steps = Steps()
    await steps.basics()
    nodes = [(await launched_node(steps, f"default-{i}"))[0] for i in range(3)]
    health = HealthController(steps.context(), steps.store)
    for name in nodes[:2]:  # 2 of 3 unhealthy: more than ceil(20 % of 3) = 1
        await set_condition(steps, name, "NetworkingReady", "False", timedelta(hours=1))
    decisions = await health.reconcile_once()
    assert {d.action for d in decisions} == {"blocked"}
    assert all(not c["metadata"].get("deletionTimestamp") for c in steps.kube.objects(NODECLAIM))
    blocked = steps.events("NodeRepairBlocked")
    assert blocked and blocked[0]["message"] == "more than 20% nodes are unhealthy in the nodepool"
    await health.reconcile_once()
    assert len(steps.events("NodeRepairBlocked")) == len(blocked)  # once per 15 minutes per node

    await set_condition(steps, nodes[1], "NetworkingReady", "True", timedelta(0))
    (decision,) = [d for d in await health.reconcile_once() if d.action == "repair"]
    assert decision.node == nodes[0]
    assert steps.metrics.sample("karpenter_nodeclaims_unhealthy_disrupted_total",
                                {"condition": "networking_ready", "nodepool": "default",
                                 "capacity_type": "on-demand", "image_id": "ami-simulated"}) == 1


async def test_the_controller_runs_only_behind_the_node_repair_gate() -> None:
    from ctrl_harness import Rig, running
    from ctrl_objects import fast_settings

    async with running(Rig()) as off:
        assert "node.health" not in off.loops
    async with running(Rig(settings=fast_settings(feature_gates={"NodeRepair": True}))) as on:
        assert "node.health" in on.loops
