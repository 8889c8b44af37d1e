"""Kill the reconciler at seeded points during provisioning and consolidation; a fresh one must converge.

A ``CrashSwitch`` counts every write (KubeAPI and cloud) the first reconciler
makes; right after write N takes effect the instance dies (every later call of
the dead instance fails, its task is cancelled and nothing is cleaned up, like
``kill -9``). The points are a seeded sample of the writes of a crash-free run,
half before the scale-down and half after. A fresh reconciler then starts on the same API server and cloud.
It must converge: every instance has exactly one NodeClaim and one Node (no
leak, no duplicate), no claim or node is stuck deleting, and every pod of the
Deployment exists and runs on an existing node.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from ctrl_cluster import CrashingCloud, CrashingKube, CrashSwitch, packed
from ctrl_harness import Rig, running, wait_for
from ctrl_objects import deployment, nodeclass, nodepool

from reconciler.kube.api import DEPLOYMENT, POD

REPLICAS_UP, REPLICAS_DOWN = 10, 2
SEED = 20260101
POINTS_PER_PHASE = 12


async def _packed(rig: Rig) -> bool:
    # Two 1.5-CPU pods cost at least 0.17 $/h (one c5.xlarge, or two c5.large): consolidation is done.
    return await packed(rig.kube, rig.cloud, REPLICAS_DOWN, 0.17)


async def _scenario(rig: Rig, switch: CrashSwitch | None) -> tuple[bool, int]:
    """Scale up, then down, under a reconciler that may die; returns (scaled down yet?, calls at scale-down)."""
    await rig.apply(nodeclass(), nodepool(), deployment(replicas=REPLICAS_UP, cpu="1500m"))
    kube = CrashingKube(rig.kube, switch) if switch else None
    cloud = CrashingCloud(rig.cloud, switch) if switch else None
    scaled_at = 0
    async with running(rig, kube=kube, cloud=cloud) as reconciler:

        def dead() -> bool:
            return switch is not None and switch.dead

        async def up_or_dead() -> bool:
            return dead() or await rig.converged(instances=2)

        assert await wait_for(up_or_dead, timeout=60)
        if not dead():
            scaled_at = switch.writes if switch else 0
            await rig.kube.patch(DEPLOYMENT, "inflate", {"spec": {"replicas": REPLICAS_DOWN}}, "default")

            async def down_or_dead() -> bool:
                return dead() or await _packed(rig)

            assert await wait_for(down_or_dead, timeout=90)
        _ = reconciler
    return bool(scaled_at), scaled_at


def _crash_points(writes_up: int, writes_total: int) -> list[int]:
    # The last writes of a run vary a little with timing (status and GC passes): stay clear of the end.
    last = writes_up + int((writes_total - writes_up) * 0.85)
    rng = random.Random(SEED)
    up = sorted(rng.sample(range(1, writes_up + 1), min(POINTS_PER_PHASE, writes_up)))
    down = sorted(rng.sample(range(writes_up + 1, last + 1), min(POINTS_PER_PHASE, last - writes_up)))
    return up + down


async def _measure() -> tuple[int, int]:
    switch = CrashSwitch()
    rig = Rig()
    _, scaled_at = await _scenario(rig, switch)
    assert await _packed(rig)
    return scaled_at, switch.writes


@pytest.fixture(scope="module")
def crash_points() -> list[int]:
    writes_up, writes_total = asyncio.run(_measure())
    points = _crash_points(writes_up, writes_total)
    assert len(points) >= 20, (writes_up, writes_total)
    return points


async def _crash_and_recover(at: int, first_of: str = "") -> str:
    """Die after write ``at``, or (``first_of``) right after the first call starting with that text."""
    rig = Rig()
    switch = CrashSwitch(at=at, counts=lambda call: call.startswith(first_of)) if first_of else CrashSwitch(at=at)
    scaled, _ = await _scenario(rig, switch)
    assert switch.dead, f"the reconciler never reached {first_of or 'write'} {at}"
    died_at = switch.log[0]
    async with running(rig, seed=2):
        if not scaled:
            assert await wait_for(lambda: rig.converged(instances=None), timeout=60), await rig.inventory()
            await rig.kube.patch(DEPLOYMENT, "inflate", {"spec": {"replicas": REPLICAS_DOWN}}, "default")
        assert await wait_for(lambda: _packed(rig), timeout=90), (died_at, await rig.inventory())
    inventory = await rig.inventory()
    assert inventory.instances == inventory.nodeclaims == inventory.nodes, died_at
    assert len(rig.kube.objects(POD)) == REPLICAS_DOWN
    return died_at


# The riskiest moments, whatever the seeded sample hits: an instance launched but not recorded, a claim
# created but not launched, a node half registered, a command that tainted or deleted, a drain midway,
# an instance terminated but its claim still held by the finalizer.
NAMED_POINTS = ("create NodeClaim", "cloud create", "patch Node/", "delete NodeClaim", "evict", "cloud delete")


@pytest.mark.slow  # kill and restart loop
async def test_kill_at_seeded_points_then_restart_converges(crash_points: list[int]) -> None:
    died = await asyncio.gather(
        *(_crash_and_recover(at) for at in crash_points),
        *(_crash_and_recover(1, first_of=prefix) for prefix in NAMED_POINTS),
    )
    assert [call.split(" ")[0] for call in died[len(crash_points):]] == [p.split(" ")[0] for p in NAMED_POINTS]
