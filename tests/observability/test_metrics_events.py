"""Metrics whose event the end-to-end test does not cause, each driven through the code path that counts it.

``karpenter_reference.ELSEWHERE`` maps each such metric to its test here (or in the AWS / interruption
tests); the end-to-end test accepts no sample only for those.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from ctrl_objects import nodeclass, nodepool
from ctrl_steps import Steps, bound_pod, launched_node
from karpenter_reference import ELSEWHERE

from reconciler.cloud.types import InsufficientCapacityError
from reconciler.controllers.disruption.disruption_controller import DisruptionController
from reconciler.controllers.exporters.metered_clients import MeteredCloud
from reconciler.controllers.exporters.state_metrics import StateMetrics
from reconciler.controllers.nodeclaim.lifecycle_controller import NodeClaimLifecycle
from reconciler.controllers.operator.manager import Reconciler
from reconciler.controllers.pools_and_classes.hash_stamper import HashStamper
from reconciler.controllers.provisioning import provisioning_controller as provisioner_module
from reconciler.controllers.provisioning.provisioning_controller import Provisioner
from reconciler.controllers.runtime.context import CURRENT_CONTROLLER, NameGenerator
from reconciler.kube.api import EC2NODECLASS, NODE, NODECLAIM, NODEPOOL
from reconciler.model.meta import format_time
from reconciler.sim.workloads import create_with_status

REPO = Path(__file__).resolve().parents[2]


def samples(steps: Steps, family: str) -> list[Any]:
    return [s for f in steps.metrics.registry.collect() if f.name == family for s in f.samples]


def test_every_metric_left_to_another_test_names_a_test_that_exists() -> None:
    for metric, where in ELSEWHERE.items():
        path, _, name = where.partition("::")
        assert (REPO / path).is_file(), (metric, where)
        assert f"def {name}(" in (REPO / path).read_text(), (metric, where)


async def test_a_command_that_fails_validation_is_counted_by_consolidation_type() -> None:
    steps = Steps()
    await steps.basics()
    for name in ("default-aaaaa", "default-bbbbb"):
        await launched_node(steps, name)
    controller = DisruptionController(steps.context(), steps.store, NameGenerator(lambda _: False, seed=1))
    decision = await controller._decide()
    assert decision is not None and decision.command is not None and decision.command.method == "emptiness"
    for candidate in decision.command.candidates:  # no longer empty when validation looks again
        await bound_pod(steps, f"late-{candidate.name}", candidate.name, {"app": "late"})
    assert await controller.execute(decision.command) is None
    assert steps.metrics.sample("karpenter_voluntary_disruption_failed_validations_total",
                                {"consolidation_type": "empty"}) == len(decision.command.candidates)


async def test_a_replacement_that_cannot_launch_counts_a_queue_failure() -> None:
    steps = Steps()
    await steps.basics()
    node, _ = await launched_node(steps)
    await bound_pod(steps, "web-0", node, {"app": "web"})
    assert await HashStamper(steps.context(), steps.store).reconcile_once() == ["default-abcde"]  # unstamped claim
    # The NodePool's template changes: the node drifts and needs a replacement for its pod...
    await steps.kube.patch(NODEPOOL, "default", {"spec": {"template": {"metadata": {"labels": {"team": "a"}}}}})
    controller = DisruptionController(steps.context(), steps.store, NameGenerator(lambda _: False, seed=1))
    decision = await controller._decide()
    assert decision is not None and decision.command is not None and decision.command.replacements
    for instance_type in steps.cloud.catalog():  # ...which the cloud has no capacity for
        steps.cloud.mark_unavailable(instance_type.name, None, None)
    flight = await controller.execute(decision.command)
    assert flight is not None and flight.state == "aborted"
    assert steps.metrics.sample("karpenter_voluntary_disruption_queue_failures_total", {
        "decision": "replace", "reason": "drifted", "consolidation_type": "replace"}) == 1


async def test_balanced_consolidation_moves_are_scored() -> None:
    steps = Steps()
    await steps.kube.create(nodeclass())
    pool = nodepool()
    pool["spec"]["disruption"]["consolidationPolicy"] = "Balanced"
    await steps.kube.create(pool)
    nodes = [(await launched_node(steps, name))[0] for name in ("default-aaaaa", "default-bbbbb")]
    for index, node in enumerate(nodes):
        await bound_pod(steps, f"web-{index}", node, {"app": "web"})
    controller = DisruptionController(steps.context(), steps.store, NameGenerator(lambda _: False, seed=1))
    decision = await controller._decide()
    assert decision is not None and decision.moves
    scored = [s for s in samples(steps, "karpenter_consolidation_score") if s.name.endswith("_count")]
    assert scored and all(s.labels["policy"] == "Balanced" and s.labels["nodepool"] == "default" for s in scored)
    moves = samples(steps, "karpenter_consolidation_moves")
    assert {s.labels["decision"] for s in moves} <= {"approved", "rejected"} and sum(s.value for s in moves) >= 1


async def test_a_nodeclaim_without_a_known_price_is_a_cost_tracking_error_once() -> None:
    steps = Steps()
    await steps.basics()
    await launched_node(steps)
    metrics = StateMetrics(steps.context(), steps.store)
    state = steps.store.snapshot()
    metrics.export_cost(state, {"default": []})  # the catalogue no longer offers its type
    metrics.export_cost(state, {"default": []})
    assert steps.metrics.sample("karpenter_nodepools_cost_tracker_errors_total", {"nodepool": "default"}) == 1
    assert steps.metrics.sample("karpenter_nodepools_cost_total", {"nodepool": "default"}) == 0


async def test_a_scheduling_simulation_in_progress_reports_its_unfinished_work(
        monkeypatch: pytest.MonkeyPatch) -> None:
    steps = Steps()
    await steps.basics()
    await create_with_status(steps.kube, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending"}})
    started, release = threading.Event(), threading.Event()
    real_plan = provisioner_module.plan

    def slow_plan(*args: Any, **kwargs: Any) -> Any:
        started.set()
        release.wait(5)
        return real_plan(*args, **kwargs)

    monkeypatch.setattr(provisioner_module, "plan", slow_plan)
    provisioner = Provisioner(steps.context(), steps.store, NameGenerator(lambda _: False, seed=1))
    running = asyncio.create_task(provisioner.provision_once())
    await asyncio.to_thread(started.wait, 5)
    unfinished = samples(steps, "karpenter_scheduler_unfinished_work_seconds")
    assert [s.labels["controller"] for s in unfinished] == ["provisioner"] and unfinished[0].labels["scheduling_id"]
    release.set()
    await running
    assert samples(steps, "karpenter_scheduler_unfinished_work_seconds") == []  # gone once observed


async def test_cloud_provider_errors_are_counted_by_controller_method_and_error_type() -> None:
    steps = Steps()
    await steps.basics()
    for instance_type in steps.cloud.catalog():
        steps.cloud.mark_unavailable(instance_type.name, None, None)
    ctx = steps.context()
    ctx.cloud = MeteredCloud(steps.cloud, steps.metrics)
    await steps.kube.create({**_claim_manifest()})
    lifecycle = NodeClaimLifecycle(ctx, steps.store, on_launch_failed=lambda: None)
    CURRENT_CONTROLLER.set("nodeclaim.lifecycle")
    lifecycle.reconcile_all()
    await lifecycle.workers.drain()
    labels = {"controller": "nodeclaim.lifecycle", "method": "Create", "provider": "simulated"}
    assert steps.metrics.sample("karpenter_cloudprovider_errors_total",
                                {**labels, "error": "InsufficientCapacityError"}) == 1
    assert steps.metrics.sample("karpenter_cloudprovider_duration_seconds_count", labels) == 1
    assert steps.metrics.sample("karpenter_nodeclaims_disrupted_total", {
        "reason": "insufficient_capacity", "nodepool": "default", "capacity_type": ""}) == 1


def _claim_manifest() -> dict[str, Any]:
    from ctrl_steps import nodeclaim_manifest

    return nodeclaim_manifest()


async def test_a_failing_controller_pass_counts_a_reconcile_error_and_a_panic() -> None:
    steps = Steps()
    await steps.basics()

    async def broken_list() -> list[Any]:
        raise InsufficientCapacityError("the cloud API is down")

    steps.cloud.list = broken_list
    reconciler = Reconciler(steps.context())
    with pytest.raises(TimeoutError):  # the supervisor keeps restarting the loop
        await asyncio.wait_for(reconciler._supervise("nodeclaim.garbagecollection", reconciler.garbage.run), 0.3)
    labels = {"controller": "nodeclaim.garbagecollection"}
    assert steps.metrics.sample("controller_runtime_reconcile_errors_total", labels) == 1
    assert steps.metrics.sample("controller_runtime_reconcile_total", {**labels, "result": "error"}) == 1
    assert steps.metrics.sample("controller_runtime_reconcile_panics_total", labels) == 1
    assert steps.metrics.sample("controller_runtime_max_concurrent_reconciles", labels) == 1


@pytest.fixture
def watched() -> Iterator[tuple[Steps, StateMetrics]]:
    steps = Steps()
    yield steps, StateMetrics(steps.context(), steps.store)


async def test_objects_deleted_with_finalizers_report_termination_time_and_duration(
        watched: tuple[Steps, StateMetrics]) -> None:
    steps, metrics = watched
    finalizer = {"finalizers": ["example.com/hold"]}
    pool, klass = nodepool(), nodeclass()
    pool["metadata"].update(finalizer)
    klass["metadata"].update(finalizer)
    await steps.kube.create(pool)
    await steps.kube.create(klass)
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n-1", "labels": {"karpenter.sh/nodepool": "default"}, **finalizer}}
    await steps.kube.create(node)
    claim = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
             "metadata": {"name": "default-abcde", "labels": {"karpenter.sh/nodepool": "default"}, **finalizer},
             "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                      "requirements": []}}
    await steps.kube.create(claim)
    held = ((NODEPOOL, "default"), (EC2NODECLASS, "default"), (NODE, "n-1"), (NODECLAIM, "default-abcde"))
    for kind, name in held:
        await steps.kube.delete(kind, name)
    steps.clock.advance(30)
    await metrics.refresh()
    # NodeClaims too: in the end-to-end run a NodeClaim's termination can pass between two scrapes.
    for kind in ("nodepool", "ec2nodeclass", "node", "nodeclaim"):
        current = samples(steps, f"operator_{kind}_termination_current_time_seconds")
        assert [s.value for s in current] == [30.0], kind
    for kind, name in held:
        await steps.kube.patch(kind, name, {"metadata": {"finalizers": []}})
    for kind in ("nodepool", "ec2nodeclass", "node"):
        observed = {s.name.rpartition("_")[2]: s.value
                    for s in samples(steps, f"operator_{kind}_termination_duration_seconds") if "le" not in s.labels}
        assert observed == {"count": 1, "sum": 30.0}, kind


async def test_condition_transitions_report_how_long_the_previous_status_lasted(
        watched: tuple[Steps, StateMetrics]) -> None:
    steps, _ = watched
    start = steps.clock.now()

    def ready(status: str, after: float) -> dict[str, Any]:
        return {"conditions": [{"type": "Ready", "status": status, "reason": "Checked",
                                "lastTransitionTime": format_time(start + timedelta(seconds=after))}]}

    await create_with_status(steps.kube, {**nodeclass(), "status": ready("False", 0)})
    await steps.kube.patch(EC2NODECLASS, "default", {"status": ready("True", 45)}, subresource="status")
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n-1"}, "status": ready("True", 0)}
    await create_with_status(steps.kube, node)
    await steps.kube.patch(NODE, "n-1", {"status": ready("False", 600)}, subresource="status")
    assert steps.metrics.sample("operator_ec2nodeclass_status_condition_transition_seconds_sum",
                                {"type": "Ready", "status": "False"}) == 45
    node_labels = {"type": "Ready", "status": "True", "karpenter_k8s_aws_ec2nodeclass": "",
                   "karpenter_sh_nodepool": "", "karpenter_sh_initialized": ""}
    assert steps.metrics.sample("operator_node_status_condition_transition_seconds_sum", node_labels) == 600
    assert steps.metrics.sample("operator_node_status_condition_transitions_total",
                                {**node_labels, "status": "False", "reason": "Checked"}) == 1



async def test_a_pending_pod_reports_how_long_it_waits_for_a_provisioning_decision() -> None:
    """The gauge lives only between the provisioner first seeing a pod and deciding about it (one batch window):
    too short for the end-to-end test's half-second scrapes to be sure of it, so it is checked here."""
    steps = Steps()
    await steps.basics()
    ctx = steps.context()
    provisioner = Provisioner(ctx, steps.store, NameGenerator(lambda _: False, seed=1))
    metrics = StateMetrics(ctx, steps.store)
    provisioner.on_decided = metrics.pods_decided
    await create_with_status(steps.kube, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    })
    steps.clock.advance(3)
    await metrics.refresh(force=True)
    gauge = "karpenter_pods_provisioning_scheduling_undecided_time_seconds"
    assert steps.metrics.sample(gauge, {"name": "web-0", "namespace": "default"}) == 3
    await provisioner.provision_once()
    assert not samples(steps, gauge), "decided: the series is gone"
