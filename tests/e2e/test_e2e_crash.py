"""Kill the real App (HTTP + moto) at seeded writes during provisioning and consolidation; a fresh App converges.

The in-memory version (tests/controllers/test_ctrl_crash.py) covers 24 points
quickly; this one repeats a seeded sample through the real stack: LiveKube over
HTTP, the AWS provider against moto (where a relaunch must adopt the instance a
dead leader launched), Lease leader election with a lease the dead replica
never releases.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from ctrl_cluster import CrashSwitch, is_write, packed
from ctrl_harness import wait_for
from e2e_rig import e2e, e2e_lease

from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.kube.api import DEPLOYMENT

SEED = 7
PROVISIONING_POINTS = 2  # among the first writes (claims, launches, registration)
CONSOLIDATION_POINTS = 2  # counted from the scale-down


def crash_point(call: str) -> bool:
    return is_write(call) and not call.startswith("replace Lease")  # renewals are not interesting places to die


async def _packed(rig: Any) -> bool:
    # Two 1.5-CPU pods cost at least 0.17 $/h (one c5.xlarge, or two c5.large): consolidation is done.
    return await packed(rig.server.kube, rig.observer, 2, 0.17)


def _why(replica: Any, rig: Any) -> str:
    """What a replica that neither converged nor died was doing: its end (if it ended) and its last logs."""
    task = replica.task
    ended = "running" if task is None or not task.done() else repr(task.exception() or task.result())
    return f"replica {ended}; last log lines: {[line.get('message') for line in rig.log_lines()[-15:]]}"


async def _crash_and_recover(aws: OfflineAWS, provisioning_at: int | None, after_scale_down: int | None) -> str:
    async with e2e(aws, replicas=10) as rig:
        switch = CrashSwitch(at=provisioning_at, counts=crash_point)
        first = rig.launch(rig.replica(lease=e2e_lease("first"), switch=switch, seed=1))

        async def up_or_dead() -> bool:
            return switch.dead or await rig.converged(instances=2)

        assert await wait_for(up_or_dead, timeout=120), _why(first, rig)
        scaled = False
        if not switch.dead:
            switch.at = switch.writes + (after_scale_down or 1)
            await rig.server.kube.patch(DEPLOYMENT, "inflate", {"spec": {"replicas": 2}}, "default")
            scaled = True

            async def down_or_dead() -> bool:
                return switch.dead or await _packed(rig)

            assert await wait_for(down_or_dead, timeout=120)
        assert switch.dead, "the crash point was never reached"
        first.task.cancel()  # dead: its lease is never released
        await asyncio.gather(first.task, return_exceptions=True)

        rig.launch(rig.replica(lease=e2e_lease("second"), seed=2))
        if not scaled:
            assert await wait_for(lambda: rig.converged(instances=2), timeout=120), await rig.inventory()
            await rig.server.kube.patch(DEPLOYMENT, "inflate", {"spec": {"replicas": 2}}, "default")
        assert await wait_for(lambda: _packed(rig), timeout=180), (switch.log, await rig.inventory())
        inventory = await rig.inventory()
        assert inventory.instances == inventory.nodeclaims == inventory.nodes
        running = {i["InstanceId"] for i in rig.ec2_instances() if i["State"]["Name"] in ("pending", "running")}
        assert {p.rsplit("/", 1)[1] for p in inventory.instances} == running, switch.log
        return switch.log[0]


async def test_kill_the_app_at_seeded_writes_then_a_fresh_app_converges(aws: OfflineAWS) -> None:
    rng = random.Random(SEED)
    cases = [(at, None) for at in sorted(rng.sample(range(1, 24), PROVISIONING_POINTS))]
    cases += [(None, k) for k in sorted(rng.sample(range(1, 16), CONSOLIDATION_POINTS))]
    died = []
    for index, (at, after) in enumerate(cases):  # one at a time: each is a whole cluster on 2 cores
        died.append(await _crash_and_recover(aws.for_cluster(f"{aws.cluster}-crash-{index}"), at, after))
    assert len(died) == PROVISIONING_POINTS + CONSOLIDATION_POINTS
