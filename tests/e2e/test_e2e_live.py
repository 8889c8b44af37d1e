"""End to end over HTTP and moto: provisioning, consolidation, leader failover.

The reconciler is the real ``App`` (leader election, controllers, observability
server) with the real ``LiveKube`` client against the fake API server (every
object it writes is schema-checked there) and the real AWS provider against
moto. Nothing in ``reconciler/`` knows it is a test.
"""

from __future__ import annotations

import asyncio
import urllib.request

from ctrl_cluster import CrashSwitch, packed
from ctrl_harness import wait_for
from e2e_rig import e2e

from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.kube.api import DEPLOYMENT, LEASE, NODECLAIM, POD
from reconciler.kube.leader import LeaderElectionConfig

WORKSHOP_SEQUENCE = [
    "found provisionable pod(s)",
    "computed new nodeclaim(s) to fit pod(s)",
    "created nodeclaim",
    "launched nodeclaim",
    "registered nodeclaim",
    "initialized nodeclaim",
]


def short_lease(identity: str) -> LeaderElectionConfig:
    # Short enough that a dead leader's lease expires within a test, long enough that a replica sharing one
    # GIL with moto and the fake API server on a loaded 2-core CI machine does not miss its renew deadline
    # (a missed deadline exits the replica, as it should; tests/kube/test_kube_leader.py covers that).
    return LeaderElectionConfig(namespace="kube-system", name="adze-leader-election", identity=identity,
                                lease_duration=6.0, renew_deadline=4.0, retry_period=0.25)


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read().decode()


async def test_deployment_scale_up_then_down_over_http_and_moto(aws: OfflineAWS) -> None:
    async with e2e(aws, replicas=10) as rig:
        replica = rig.launch(rig.replica(lease=short_lease("a"), serve=True))
        assert await wait_for(lambda: rig.converged(instances=2), timeout=40), await rig.inventory()
        pods = rig.server.kube.objects(POD)
        assert len(pods) == 10 and all(p["spec"].get("nodeName") for p in pods)
        messages = [line["message"] for line in rig.log_lines()]
        positions = [messages.index(step) for step in WORKSHOP_SEQUENCE]
        assert positions == sorted(positions)
        launched = next(line for line in rig.log_lines() if line["message"] == "launched nodeclaim")
        assert launched["provider-id"].startswith("aws:///us-east-1") and launched["instance-type"].startswith("c5.")

        server = replica.app.server
        assert server is not None
        status, body = await asyncio.to_thread(_get, f"http://127.0.0.1:{server.health_port}/healthz")
        assert status == 200
        status, body = await asyncio.to_thread(_get, f"http://127.0.0.1:{server.metrics_port}/metrics")
        assert 'karpenter_nodeclaims_created_total{nodepool="default",reason="provisioned"} 2.0' in body
        lease = rig.server.kube.peek(LEASE, "adze-leader-election", "kube-system")
        assert lease is not None and lease["spec"]["holderIdentity"] == "a"

        first = {i["InstanceId"] for i in rig.ec2_instances()}
        await rig.server.kube.patch(DEPLOYMENT, "inflate", {"spec": {"replicas": 2}}, "default")

        # 0.17 $/h is the cheapest home for two 1.5-CPU pods (a c5.xlarge or two c5.large): whatever the
        # c5.2xlarge they run on, they must move.
        assert await wait_for(lambda: packed(rig.server.kube, rig.observer, 2, 0.17), timeout=40), \
            await rig.inventory()
        evictions = [r for r in rig.server.requests if r.method == "POST" and r.path.endswith("/eviction")]
        assert evictions, "consolidation must move pods through the Eviction API"
        states = {i["InstanceId"]: i["State"]["Name"] for i in rig.ec2_instances()}
        assert all(states[i] in ("shutting-down", "terminated") for i in first)
        running = {i for i, state in states.items() if state == "running"}
        assert {p.rsplit("/", 1)[1] for p in (await rig.inventory()).instances} == running

        replica.task.cancel()  # graceful shutdown: the lease is released for the standby
        await asyncio.gather(replica.task, return_exceptions=True)
        lease = rig.server.kube.peek(LEASE, "adze-leader-election", "kube-system")
        assert not lease["spec"].get("holderIdentity")


async def test_leader_killed_right_after_launching_is_replaced_without_leaks_or_duplicates(aws: OfflineAWS) -> None:
    async with e2e(aws, replicas=5) as rig:
        # The leader dies right after its first CreateFleet took effect, before the NodeClaim recorded it.
        switch = CrashSwitch(at=1, counts=lambda call: call.startswith("cloud create"))
        leader = rig.launch(rig.replica(lease=short_lease("leader"), switch=switch, seed=1))
        assert await wait_for(lambda: _async(_holder(rig) == "leader"), timeout=20)
        standby = rig.launch(rig.replica(lease=short_lease("standby"), seed=2))
        assert await wait_for(lambda: _async(switch.dead), timeout=30)
        leader.task.cancel()  # kill: no lease release (its calls all fail now)
        await asyncio.gather(leader.task, return_exceptions=True)
        claim = rig.server.kube.objects(NODECLAIM)[0]
        assert not (claim.get("status") or {}).get("providerID")  # the launch was never recorded

        assert await wait_for(lambda: _async(_holder(rig) == "standby"), timeout=20)
        assert await wait_for(lambda: rig.converged(instances=1), timeout=40), await rig.inventory()
        # The standby adopted the instance the dead leader launched for that claim: nothing leaked, no twin.
        all_instances = rig.ec2_instances()
        assert len(all_instances) == 1, [(i["InstanceId"], i["State"]["Name"]) for i in all_instances]
        assert (await rig.inventory()).instances == {claim_provider_id(rig)}
        assert standby.task is not None and not standby.task.done()


def _holder(rig: object) -> str:
    lease = rig.server.kube.peek(LEASE, "adze-leader-election", "kube-system")  # type: ignore[attr-defined]
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


async def _async(value: object) -> bool:
    return bool(value)


def claim_provider_id(rig: object) -> str:
    claims = rig.server.kube.objects(NODECLAIM)  # type: ignore[attr-defined]
    return str(claims[0]["status"]["providerID"])
