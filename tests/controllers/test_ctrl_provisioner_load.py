"""A provisioning pass is gentle on the API server (issue 16, item 6), as Karpenter's is.

Its NodeClaims are created concurrently (bounded), and the pods are told where they will run with Nominated
events that share one token bucket (5 per second, bursts of 10) and go out at most once per pod per period.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ctrl_objects import deployment
from ctrl_steps import Steps

from reconciler.controllers.provisioning.provisioning_controller import (
    CREATE_CONCURRENCY,
    NOMINATION_BURST,
    NOMINATION_QPS,
    Provisioner,
)
from reconciler.controllers.runtime.context import NameGenerator
from reconciler.kube.api import NODECLAIM
from reconciler.sim.workloads import create_with_status, pending_pod


async def pending(steps: Steps, count: int, cpu: str, memory: str = "1Gi") -> None:
    template = deployment(cpu=cpu, memory=memory)["spec"]["template"]
    for index in range(count):
        await create_with_status(steps.kube, pending_pod(template, name=f"web-{index}", namespace="default",
                                                         now=steps.clock.now()))


def nominated(steps: Steps) -> list[dict[str, Any]]:
    return steps.events("Nominated")


async def test_the_nodeclaims_of_a_pass_are_created_concurrently_and_bounded() -> None:
    steps = Steps()
    await steps.basics()
    await pending(steps, 24, cpu="7")  # one c5.2xlarge each: 24 NodeClaims in one pass
    in_flight, most = 0, 0
    create = steps.kube.create

    async def slow_create(manifest: dict[str, Any]) -> Any:
        nonlocal in_flight, most
        if manifest.get("kind") != "NodeClaim":
            return await create(manifest)
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.01)  # an API server round trip
        try:
            return await create(manifest)
        finally:
            in_flight -= 1

    steps.kube.create = slow_create  # type: ignore[method-assign]
    provisioner = Provisioner(steps.context(), steps.store, NameGenerator(lambda _: False, seed=3))
    result = await provisioner.provision_once()
    assert len(result.nodeclaims) == 24 and len(steps.kube.objects(NODECLAIM)) == 24
    assert most == CREATE_CONCURRENCY, "created side by side, never more than the bound at once"


async def test_nominated_events_share_one_token_bucket_and_go_out_once_per_pod() -> None:
    steps = Steps()
    await steps.basics()
    await pending(steps, 20, cpu="100m", memory="100Mi")  # 20 pods, one NodeClaim
    provisioner = Provisioner(steps.context(), steps.store, NameGenerator(lambda _: False, seed=3))

    await provisioner.provision_once()
    assert len(steps.kube.objects(NODECLAIM)) == 1
    assert len(nominated(steps)) == NOMINATION_BURST == 10, "a burst of 10, the other 10 dropped"
    [claim] = steps.kube.objects(NODECLAIM)
    target = f"Pod should schedule on: nodeclaim/{claim['metadata']['name']}"
    assert {e["message"] for e in nominated(steps)} == {target}

    steps.clock.advance(1)  # one second: 5 more tokens
    await provisioner.provision_once()  # the pods still pend, now nominated to the in-flight claim
    events = nominated(steps)
    assert len(events) == NOMINATION_BURST + NOMINATION_QPS == 15
    pods = [e["involvedObject"]["name"] for e in events]
    assert len(set(pods)) == len(pods), "a pod already told where it goes is not told again within the period"
    assert all(e["count"] == 1 for e in events)


