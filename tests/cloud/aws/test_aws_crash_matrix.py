"""Crash matrix: the reconciler dies right after each AWS call of a provisioning run in turn.

After every crash a fresh process (new provider, empty caches) resumes the
launches recorded in the API server and the orphan collector runs; then the
running instances must be exactly the NodeClaims' instances: no leak, no
duplicate. The NodeClaim side is the in-memory API server (``MemoryKube``) and
the lead's ``lifecycle.launch`` executor, as in production.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aws_harness import CrashAfter, SimulatedCrash, make_provider

from reconciler.cloud.aws.gc import collect_orphans
from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.kube.api import NODECLAIM
from reconciler.kube.memory import MemoryKube
from reconciler.lifecycle.launch import launch

NODECLAIMS = ("np-a1", "np-a2", "np-a3")
TYPES = ["m5.large", "c5.large", "c6g.large", "m6i.large"]


def nodeclaim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": {"karpenter.sh/nodepool": "default"},
            "finalizers": ["karpenter.sh/termination"],
        },
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": TYPES},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
            ],
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
        },
    }


def cluster_objects(aws: OfflineAWS) -> MemoryKube:
    kube = MemoryKube()
    kube.load([aws.nodeclass(), *(nodeclaim(name) for name in NODECLAIMS)])
    return kube


async def run_launches(kube: MemoryKube, provider: Any) -> None:
    """The lifecycle controller's pass: launch every NodeClaim that has no providerID yet."""
    claims, _ = await kube.list(NODECLAIM)
    for claim in sorted(claims, key=lambda c: c["metadata"]["name"]):
        await launch(kube, provider, claim, datetime.now(UTC))


async def converge(aws: OfflineAWS, kube: MemoryKube) -> tuple[set[str], set[str]]:
    """Restart: a new process launches what is missing, then collects orphans."""
    provider = make_provider(aws)
    try:
        await run_launches(kube, provider)
        claims, _ = await kube.list(NODECLAIM)
        await collect_orphans(provider, claims, datetime.now(UTC) + timedelta(seconds=60))
        running = {i.provider_id for i in await provider.list() if i.state in ("pending", "running")}
    finally:
        provider.close()
    recorded = {c["status"]["providerID"] for c in claims if (c.get("status") or {}).get("providerID")}
    return running, recorded


async def count_calls(aws: OfflineAWS) -> list[str]:
    counter = CrashAfter(10**9)
    provider = make_provider(aws)
    operations: list[str] = []
    for service in ("ec2", "ssm", "iam"):
        provider.clients.client(service).meta.events.register(
            "after-call", lambda model, **_: operations.append(model.name)
        )
    counter.attach(provider)
    try:
        await run_launches(cluster_objects(aws), provider)
    finally:
        provider.close()
    return operations


@pytest.mark.slow  # a restart after every AWS call: a crash loop of its own
async def test_crash_after_every_aws_call_converges_without_leaks_or_duplicates(moto_env: OfflineAWS) -> None:
    baseline = moto_env.for_cluster("crash-baseline")
    operations = await count_calls(baseline)
    assert "CreateFleet" in operations and "CreateLaunchTemplate" in operations
    # One CreateFleet per NodeClaim, and the NodeClass's validation dry run (which launches nothing).
    assert operations.count("CreateFleet") == len(NODECLAIMS) + 1 and "RunInstances" in operations
    crashed_after = []
    for n in range(1, len(operations) + 1):
        aws = moto_env.for_cluster(f"crash-{n}")
        kube = cluster_objects(aws)
        provider = make_provider(aws)
        crash = CrashAfter(n).attach(provider)
        try:
            await run_launches(kube, provider)
        except SimulatedCrash:
            pass
        finally:
            provider.close()
        assert crash.crashed_after is not None, f"call {n} was never made"
        crashed_after.append(crash.crashed_after)
        running, recorded = await converge(aws, kube)
        assert len(recorded) == len(NODECLAIMS), (n, crash.crashed_after)
        assert running == recorded, (n, crash.crashed_after, running ^ recorded)
    assert crashed_after.count("CreateFleet") == len(NODECLAIMS) + 1


async def test_instance_launched_for_a_nodeclaim_deleted_before_restart_is_reclaimed(
    moto_env: OfflineAWS,
) -> None:
    aws = moto_env.for_cluster("crash-deleted-claim")
    operations = await count_calls(moto_env.for_cluster("crash-deleted-claim-count"))
    # The first CreateFleet is the NodeClass validation's dry run; the second launches NODECLAIMS[0].
    first_fleet = [i for i, op in enumerate(operations) if op == "CreateFleet"][1] + 1
    kube = cluster_objects(aws)
    provider = make_provider(aws)
    CrashAfter(first_fleet).attach(provider)
    try:
        await run_launches(kube, provider)
    except SimulatedCrash:
        pass
    finally:
        provider.close()
    leaked = make_provider(aws)
    try:
        assert len(await leaked.list()) == 1
    finally:
        leaked.close()
    # While we were down the NodeClaim went away (e.g. its pods were deleted and it was never recorded).
    await kube.patch(NODECLAIM, NODECLAIMS[0], {"metadata": {"finalizers": None}})
    await kube.delete(NODECLAIM, NODECLAIMS[0])
    running, recorded = await converge(aws, kube)
    assert len(recorded) == len(NODECLAIMS) - 1
    assert running == recorded
