"""NodeClaim launch, registration and initialization against the in-memory API server and simulated cloud."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reconciler.cloud.sim.provider import SimulatedCloud
from reconciler.cloud.types import InstanceType, LaunchRequest, Offering
from reconciler.kube.api import NODE, NODECLAIM, NotFoundError
from reconciler.kube.memory import MemoryKube
from reconciler.lifecycle.launch import initialization_blockers, initialize, launch, node_for_instance, register
from reconciler.model import labels as wk
from reconciler.model.conditions import is_true
from reconciler.model.resources import Resources

NOW = datetime(2026, 1, 1, 9, tzinfo=UTC)


def catalog() -> list[InstanceType]:
    return [
        InstanceType(
            "small",
            Resources.of(cpu="2", memory="4Gi", pods="10"),
            Resources.of(cpu="100m"),
            (
                Offering("z1", "spot", 0.02),
                Offering("z1", "on-demand", 0.1),
                Offering("z2", "on-demand", 0.09),
            ),
            {wk.INSTANCE_TYPE: "small", wk.ARCH: "amd64"},
        ),
        InstanceType(
            "large",
            Resources.of(cpu="8", memory="16Gi", pods="50"),
            Resources.of(cpu="100m"),
            (Offering("z1", "on-demand", 0.4),),
            {wk.INSTANCE_TYPE: "large", wk.ARCH: "amd64"},
        ),
    ]


def nodeclaim(name: str = "default-abcde", **spec: object) -> dict[str, object]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": {wk.NODEPOOL: "default"},
            "finalizers": [wk.TERMINATION_FINALIZER],
        },
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["small", "large"]},
                {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
            ],
            "resources": {"requests": {"cpu": "1"}},
            **spec,
        },
    }


def test_launch_request_reads_nodeclaim_requirements() -> None:
    claim = nodeclaim()
    claim["spec"]["requirements"].append({"key": wk.ZONE, "operator": "NotIn", "values": ["z2"]})  # type: ignore[index]
    claim["spec"]["requirements"].append({"key": wk.ZONE, "operator": "In", "values": ["z1", "z2"]})  # type: ignore[index]
    request = LaunchRequest.from_nodeclaim(claim)
    assert request.instance_types == ["small", "large"]
    assert request.capacity_types == ["on-demand"]
    assert request.zones == ["z1"]
    assert request.nodepool == "default"
    assert request.requests.amount("cpu") == 1000


async def test_launch_picks_cheapest_allowed_offering_and_records_status() -> None:
    kube = MemoryKube(clock=lambda: NOW)
    cloud = SimulatedCloud(catalog(), clock=lambda: NOW)
    await kube.create(nodeclaim())
    outcome = await launch(kube, cloud, await kube.get(NODECLAIM, "default-abcde"), NOW)
    assert outcome.instance is not None
    assert (outcome.instance.instance_type, outcome.instance.zone, outcome.instance.capacity_type) == (
        "small",
        "z2",
        "on-demand",
    )
    stored = await kube.get(NODECLAIM, "default-abcde")
    assert stored["status"]["providerID"] == outcome.instance.provider_id
    assert stored["status"]["allocatable"]["cpu"] == "1900m"
    assert stored["metadata"]["labels"][wk.ZONE] == "z2"
    assert is_true(stored, "Launched")
    # Launching again is a no-op: the claim already has an instance.
    again = await launch(kube, cloud, stored, NOW)
    assert again.instance is not None and again.instance.provider_id == outcome.instance.provider_id
    assert len(await cloud.list()) == 1


async def test_insufficient_capacity_deletes_the_claim_without_leaking() -> None:
    kube = MemoryKube(clock=lambda: NOW)
    cloud = SimulatedCloud(catalog(), clock=lambda: NOW)
    cloud.mark_unavailable("small", None, "on-demand")
    cloud.mark_unavailable("large", None, None)
    await kube.create(nodeclaim())
    outcome = await launch(kube, cloud, await kube.get(NODECLAIM, "default-abcde"), NOW)
    assert outcome.instance is None
    assert "no available offering" in outcome.error
    assert ("small", "z1", "on-demand") in outcome.unavailable_offerings
    with pytest.raises(NotFoundError):
        await kube.get(NODECLAIM, "default-abcde")
    assert await cloud.list() == []


async def test_registration_syncs_labels_taints_and_initialization_waits_for_startup_taints() -> None:
    kube = MemoryKube(clock=lambda: NOW)
    cloud = SimulatedCloud(catalog(), clock=lambda: NOW)
    claim = nodeclaim(
        taints=[{"key": "team", "value": "a", "effect": "NoSchedule"}],
        startupTaints=[{"key": "cilium.io/agent-not-ready", "effect": "NoExecute"}],
    )
    await kube.create(claim)
    outcome = await launch(kube, cloud, await kube.get(NODECLAIM, "default-abcde"), NOW)
    assert outcome.instance is not None
    node = node_for_instance(await kube.get(NODECLAIM, "default-abcde"), outcome.instance, NOW)
    assert {"key": wk.UNREGISTERED_TAINT_KEY, "effect": "NoExecute"} in node["spec"]["taints"]
    await kube.create(node)
    await register(
        kube, await kube.get(NODECLAIM, "default-abcde"), await kube.get(NODE, "default-abcde"), NOW
    )
    registered = await kube.get(NODE, "default-abcde")
    keys = {t["key"] for t in registered["spec"]["taints"]}
    assert wk.UNREGISTERED_TAINT_KEY not in keys
    assert {"team", "cilium.io/agent-not-ready"} <= keys
    assert registered["metadata"]["labels"][wk.NODEPOOL] == "default"
    assert wk.TERMINATION_FINALIZER in registered["metadata"]["finalizers"]
    claim_now = await kube.get(NODECLAIM, "default-abcde")
    assert is_true(claim_now, "Registered") and is_true(claim_now, "Launched")
    assert claim_now["status"]["nodeName"] == "default-abcde"

    blockers = initialization_blockers(claim_now, registered)
    assert blockers == ["startup taint cilium.io/agent-not-ready is still present"]
    assert not await initialize(kube, claim_now, registered, NOW)
    taints = [t for t in registered["spec"]["taints"] if t["key"] != "cilium.io/agent-not-ready"]
    await kube.patch(NODE, "default-abcde", {"spec": {"taints": taints}})
    claim_now = await kube.get(NODECLAIM, "default-abcde")
    assert await initialize(kube, claim_now, await kube.get(NODE, "default-abcde"), NOW)
    final = await kube.get(NODECLAIM, "default-abcde")
    assert all(is_true(final, c) for c in ("Launched", "Registered", "Initialized"))
    assert (await kube.get(NODE, "default-abcde"))["metadata"]["labels"][wk.INITIALIZED] == "true"


class RecordingCloud(SimulatedCloud):
    """The simulated cloud, remembering each launch request and failing (or losing the answer) on demand."""

    def __init__(self) -> None:
        super().__init__(catalog(), clock=lambda: NOW)
        self.requests: list[LaunchRequest] = []
        self.fail_with: Exception | None = None

    async def create(self, request: LaunchRequest, nodeclass: object) -> object:  # type: ignore[override]
        self.requests.append(request)
        if self.fail_with is not None:
            raise self.fail_with
        return await super().create(request, nodeclass)  # type: ignore[arg-type]


async def test_a_launch_attempt_is_recorded_before_the_request_and_its_token_reused_until_it_fails() -> None:
    """Issue 24: a restart that cannot see its instance yet (EC2 eventual consistency) must send the same
    idempotency token, so the cloud answers with the first instance instead of launching a second."""
    from reconciler.cloud.types import CloudError, LaunchOutcomeUnknown
    from reconciler.lifecycle.launch import LAUNCH_ATTEMPT_ANNOTATION

    kube, cloud = MemoryKube(), RecordingCloud()
    await kube.create(nodeclaim())
    cloud.fail_with = LaunchOutcomeUnknown("no answer")  # the request went out; what happened is unknown
    with pytest.raises(LaunchOutcomeUnknown):
        await launch(kube, cloud, await kube.get(NODECLAIM, "default-abcde"), NOW, idempotent=True)
    stored = await kube.get(NODECLAIM, "default-abcde")
    attempt = stored["metadata"]["annotations"][LAUNCH_ATTEMPT_ANNOTATION]
    first = cloud.requests[-1].client_token
    assert first == f"{stored['metadata']['uid']}-{attempt}" and len(first) <= 64
    with pytest.raises(LaunchOutcomeUnknown):  # a retry (or another replica after a crash): the same token
        await launch(kube, cloud, stored, NOW, idempotent=True)
    assert cloud.requests[-1].client_token == first
    cloud.fail_with = CloudError("CreateFleet failed: Unauthorized")  # a definite "no": nothing was launched
    with pytest.raises(CloudError):
        await launch(kube, cloud, await kube.get(NODECLAIM, "default-abcde"), NOW, idempotent=True)
    cleared = await kube.get(NODECLAIM, "default-abcde")
    assert LAUNCH_ATTEMPT_ANNOTATION not in (cleared["metadata"].get("annotations") or {})
    cloud.fail_with = None
    outcome = await launch(kube, cloud, cleared, NOW.replace(minute=1), idempotent=True)
    assert outcome.instance is not None and cloud.requests[-1].client_token != first, "a new attempt, a new token"


async def test_registration_owns_the_node_and_a_node_registered_again_is_synced_again() -> None:
    """Karpenter's registration sets the Node's ownerReference to its NodeClaim; a Node force-deleted and
    registered again by its kubelet lacks everything registration gave it, and ``register`` (idempotent)
    gives it back."""
    from reconciler.lifecycle.launch import registration_drift

    kube = MemoryKube(clock=lambda: NOW)
    cloud = SimulatedCloud(catalog(), clock=lambda: NOW)
    await kube.create(nodeclaim())
    outcome = await launch(kube, cloud, await kube.get(NODECLAIM, "default-abcde"), NOW)
    assert outcome.instance is not None
    claim = await kube.get(NODECLAIM, "default-abcde")
    fresh = node_for_instance(claim, outcome.instance, NOW)
    await kube.create(fresh)
    node = await kube.get(NODE, "default-abcde")
    assert registration_drift(claim, node) == [
        "taint karpenter.sh/unregistered is present", "label karpenter.sh/registered is missing",
        "finalizer karpenter.sh/termination is missing", "ownerReference to the NodeClaim is missing"]
    claim = await register(kube, claim, node, NOW)
    node = await kube.get(NODE, "default-abcde")
    assert registration_drift(claim, node) == []
    assert node["metadata"]["ownerReferences"] == [{
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": "default-abcde",
        "uid": claim["metadata"]["uid"], "blockOwnerDeletion": True}]
    await kube.patch(NODE, "default-abcde", {"metadata": {"finalizers": None}})  # force-deleted ...
    await kube.delete(NODE, "default-abcde")
    await kube.create(fresh)  # ... and registered again by its kubelet
    again = await kube.get(NODE, "default-abcde")
    assert registration_drift(claim, again)
    await register(kube, claim, again, NOW)
    assert registration_drift(claim, await kube.get(NODE, "default-abcde")) == []
