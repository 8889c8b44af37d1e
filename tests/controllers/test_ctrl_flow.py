"""The controllers together against an in-memory API server and the simulated cloud: scale up, scale down."""

from __future__ import annotations

from ctrl_cluster import packed
from ctrl_harness import Rig, running, wait_for
from ctrl_objects import deployment, nodeclass, nodepool

from reconciler.kube.api import DEPLOYMENT, EVENT, NODECLAIM, POD

WORKSHOP_SEQUENCE = [
    "found provisionable pod(s)",
    "computed new nodeclaim(s) to fit pod(s)",
    "created nodeclaim",
    "launched nodeclaim",
    "registered nodeclaim",
    "initialized nodeclaim",
]


async def test_pending_pods_get_nodes_with_the_workshop_log_sequence() -> None:
    rig = Rig()
    await rig.apply(nodeclass(), nodepool(), deployment(replicas=5))
    async with running(rig):
        assert await wait_for(lambda: rig.converged(instances=1))
    lines = rig.log_lines()
    messages = [line["message"] for line in lines]
    positions = [messages.index(step) for step in WORKSHOP_SEQUENCE]
    assert positions == sorted(positions), messages
    by_message = {line["message"]: line for line in lines}
    claim = rig.kube.objects(NODECLAIM)[0]
    name, provider_id = claim["metadata"]["name"], claim["status"]["providerID"]
    node_name = claim["status"]["nodeName"]
    assert by_message["found provisionable pod(s)"]["pods"] == 5
    assert (
        by_message["computed new nodeclaim(s) to fit pod(s)"] | {"nodeclaims": 1, "pods": 5}
        == by_message["computed new nodeclaim(s) to fit pod(s)"]
    )
    created = by_message["created nodeclaim"]
    assert created["NodeClaim"] == {"name": name} and created["NodePool"] == {"name": "default"}
    launched = by_message["launched nodeclaim"]
    labels = claim["metadata"]["labels"]
    assert launched["provider-id"] == provider_id
    assert launched["instance-type"] == labels["node.kubernetes.io/instance-type"] == "c5.2xlarge"
    assert launched["zone"] == labels["topology.kubernetes.io/zone"]
    assert launched["capacity-type"] == "on-demand"
    assert by_message["registered nodeclaim"]["Node"] == {"name": node_name}
    assert node_name != name  # matched by providerID, not by name
    assert by_message["initialized nodeclaim"]["Node"] == {"name": node_name}
    assert {p["spec"]["nodeName"] for p in rig.kube.objects(POD)} == {node_name}
    reasons = {e["reason"] for e in rig.kube.objects(EVENT)}
    assert {"Created", "Nominated", "Launched", "Registered", "Initialized"} <= reasons
    assert (
        rig.metrics.sample(
            "karpenter_nodeclaims_created_total",
            {"reason": "provisioned", "nodepool": "default", "min_values_relaxed": "false"}
        )
        == 1.0
    )


async def test_scale_down_consolidates_through_evictions_and_terminates_instances() -> None:
    rig = Rig()
    # Ten 1.5-CPU pods fill two c5.2xlarge; the two left after scaling down fit one c5.xlarge (0.17 $/h),
    # so wherever they run they must move: consolidation evicts them.
    await rig.apply(nodeclass(), nodepool(), deployment(replicas=10, cpu="1500m"))
    async with running(rig):
        assert await wait_for(lambda: rig.converged(instances=2))
        before = {i.provider_id for i in await rig.cloud.list()}
        await rig.kube.patch(DEPLOYMENT, "inflate", {"spec": {"replicas": 2}}, "default")

        # 0.17 $/h is the cheapest home for two 1.5-CPU pods (a c5.xlarge or two c5.large).
        assert await wait_for(lambda: packed(rig.kube, rig.cloud, 2, 0.17), timeout=60)
    after = await rig.cloud.list()
    assert all(("delete", gone) in rig.cloud.calls for gone in before - {i.provider_id for i in after})
    messages = [line["message"] for line in rig.log_lines()]
    assert any(m.startswith("disrupting nodeclaim(s) via") for m in messages)
    assert "evicted pod" in messages
    assert rig.metrics.sample("karpenter_pods_eviction_requests_total", {"code": "200"}) >= 1
    disrupted = sum(
        sample.value for family in rig.metrics.registry.collect() if family.name == "karpenter_nodeclaims_disrupted"
        for sample in family.samples
        if sample.labels["reason"] in ("empty", "underutilized") and sample.labels["nodepool"] == "default"
    )
    assert disrupted >= 2
    assert len(rig.kube.objects(POD)) == 2 and all(p["spec"].get("nodeName") for p in rig.kube.objects(POD))
