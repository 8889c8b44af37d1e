"""Replacing an interrupted node: one replacement for its pods, whatever order the controllers run in.

The controllers run step by step on a manual clock (``ctrl_steps``), the test
playing the ReplicaSet controller, so each test fixes one interleaving of the
interruption (NodeClaim deleted), the drain (termination controller), the
ReplicaSet recreating the evicted pods and the provisioner's passes.
"""

from __future__ import annotations

from typing import Any

from ctrl_objects import deployment
from ctrl_steps import Steps, launched_node, nodeclaim_manifest

from reconciler.controllers.nodeclaim.lifecycle_controller import NodeClaimLifecycle
from reconciler.controllers.nodeclaim.termination_controller import TerminationController
from reconciler.controllers.provisioning.provisioning_controller import Provisioner
from reconciler.controllers.runtime.context import ControllerContext, NameGenerator
from reconciler.kube.api import NODECLAIM, POD
from reconciler.model import labels as wk
from reconciler.sim.workloads import create_with_status, pending_pod, running_status

WORKLOAD = deployment("web", replicas=3, cpu="1500m")
BIG = [
    {"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["c5.2xlarge"]},
    {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
]


class Interruption:
    """A c5.2xlarge running three 1.5-CPU pods of one Deployment, and the controllers that replace it."""

    def __init__(self, steps: Steps) -> None:
        self.steps = steps
        self.ctx: ControllerContext = steps.context()
        self.provisioner = Provisioner(self.ctx, steps.store, NameGenerator(lambda name: False, seed=5))
        self.termination = TerminationController(self.ctx, steps.store)
        self.lifecycle = NodeClaimLifecycle(self.ctx, steps.store, on_launch_failed=lambda: None)
        self.created = 0

    @classmethod
    async def start(cls, steps: Steps) -> Interruption:
        await steps.basics()
        node, _ = await launched_node(steps, "interrupted", requirements=BIG, resources={"requests": {"cpu": "4500m"}})
        for index in range(3):
            pod = pending_pod(WORKLOAD["spec"]["template"], name=f"web-{index}", namespace="default",
                              now=steps.clock.now(), owner=WORKLOAD)
            pod["spec"]["nodeName"] = node
            pod["status"] = running_status(steps.clock.now())
            await create_with_status(steps.kube, pod)
        return cls(steps)

    async def recreate_evicted(self, limit: int | None = None) -> int:
        """The ReplicaSet: new pending pods for missing replicas (at most ``limit`` this time)."""
        missing = 3 - len(self.steps.kube.objects(POD))
        count = missing if limit is None else min(limit, missing)
        for _ in range(count):
            pod = pending_pod(WORKLOAD["spec"]["template"], name=f"web-new-{self.created}", namespace="default",
                              now=self.steps.clock.now(), owner=WORKLOAD)
            self.created += 1
            await create_with_status(self.steps.kube, pod)
        return count

    async def drain(self) -> None:
        await self.termination.reconcile_all()
        await self.termination.workers.drain()

    async def launch(self) -> None:
        self.lifecycle.reconcile_all()
        await self.lifecycle.workers.drain()

    def replacements(self) -> list[dict[str, Any]]:
        return [c for c in self.steps.kube.objects(NODECLAIM) if c["metadata"]["name"] != "interrupted"]


async def test_a_drain_that_runs_before_the_provisioner_still_gets_one_replacement_for_all_pods() -> None:
    steps = Steps()
    run = await Interruption.start(steps)
    await steps.kube.delete(NODECLAIM, "interrupted")  # the interruption controller's action

    # The bad order: the drain gets its turn before the provisioner's batch closes, and the
    # provisioner's pass then sees the ReplicaSet's replacements only partly.
    await run.drain()
    await run.recreate_evicted(limit=1)
    first = await run.provisioner.provision_once()
    await run.drain()
    await run.recreate_evicted(limit=2)
    await run.launch()
    second = await run.provisioner.provision_once()  # pods pending again while the replacement is in flight
    await run.drain()
    await run.recreate_evicted()
    await run.launch()
    third = await run.provisioner.provision_once()

    replacements = run.replacements()
    assert len(replacements) == 1, [c["spec"]["resources"] for c in replacements]
    assert replacements[0]["spec"]["resources"]["requests"]["cpu"] == "4500m"  # sized for all three pods
    assert sorted(first.nodeclaims[0].pods) == ["default/web-0", "default/web-1", "default/web-2"]
    assert not second.nodeclaims and not third.nodeclaims
    assert sorted(third.existing) == ["default/web-new-0", "default/web-new-1", "default/web-new-2"]
    assert set(third.existing.values()) == {replacements[0]["metadata"]["name"]}
    steps.clock.advance(1)  # the drain's minimum duration
    await run.drain()
    assert "interrupted" not in {c["metadata"]["name"] for c in steps.kube.objects(NODECLAIM)}  # drained and gone


async def test_the_drain_waits_for_the_provisioner_at_most_drain_hold() -> None:
    steps = Steps()
    run = await Interruption.start(steps)
    await steps.kube.delete(NODECLAIM, "interrupted")
    await run.drain()
    assert len(steps.kube.objects(POD)) == 3  # held: no provisioning pass has seen the claim deleting
    steps.clock.advance(run.ctx.timings.drain_hold)
    await run.drain()
    assert steps.kube.objects(POD) == []  # the provisioner never came: the drain goes ahead anyway


async def test_a_deleted_claim_without_a_node_is_not_held() -> None:
    steps = Steps()
    await steps.basics()
    run = Interruption(steps)
    await steps.kube.create(nodeclaim_manifest("unlaunched"))
    await run.launch()
    await steps.kube.delete(NODECLAIM, "unlaunched")
    await run.drain()
    await run.drain()
    assert steps.kube.objects(NODECLAIM) == [] and await steps.cloud.list() == []


async def test_a_created_claim_counts_for_the_next_pass_before_its_watch_events_arrive() -> None:
    steps = Steps()
    await steps.basics()
    steps.lagging.add("NodeClaim")  # the NodeClaim watch is slow: only our own writes are in the cache
    run = Interruption(steps)
    for index in range(3):
        await create_with_status(steps.kube, pending_pod(WORKLOAD["spec"]["template"], name=f"web-{index}",
                                                         namespace="default", now=steps.clock.now(), owner=WORKLOAD))
    first = await run.provisioner.provision_once()
    await run.launch()
    second = await run.provisioner.provision_once()
    steps.deliver_lagging()  # the late (and by now stale) ADDED/MODIFIED events change nothing
    third = await run.provisioner.provision_once()

    assert len(first.nodeclaims) == 1 and len(steps.kube.objects(NODECLAIM)) == 1
    claim = first.nodeclaims[0].name
    assert not second.nodeclaims and set(second.existing.values()) == {claim}
    assert not third.nodeclaims and set(third.existing.values()) == {claim}
