"""The engine's explanations as Kubernetes Events: FailedScheduling on pods, DisruptionBlocked on NodeClaims.

Each explanation goes out once per dedupe period per (object, reason, message);
a changed explanation goes out at once. Every Event written must be a valid
core/v1 Event (checked against the upstream schema, as the fake API server does).
"""

from __future__ import annotations

from typing import Any

from ctrl_harness import Rig, running, wait_for
from ctrl_objects import deployment, nodeclass, nodepool
from ctrl_steps import Steps, launched_node
from support.schema_validation import SchemaValidator

from reconciler.controllers.disruption.disruption_controller import DisruptionController
from reconciler.controllers.nodeclaim.lifecycle_controller import NodeClaimLifecycle
from reconciler.controllers.provisioning.provisioning_controller import Provisioner
from reconciler.controllers.runtime.context import ControllerContext, NameGenerator
from reconciler.kube.api import DEPLOYMENT, EVENT, NODE, NODECLAIM, NODEPOOL, PDB, POD
from reconciler.model import labels as wk
from reconciler.sim.workloads import create_with_status, pending_pod, running_status

VALIDATOR = SchemaValidator()


def events_about(steps: Steps, kind: str, name: str, reason: str) -> list[dict[str, Any]]:
    found = [
        e for e in steps.kube.objects(EVENT)
        if e["involvedObject"]["kind"] == kind and e["involvedObject"]["name"] == name and e["reason"] == reason
    ]
    for event in found:
        assert VALIDATOR.check(event) is None, VALIDATOR.check(event)
    return found


async def pending(steps: Steps, name: str, *, cpu: str = "100m", tolerations: list[Any] | None = None) -> None:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]}
    if tolerations is not None:
        spec["tolerations"] = tolerations
    pod = pending_pod({"metadata": {"labels": {"app": name}}, "spec": spec}, name=name, namespace="default",
                      now=steps.clock.now())
    await create_with_status(steps.kube, pod)


def provisioner(steps: Steps) -> tuple[Provisioner, ControllerContext]:
    ctx = steps.context()
    return Provisioner(ctx, steps.store, NameGenerator(lambda name: False, seed=1)), ctx


async def test_a_pod_no_nodepool_can_take_gets_one_failed_scheduling_event_naming_the_blocker() -> None:
    steps = Steps()
    await steps.basics()
    await pending(steps, "huge", cpu="1000")
    provision, ctx = provisioner(steps)

    await provision.provision_once()
    steps.clock.advance(10)
    await provision.provision_once()  # the recheck while the pod stays pending: same reason, not repeated
    steps.clock.advance(ctx.timings.scheduling_event_dedupe - 20)
    await provision.provision_once()

    [event] = events_about(steps, "Pod", "huge", "FailedScheduling")
    assert event["type"] == "Warning" and event["count"] == 1
    assert event["message"].startswith("Failed to schedule pod, NodePool default: no instance type has enough")
    assert "cpu 1000" in event["message"] and "c5.2xlarge" in event["message"]
    assert not steps.kube.objects(NODECLAIM)
    steps.clock.advance(20)  # the period is over: the same explanation may go out again (aggregated)
    await provision.provision_once()
    assert events_about(steps, "Pod", "huge", "FailedScheduling")[0]["count"] == 2


async def test_a_missing_toleration_is_named_and_a_changed_reason_goes_out_at_once() -> None:
    steps = Steps()
    await steps.kube.create(nodeclass())
    await steps.kube.create(nodepool(template={"spec": {
        **nodepool()["spec"]["template"]["spec"],
        "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
    }}))
    await pending(steps, "plain")
    provision, _ = provisioner(steps)

    await provision.provision_once()
    await provision.provision_once()
    [first] = events_about(steps, "Pod", "plain", "FailedScheduling")
    assert "NodePool default" in first["message"] and "dedicated=gpu:NoSchedule" in first["message"], first

    # The taint is gone but the pool's limits forbid any node: a different explanation, emitted without
    # waiting for the period.
    await steps.kube.patch(NODEPOOL, "default", {"spec": {"template": {"spec": {"taints": None}},
                                                          "limits": {"cpu": "1"}}})
    steps.clock.advance(1)
    await provision.provision_once()
    messages = [e["message"] for e in events_about(steps, "Pod", "plain", "FailedScheduling")]
    assert len(messages) == 2 and messages[0] == first["message"] and messages[1] != first["message"], messages
    assert "exceed the NodePool's limits: cpu limit 1" in messages[1]


