"""End to end over HTTP and moto: provisioning, consolidation, leader failover.

The reconciler is the real ``App`` (leader election, controllers, observability
server) with the real ``LiveKube`` client against the fake API server (every
object it writes is schema-checked there) and the real AWS provider against
moto. Nothing in ``reconciler/`` knows it is a test.
"""

from __future__ import annotations

import asyncio
import urllib.request

from ctrl_cluster import CrashSwitch, hourly_cost
from ctrl_harness import wait_for
from e2e_rig import E2E, Replica, e2e, e2e_lease
from metrics_scrape import scraping
from observability.karpenter_reference import ELSEWHERE
from support.printer_columns import printed

from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.kube.api import DEPLOYMENT, LEASE, NODECLAIM, NODEPOOL, POD
from reconciler.sim.workloads import create_with_status

WORKSHOP_SEQUENCE = [
    "found provisionable pod(s)",
    "computed new nodeclaim(s) to fit pod(s)",
    "created nodeclaim",
    "launched nodeclaim",
    "registered nodeclaim",
    "initialized nodeclaim",
]


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read().decode()


def node_agent() -> dict[str, object]:
    """A DaemonSet with requests and limits (so node metrics have DaemonSet and limit series)."""
    resources = {"requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}}
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "node-agent", "namespace": "kube-system"},
        "spec": {"selector": {"matchLabels": {"app": "node-agent"}}, "template": {
            "metadata": {"labels": {"app": "node-agent"}},
            "spec": {"containers": [{"name": "agent", "image": "agent", "resources": resources}]}}},
    }


async def test_deployment_scale_up_then_down_over_http_and_moto(aws: OfflineAWS) -> None:
    async with e2e(aws, replicas=10) as rig:
        await create_with_status(rig.server.kube, node_agent())
        await rig.server.kube.patch(NODEPOOL, "default", {"spec": {"limits": {"cpu": "1000"}}})
        replica = rig.launch(rig.replica(lease=e2e_lease("a"), serve=True))
        assert await wait_for(lambda: _async(replica.app.server is not None and replica.app.server.metrics_port),
                              timeout=30)
        async with scraping(f"http://127.0.0.1:{replica.app.server.metrics_port}/metrics") as scraper:
            await _scale_up_then_down(rig, replica)
        # Every metric /metrics serves had samples during the run (gauges of passing states while they lasted),
        # but those whose event this scenario does not cause, which their own tests exercise.
        assert scraper.scrapes >= 5  # several scrapes across the run (it takes ~7 s on a loaded machine)
        assert set(ELSEWHERE) <= scraper.served, set(ELSEWHERE) - scraper.served
        never = scraper.served - scraper.sampled - set(ELSEWHERE)
        assert not never, f"served without samples: {sorted(never)}"
        _check_label_values(scraper.last)

        replica.task.cancel()  # graceful shutdown: the lease is released for the standby
        await asyncio.gather(replica.task, return_exceptions=True)
        lease = rig.server.kube.peek(LEASE, "adze-leader-election", "kube-system")
        assert not lease["spec"].get("holderIdentity")


def _check_label_values(text: str) -> None:
    """Some of Karpenter's label values, as its dashboards and alerts filter on them."""
    assert 'karpenter_voluntary_disruption_eligible_nodes{reason="underutilized"}' in text
    assert 'reason="underutilized"' in text and 'reason="Underutilized"' in text  # decisions / budgets
    assert 'karpenter_nodepools_allowed_disruptions{nodepool="default",reason="Underutilized"}' in text
    assert 'controller_runtime_reconcile_total{controller="provisioner",result="success"}' in text
    assert 'leader_election_master_status{name="adze-leader-election"} 1.0' in text
    assert 'karpenter_nodes_allocatable{arch="amd64",capacity_reservation_id=""' in text


