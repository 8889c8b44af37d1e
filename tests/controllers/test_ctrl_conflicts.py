"""A write that keeps conflicting (409 on every attempt) is retried on the next pass, never fails a loop.

``modify`` gives up after 5 attempts with ``ConflictError``. The loops that used to catch only NotFound
(stale-taint cleanup, a disruption command's start, garbage collection, finalizing a deleted Node) must log
it and try again next pass, as a controller-runtime reconciler requeues on a conflict (issue 16, item 2).
"""

from __future__ import annotations

from types import SimpleNamespace

from ctrl_steps import Steps, launched_node

from reconciler.controllers.disruption.disruption_controller import DisruptionController
from reconciler.controllers.nodeclaim.garbage_collection import GarbageCollector
from reconciler.controllers.nodeclaim.termination_controller import TerminationController
from reconciler.controllers.runtime.context import NameGenerator
from reconciler.kube.api import NODE, ConflictError
from reconciler.lifecycle.orchestration import CommandExecutor
from reconciler.model import labels as wk

DISRUPTED = {"key": wk.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}


def conflicts(steps: Steps, times: int = 50) -> None:
    steps.kube.inject_fault("patch", ConflictError("the object has been modified"), kind=NODE, times=times)


def taints(steps: Steps, node: str) -> list[str]:
    stored = steps.kube.peek(NODE, node) or {}
    return [t["key"] for t in (stored.get("spec") or {}).get("taints") or []]


async def test_stale_taint_cleanup_survives_conflicts_and_succeeds_next_pass() -> None:
    steps = Steps()
    await steps.basics()
    node, _ = await launched_node(steps)
    await steps.kube.patch(NODE, node, {"spec": {"taints": [DISRUPTED]}})
    controller = DisruptionController(steps.context(), steps.store, NameGenerator(lambda _: False, seed=1))
    conflicts(steps)
    assert await controller.clear_stale_taints() == []  # logged, not raised
    assert wk.DISRUPTED_TAINT_KEY in taints(steps, node)
    steps.kube.clear_faults()
    assert await controller.clear_stale_taints() == [node]
    assert wk.DISRUPTED_TAINT_KEY not in taints(steps, node)


async def test_a_command_whose_candidates_cannot_be_tainted_is_aborted_not_raised() -> None:
    steps = Steps()
    await steps.basics()
    node, _ = await launched_node(steps)
    conflicts(steps)
    command = SimpleNamespace(reason="Underutilized", method="single", replacements=[],
                              candidates=[SimpleNamespace(name=node, nodeclaim="default-abcde")])
    flight = await CommandExecutor(steps.kube, steps.cloud).start(command, steps.clock.now())
    assert flight.state == "aborted" and "could not mark the candidates" in flight.message


async def test_finalizing_a_deleted_node_survives_conflicts() -> None:
    steps = Steps()
    await steps.kube.create({"apiVersion": "v1", "kind": "Node",
                             "metadata": {"name": "orphan-node", "finalizers": [wk.TERMINATION_FINALIZER]},
                             "spec": {}})
    await steps.kube.delete(NODE, "orphan-node")
    termination = TerminationController(steps.context(), steps.store)
    conflicts(steps)
    assert await termination.reconcile_all()  # still busy, and no exception out of the loop
    assert steps.kube.peek(NODE, "orphan-node") is not None
    steps.kube.clear_faults()
    await termination.reconcile_all()
    assert steps.kube.peek(NODE, "orphan-node") is not None, "backing off: not tried again at once"
    steps.clock.advance(1.3)  # the first backoff step: 1 s (+ up to 20 % jitter)
    await termination.reconcile_all()
    assert steps.kube.peek(NODE, "orphan-node") is None


async def test_garbage_collection_survives_conflicts_on_an_orphans_node() -> None:
    steps = Steps()
    await steps.basics()
    from reconciler.cloud.types import LaunchRequest

    orphan = await steps.cloud.create(LaunchRequest(nodeclaim="lost", nodepool="default", nodeclass="default",
                                                    instance_types=["c5.large"]), None)
    await steps.kube.create({"apiVersion": "v1", "kind": "Node",
                             "metadata": {"name": "lost-node", "finalizers": [wk.TERMINATION_FINALIZER]},
                             "spec": {"providerID": orphan.provider_id}})
    collector = GarbageCollector(steps.context(gc_min_age=0.0), steps.store)
    conflicts(steps)
    result = await collector.collect_once()  # logged, not raised
    assert result.instances == [orphan.provider_id] and result.nodes == []
    held = steps.kube.peek(NODE, "lost-node") or {}
    assert held["metadata"].get("deletionTimestamp"), "deleted, still held by our finalizer"
    steps.kube.clear_faults()
    await TerminationController(steps.context(), steps.store).reconcile_all()  # the next pass finalizes it
    assert steps.kube.peek(NODE, "lost-node") is None
