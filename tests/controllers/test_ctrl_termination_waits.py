"""The live termination finalizer waits for the instance to be gone, looking again every few seconds."""

from __future__ import annotations

from datetime import timedelta

from ctrl_steps import Steps, launched_node

from reconciler.controllers.nodeclaim.termination_controller import TerminationController
from reconciler.kube.api import NODECLAIM


async def test_the_finalizer_stays_while_the_instance_shuts_down_and_the_duration_is_measured() -> None:
    steps = Steps()
    await steps.basics()
    steps.cloud.shutdown = timedelta(seconds=40)
    _, provider_id = await launched_node(steps)
    await steps.kube.delete(NODECLAIM, "default-abcde")
    termination = TerminationController(steps.context(min_drain_time=0.0, instance_termination_poll=5.0),
                                        steps.store)

    async def one_pass() -> None:
        await termination.reconcile_all()
        await termination.workers.drain()

    await one_pass()
    assert steps.kube.objects(NODECLAIM)  # terminate asked for; the instance is still shutting down
    state = steps.store.snapshot()  # the pool's usage still counts the claim (status.nodes, limits)
    assert state.nodepool_node_counts() == {"default": 1} and state.nodepool_usage("default").amount("cpu") > 0
    assert (await steps.cloud.get(provider_id)).state == "shutting-down"
    calls = steps.cloud.calls.count(("delete", provider_id))
    await one_pass()  # within the 5 s poll: not looked at again
    assert steps.cloud.calls.count(("delete", provider_id)) == calls
    steps.clock.advance(20)
    await one_pass()
    assert steps.kube.objects(NODECLAIM) and steps.cloud.calls.count(("delete", provider_id)) == calls + 1
    steps.clock.advance(20)
    await one_pass()
    assert steps.kube.objects(NODECLAIM) == [] and await steps.cloud.list() == []
    histogram = "karpenter_nodeclaims_instance_termination_duration_seconds"
    assert steps.metrics.sample(f"{histogram}_count", {"nodepool": "default"}) == 1
    assert steps.metrics.sample(f"{histogram}_sum", {"nodepool": "default"}) == 40.0