async def _scale_up_then_down(rig: E2E, replica: Replica) -> None:
    """Ten pods on two nodes, then two pods: consolidation moves them, through evictions, onto cheaper capacity."""
    assert await wait_for(lambda: rig.converged(instances=2), timeout=120), await rig.inventory()
    pods = [p for p in rig.server.kube.objects(POD) if p["metadata"]["namespace"] == "default"]
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
    # The counter agrees with the log: one sample per NodeClaim the provisioner created (two, unless the pods
    # reached it in more than one batch).
    created = sum(1 for line in rig.log_lines() if line["message"] == "created nodeclaim")
    assert created >= 2
    assert 'karpenter_nodeclaims_created_total{min_values_relaxed="false",nodepool="default",' \
           f'reason="provisioned"}} {float(created)}' in body, created
    # `kubectl get nodeclaims` / `nodepools` as the CRD's printer columns show the live objects.
    for claim in rig.server.kube.objects(NODECLAIM):
        row = printed("NodeClaim", claim)
        assert row["READY"] == "True" and row["NODE"] and row["TYPE"].startswith("c5."), row
    assert printed("NodePool", rig.server.kube.objects(NODEPOOL)[0])["NODES"] == "2"
    lease = rig.server.kube.peek(LEASE, "adze-leader-election", "kube-system")
    assert lease is not None and lease["spec"]["holderIdentity"] == "a"

    first = {i["InstanceId"] for i in rig.ec2_instances()}
    await rig.server.kube.patch(DEPLOYMENT, "inflate", {"spec": {"replicas": 2}}, "default")

    # 0.17 $/h is the cheapest home for two 1.5-CPU pods (a c5.xlarge or two c5.large): whatever the
    # c5.2xlarge they run on, they must move.
    assert await wait_for(lambda: _consolidated(rig, pods=2, cost=0.17), timeout=120), await rig.inventory()
    evictions = [r for r in rig.server.requests if r.method == "POST" and r.path.endswith("/eviction")]
    assert evictions, "consolidation must move pods through the Eviction API"
    states = {i["InstanceId"]: i["State"]["Name"] for i in rig.ec2_instances()}
    assert all(states[i] in ("shutting-down", "terminated") for i in first)
    running = {i for i, state in states.items() if state == "running"}
    assert {p.rsplit("/", 1)[1] for p in (await rig.inventory()).instances} == running


async def test_leader_killed_right_after_launching_is_replaced_without_leaks_or_duplicates(aws: OfflineAWS) -> None:
    async with e2e(aws, replicas=5) as rig:
        # The leader dies right after its first CreateFleet took effect, before the NodeClaim recorded it.
        switch = CrashSwitch(at=1, counts=lambda call: call.startswith("cloud create"))
        leader = rig.launch(rig.replica(lease=e2e_lease("leader"), switch=switch, seed=1))
        assert await wait_for(lambda: _async(_holder(rig) == "leader"), timeout=60)
        standby = rig.launch(rig.replica(lease=e2e_lease("standby"), seed=2))
        assert await wait_for(lambda: _async(switch.dead), timeout=90)
        leader.task.cancel()  # kill: no lease release (its calls all fail now)
        await asyncio.gather(leader.task, return_exceptions=True)
        claim = rig.server.kube.objects(NODECLAIM)[0]
        assert not (claim.get("status") or {}).get("providerID")  # the launch was never recorded

        assert await wait_for(lambda: _async(_holder(rig) == "standby"), timeout=60)
        assert await wait_for(lambda: rig.converged(instances=1), timeout=120), await rig.inventory()
        # The standby adopted the instance the dead leader launched for that claim: nothing leaked, no twin.
        all_instances = rig.ec2_instances()
        assert len(all_instances) == 1, [(i["InstanceId"], i["State"]["Name"]) for i in all_instances]
        assert (await rig.inventory()).instances == {claim_provider_id(rig)}
        assert standby.task is not None and not standby.task.done()


async def _consolidated(rig: E2E, pods: int, cost: float) -> bool:
    """Converged, ``pods`` workload pods running (the DaemonSet's aside), no more than ``cost`` $/h."""
    workload = [p for p in rig.server.kube.objects(POD) if p["metadata"]["namespace"] == "default"]
    return (await rig.converged()) and len(workload) == pods and hourly_cost(rig.server.kube) <= cost


def _holder(rig: object) -> str:
    lease = rig.server.kube.peek(LEASE, "adze-leader-election", "kube-system")  # type: ignore[attr-defined]
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


async def _async(value: object) -> bool:
    return bool(value)


def claim_provider_id(rig: object) -> str:
    claims = rig.server.kube.objects(NODECLAIM)  # type: ignore[attr-defined]
    return str(claims[0]["status"]["providerID"])