async def test_a_nominated_pod_is_told_its_nodeclaim_once() -> None:
    steps = Steps()
    await steps.basics()
    await pending(steps, "web")
    provision, _ = provisioner(steps)
    plan = await provision.provision_once()
    claim = plan.nodeclaims[0].name
    lifecycle = NodeClaimLifecycle(provision.ctx, steps.store, on_launch_failed=lambda: None)
    lifecycle.reconcile_all()
    await lifecycle.workers.drain()
    again = await provision.provision_once()  # launched, not registered: the pod fits the claim in flight again
    assert again.existing == {"default/web": claim}
    [event] = events_about(steps, "Pod", "web", "Nominated")
    assert event["message"] == f"Pod should schedule on: nodeclaim/{claim}" and event["count"] == 1


async def blocked_node(steps: Steps) -> tuple[DisruptionController, ControllerContext, str]:
    """An initialized node whose only pod a PDB protects (0 disruptions allowed)."""
    await steps.basics()
    node, _ = await launched_node(steps, "guarded")
    pod = pending_pod({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
                      name="web-0", namespace="default", now=steps.clock.now())
    pod["spec"]["nodeName"] = node
    pod["status"] = running_status(steps.clock.now())
    await create_with_status(steps.kube, pod)
    await steps.kube.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                             "metadata": {"name": "web-pdb", "namespace": "default"},
                             "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    ctx = steps.context()
    return DisruptionController(ctx, steps.store, NameGenerator(lambda name: False, seed=1)), ctx, node


async def test_a_node_blocked_by_a_pdb_gets_one_disruption_blocked_event_on_its_nodeclaim() -> None:
    steps = Steps()
    disruption, ctx, node = await blocked_node(steps)

    for _ in range(3):
        assert await disruption.reconcile_once() is None
        steps.clock.advance(10)

    [event] = events_about(steps, "NodeClaim", "guarded", "DisruptionBlocked")
    assert event["involvedObject"]["apiVersion"] == "karpenter.sh/v1"
    assert event["type"] == "Normal" and event["count"] == 1
    assert event["message"].startswith("PDB: ") and "default/web-pdb" in event["message"], event["message"]
    assert len(events_about(steps, "Node", node, "DisruptionBlocked")) == 1
    assert ctx.events is not None and ctx.events.deduplicated >= 4


async def test_a_changed_disruption_explanation_is_emitted_again() -> None:
    steps = Steps()
    disruption, _, _ = await blocked_node(steps)
    await disruption.reconcile_once()
    await steps.kube.delete(PDB, "web-pdb", "default")
    await steps.kube.patch(POD, "web-0", {"metadata": {"annotations": {wk.DO_NOT_DISRUPT: "true"}}}, "default")
    steps.clock.advance(1)
    await disruption.reconcile_once()

    messages = [e["message"] for e in events_about(steps, "NodeClaim", "guarded", "DisruptionBlocked")]
    assert [m.split(":")[0] for m in messages] == ["PDB", "DoNotDisrupt"], messages


async def test_a_countdown_explanation_is_not_re_emitted_as_it_ticks() -> None:
    steps = Steps()
    await steps.kube.create(nodeclass())
    await steps.kube.create(nodepool(consolidate_after="10m"))
    await launched_node(steps, "young")
    disruption = DisruptionController(steps.context(), steps.store, NameGenerator(lambda name: False, seed=1))
    await disruption.reconcile_once()
    steps.clock.advance(60)
    await disruption.reconcile_once()
    [event] = events_about(steps, "NodeClaim", "young", "DisruptionBlocked")
    assert event["message"].startswith("ConsolidateAfter: consolidateAfter 10m"), event["message"]


async def test_consolidation_reports_launching_and_terminating_on_the_nodeclaims() -> None:
    rig = Rig()
    # Three 1.5-CPU pods need a c5.2xlarge; one left fits a c5.large: consolidation replaces the node.
    await rig.apply(nodeclass(), nodepool(), deployment(replicas=3, cpu="1500m"))
    async with running(rig):
        assert await wait_for(lambda: rig.converged(instances=1))
        [old] = [c["metadata"]["name"] for c in rig.kube.objects(NODECLAIM)]
        await rig.kube.patch(DEPLOYMENT, "inflate", {"spec": {"replicas": 1}}, "default")

        async def replaced() -> bool:
            names = {c["metadata"]["name"] for c in rig.kube.objects(NODECLAIM)}
            return old not in names and await rig.converged(instances=1)

        assert await wait_for(replaced, timeout=60)
    events = [e for e in rig.kube.objects(EVENT) if e["involvedObject"]["kind"] == "NodeClaim"]
    terminating = [e for e in events if e["reason"] == "DisruptionTerminating"]
    launching = [e for e in events if e["reason"] == "DisruptionLaunching"]
    assert [e["involvedObject"]["name"] for e in terminating] == [old]
    assert terminating[0]["message"].startswith("Disrupting NodeClaim: Underutilized")
    [new] = [c["metadata"]["name"] for c in rig.kube.objects(NODECLAIM)]
    assert [(e["involvedObject"]["name"], e["message"]) for e in launching] == [
        (new, "Launching NodeClaim: Underutilized")
    ]
    for event in events:
        assert VALIDATOR.check(event) is None, VALIDATOR.check(event)


async def test_a_node_being_disrupted_is_never_reported_blocked() -> None:
    """A drifted node with a do-not-disrupt pod and a terminationGracePeriod: drift takes it (the grace period
    bounds the drain), and no DisruptionBlocked event says the node it is disrupting is blocked — neither in the
    pass that chose it nor in the passes while its drain waits out the pod."""
    rig = Rig()
    pool = nodepool(consolidate_after="1h")
    pool["spec"]["template"]["spec"]["terminationGracePeriod"] = "5s"  # long enough for many passes mid-drain
    web = deployment(replicas=1, cpu="500m")
    web["spec"]["template"]["metadata"]["annotations"] = {wk.DO_NOT_DISRUPT: "true"}
    await rig.apply(nodeclass(), pool, web)
    async with running(rig):
        assert await wait_for(lambda: rig.converged(instances=1))
        [old] = [c["metadata"]["name"] for c in rig.kube.objects(NODECLAIM)]
        [node] = [n["metadata"]["name"] for n in rig.kube.objects(NODE)]
        await rig.kube.patch(NODEPOOL, "default", {"spec": {"template": {"metadata": {"labels": {"team": "x"}}}}})

        async def replaced() -> bool:
            names = {c["metadata"]["name"] for c in rig.kube.objects(NODECLAIM)}
            return old not in names and await rig.converged(instances=1)

        assert await wait_for(replaced, timeout=60)
    ours = [e for e in rig.kube.objects(EVENT) if e["involvedObject"]["name"] in (old, node)]
    assert [e["message"] for e in ours if e["reason"] == "DisruptionTerminating"] == [
        "Disrupting Node: Drifted/delete", "Disrupting NodeClaim: Drifted/delete"]
    # Events in the order they were written: none says "blocked" once the node is being disrupted.
    first = next(index for index, e in enumerate(ours) if e["reason"] == "DisruptionTerminating")
    blocked = [e["message"] for e in ours[first:] if e["reason"] == "DisruptionBlocked"]
    assert blocked == [], blocked
