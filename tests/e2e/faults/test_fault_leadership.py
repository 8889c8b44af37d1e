"""A leader whose wall clock steps back while its Lease calls hang stops acting before the standby takes over.

The live audit (issue 24): the elector and the leadership gate ran on the wall clock; with the leader's clock
stepped back 30 s and its Lease calls stalled, the standby took the Lease at 40.6 s and the old leader made
232 writes and 2 AWS calls until 63.4 s. client-go measures the renew deadline on a monotonic clock.

Replicas ``a`` and ``b`` each run behind their own ``FaultProxy`` (which records every request they send) with
the AWS spot-price refresh running; ``a``'s refresh is one endless pagination, so a boto3 call is running in
``a``'s thread pool when its leadership ends. Once ``a`` leads, its proxy holds every Lease request, its wall
clock steps back 30 s and new pods arrive, so ``a`` has work to do. No overlap means every write ``a`` got
through its proxy and every AWS request ``a`` sent came before ``b``'s first write (taking the Lease).
"""

from __future__ import annotations

import asyncio
import time

from ctrl_harness import wait_for
from ctrl_objects import deployment
from e2e_rig import e2e_lease, e2e_nodepool
from fault_rig import ApiServer, SteppedClock, fault_rig
from support.fault_proxy import LEASES
from test_e2e_leader_overlap import AwsRequests, spot_refresh

from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.kube.api import DEPLOYMENT, LEASE
from reconciler.kube.leader import LeaderElectionConfig

CLOCK_STEP = -30.0


async def holder(server: ApiServer) -> str:
    try:
        found = await server.admin.get(LEASE, server.lease_name, server.lease_namespace)
    except Exception:
        return ""
    return str((found.get("spec") or {}).get("holderIdentity") or "")


async def test_a_leader_whose_clock_steps_back_stops_before_the_standby_acquires(
    apiserver: ApiServer, aws: OfflineAWS
) -> None:
    config: dict[str, LeaderElectionConfig] = {name: apiserver.lease(e2e_lease(name)) for name in ("a", "b")}
    async with fault_rig(apiserver, aws) as rig:
        await rig.seed(aws.nodeclass(), e2e_nodepool(), deployment(replicas=2, cpu="1500m"))
        clock = SteppedClock()
        a = await rig.replica("a", lease=config["a"], clock=clock, extra_loops=spot_refresh)
        b = await rig.replica("b", lease=config["b"], extra_loops=spot_refresh)
        aws_requests = AwsRequests()
        aws_requests.watch("a", a.cloud)
        aws_requests.watch("b", b.cloud)
        aws_requests.endless.add("a")
        rig.launch(a)
        assert await wait_for(lambda: _is(holder(rig.server), "a"), timeout=30)
        assert await wait_for(lambda: _true(len(aws_requests.of("a", "DescribeSpotPriceHistory")) >= 2), timeout=30)
        rig.launch(b)
        await asyncio.sleep(1.0)
        assert await holder(rig.server) == "a" and aws_requests.of("b") == [], "b is a standby"

        cut = time.monotonic()
        a.proxy.stall(LEASES)
        clock.step(CLOCK_STEP)
        await rig.server.admin.patch(DEPLOYMENT, "inflate", {"spec": {"replicas": 8}}, rig.server.namespace)
        assert await wait_for(lambda: _is(holder(rig.server), "b"), timeout=90), "b takes the expired lease"
        assert await wait_for(lambda: _true(a.task is not None and a.task.done()), timeout=90)
        await asyncio.sleep(3.0)  # anything a still sent would be recorded by now
        assert a.task is not None and a.task.result() == 1, "a lost its leadership and exited with 1"

    a_writes = [r.at for r in a.proxy.writes(since=cut)]
    a_aws = [at for at in aws_requests.of("a") if at >= cut]
    b_events = [r.at for r in b.proxy.writes()] + aws_requests.of("b")
    assert b_events, "b wrote (its lease first) and called AWS once leading"
    b_first = min(b_events)
    late_writes = [at for at in a_writes if at >= b_first]
    late_aws = [at for at in a_aws if at >= b_first]
    a_last = max(a_writes + a_aws)
    print(f"clock stepped {CLOCK_STEP:g} s + Lease stalled at t=0: b acquired at {b_first - cut:.1f} s; "
          f"a's last write/AWS call at {a_last - cut:.1f} s; a's writes after b's first: {len(late_writes)}, "
          f"AWS calls after: {len(late_aws)}; a's writes after the cut: {len(a_writes)}, AWS calls: {len(a_aws)}")
    assert a_aws, "a's pagination was running after the cut (the gate, not luck, must stop it)"
    assert not late_writes and not late_aws, (
        f"a acted after b took over: {len(late_writes)} writes, {len(late_aws)} AWS calls, "
        f"until {a_last - b_first:.1f} s after b's first action")


async def _is(value: object, expected: str) -> bool:
    return await value == expected  # type: ignore[misc]


async def _true(value: object) -> bool:
    return bool(value)
