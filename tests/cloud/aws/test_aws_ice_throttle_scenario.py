"""200 pending pods against the real provider with half of all offerings out of capacity and 20 % of
EC2 calls throttled: the engine's provisioning plan, the lead's launch executor and the AWS provider
re-plan around exhausted offerings until every pod is placed, with exactly one instance per NodeClaim.
"""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime
from typing import Any

from aws_harness import ACTIVE, FaultPlan, make_provider

from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.kube.api import NODE, NODECLAIM, POD
from reconciler.kube.memory import MemoryKube
from reconciler.lifecycle.launch import launch, node_for_instance
from reconciler.provisioning.provisioner import plan
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState

PODS = 200
FAMILIES = ["m5", "c5", "m6i", "r5"]
MAX_ROUNDS = 40


def nodepool() -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default", "uid": "np-uid"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": ["spot", "on-demand"],
                        },
                        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": FAMILIES},
                        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lt", "values": ["17"]},
                    ],
                }
            }
        },
    }


def pod(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"inflate-{index:03d}",
            "namespace": "default",
            "uid": f"pod-{index}",
            "labels": {"app": "inflate"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "inflate-rs",
                    "uid": "rs",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "containers": [
                {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "700m", "memory": "1Gi"}}}
            ]
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


async def test_every_pod_placed_despite_half_the_offerings_ice_and_throttling(moto_env: OfflineAWS) -> None:
    aws = moto_env.for_cluster("ice-throttle-200")
    provider = make_provider(
        aws, instance_type_filters=({"Name": "instance-type", "Values": [f"{f}.*" for f in FAMILIES]},)
    )
    kube = MemoryKube()
    kube.load([nodepool(), aws.nodeclass(), *(pod(i) for i in range(PODS))])
    try:
        # Exhaust a fixed, seeded half of every (capacity type, type, zone) offering.
        types = await provider.instance_types(aws.nodeclass())
        offerings = sorted((o.capacity_type, t.name, o.zone) for t in types for o in t.offerings)
        rng = random.Random(42)
        plan_faults = FaultPlan(ice=set(rng.sample(offerings, len(offerings) // 2)), throttle=0.2)
        ACTIVE.plan = plan_faults
        names = (f"default-{i:04d}" for i in itertools.count())
        failed_launches = 0
        for _ in range(MAX_ROUNDS):
            manifests = [obj for kind in (POD, NODE, NODECLAIM) for obj in (await kube.list(kind))[0]]
            state = ClusterState.from_manifests([nodepool(), aws.nodeclass(), *manifests])
            instance_types = await provider.instance_types(aws.nodeclass())
            decision = plan(
                state, {"default": instance_types}, Settings(), datetime.now(UTC), lambda _: next(names)
            )
            if not decision.nodeclaims:
                break
            for planned in decision.nodeclaims:
                created = await kube.create(planned.manifest())
                outcome = await launch(kube, provider, created, datetime.now(UTC))
                if outcome.instance is None:
                    failed_launches += 1
                    continue
                claim = await kube.get(NODECLAIM, planned.name)
                await kube.create(node_for_instance(claim, outcome.instance, datetime.now(UTC)))
                for key in planned.pods:
                    namespace, name = key.split("/")
                    await kube.patch(POD, name, {"spec": {"nodeName": planned.name}}, namespace=namespace)
        ACTIVE.plan = None

        pods, _ = await kube.list(POD)
        unplaced = [p["metadata"]["name"] for p in pods if not p["spec"].get("nodeName")]
        assert unplaced == []
        # Exhausted offerings were met (fleet errors) and cached, so later plans avoided them.
        assert provider.unavailable.unavailable()
        assert plan_faults.throttled > 0
        print(
            f"fleet calls {plan_faults.fleet_calls}, failed launches {failed_launches}, "
            f"cached ICE {len(provider.unavailable.unavailable())}, throttled {plan_faults.throttled}"
        )
        claims, _ = await kube.list(NODECLAIM)
        recorded = [c["status"]["providerID"] for c in claims]
        assert len(recorded) == len(set(recorded)) == len(claims)
        running = {i.provider_id for i in await provider.list()}
        assert running == set(recorded)  # one instance per NodeClaim: no duplicate, no leak
        # No instance landed on an exhausted offering.
        for claim in claims:
            labels = claim["metadata"]["labels"]
            key = (
                labels["karpenter.sh/capacity-type"],
                labels["node.kubernetes.io/instance-type"],
                labels["topology.kubernetes.io/zone"],
            )
            assert key not in plan_faults.ice
    finally:
        ACTIVE.plan = None
        provider.close()
