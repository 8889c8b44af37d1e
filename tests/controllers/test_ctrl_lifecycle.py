"""NodeClaim lifecycle controller, step by step on a manual clock."""

from __future__ import annotations

from typing import Any

from ctrl_cluster import node_name_for
from ctrl_steps import Steps, nodeclaim_manifest

from reconciler.cloud.types import CloudError, LaunchRequest
from reconciler.controllers.nodeclaim.lifecycle_controller import NodeClaimLifecycle
from reconciler.kube.api import NODE, NODECLAIM
from reconciler.lifecycle.launch import node_for_instance
from reconciler.model import labels as wk
from reconciler.model.conditions import is_true


class FlakyCloud:
    """The simulated cloud whose launches fail with a generic (non-capacity) error."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = "flaky"

    async def create(self, request: LaunchRequest, nodeclass: Any) -> Any:
        raise CloudError("RequestLimitExceeded: slow down")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def run_pass(lifecycle: NodeClaimLifecycle) -> None:
    lifecycle.reconcile_all()
    await lifecycle.workers.drain()


async def test_launch_register_initialize_by_provider_id_after_startup_taints_are_gone() -> None:
    steps = Steps()
    await steps.basics()
    startup = [{"key": "example.com/agent-not-ready", "effect": "NoSchedule"}]
    await steps.kube.create(nodeclaim_manifest(startupTaints=startup))
    lifecycle = NodeClaimLifecycle(steps.context(), steps.store, on_launch_failed=lambda: None)

    await run_pass(lifecycle)
    claim = await steps.kube.get(NODECLAIM, "default-abcde")
    assert is_true(claim, "Launched")
    assert wk.TERMINATION_FINALIZER in claim["metadata"]["finalizers"]
    instance = await steps.cloud.get(claim["status"]["providerID"])

    node = node_for_instance(claim, instance, steps.clock.now())
    node["metadata"]["name"] = node_name_for(instance.provider_id)
    await steps.kube.create(node)
    await steps.kube.patch(NODE, node["metadata"]["name"], {"status": node["status"]}, subresource="status")
    await run_pass(lifecycle)
    claim = await steps.kube.get(NODECLAIM, "default-abcde")
    registered = await steps.kube.get(NODE, node["metadata"]["name"])
    assert is_true(claim, "Registered") and claim["status"]["nodeName"] == node["metadata"]["name"]
    assert not any(t["key"] == wk.UNREGISTERED_TAINT_KEY for t in registered["spec"]["taints"])
    assert wk.TERMINATION_FINALIZER in registered["metadata"]["finalizers"]
    assert not is_true(claim, "Initialized")  # the startup taint is still there

    await steps.kube.patch(NODE, node["metadata"]["name"], {"spec": {"taints": []}})
    await run_pass(lifecycle)
    claim = await steps.kube.get(NODECLAIM, "default-abcde")
    assert is_true(claim, "Initialized")
    assert (await steps.kube.get(NODE, node["metadata"]["name"]))["metadata"]["labels"][wk.INITIALIZED] == "true"
    assert {"Launched", "Registered", "Initialized"} <= {e["reason"] for e in steps.events()}


async def test_insufficient_capacity_deletes_the_claim_at_once_and_asks_for_a_new_plan() -> None:
    steps = Steps()
    await steps.basics()
    for name in ("c5.large", "c5.xlarge"):
        steps.cloud.mark_unavailable(name, None, None)
    await steps.kube.create(nodeclaim_manifest())
    replans = []
    lifecycle = NodeClaimLifecycle(steps.context(), steps.store, on_launch_failed=lambda: replans.append(1))
    await run_pass(lifecycle)
    assert steps.kube.objects(NODECLAIM) == []
    assert replans == [1]
    assert steps.events("InsufficientCapacityError")


async def test_a_claim_that_cannot_launch_is_retried_with_backoff_then_deleted_after_the_launch_timeout() -> None:
    steps = Steps()
    await steps.basics()
    steps.cloud = FlakyCloud(steps.cloud)
    await steps.kube.create(nodeclaim_manifest())
    lifecycle = NodeClaimLifecycle(steps.context(launch_timeout=300), steps.store, on_launch_failed=lambda: None)

    await run_pass(lifecycle)
    claim = await steps.kube.get(NODECLAIM, "default-abcde")
    launched = next(c for c in claim["status"]["conditions"] if c["type"] == "Launched")
    # Karpenter's: Launched stays Unknown (LaunchFailed) until the launch timeout deletes the claim.
    assert (launched["status"], launched["reason"]) == ("Unknown", "LaunchFailed")
    assert "RequestLimitExceeded" in launched["message"]
    assert len(steps.events("LaunchFailed")) == 1
    await run_pass(lifecycle)  # inside the backoff: no second attempt
    assert len(steps.events("LaunchFailed")) == 1

    steps.clock.advance(301)
    await run_pass(lifecycle)
    claim = await steps.kube.get(NODECLAIM, "default-abcde")
    assert claim["metadata"].get("deletionTimestamp")  # the termination finalizer finishes it
    assert steps.events("NodeClaimTimeout")


async def test_a_launched_claim_whose_node_never_registers_is_deleted_after_the_registration_timeout() -> None:
    steps = Steps()
    await steps.basics()
    await steps.kube.create(nodeclaim_manifest())
    lifecycle = NodeClaimLifecycle(steps.context(registration_timeout=900), steps.store, on_launch_failed=lambda: None)
    await run_pass(lifecycle)
    steps.clock.advance(899)
    await run_pass(lifecycle)
    assert not (await steps.kube.get(NODECLAIM, "default-abcde"))["metadata"].get("deletionTimestamp")
    steps.clock.advance(2)
    await run_pass(lifecycle)
    assert (await steps.kube.get(NODECLAIM, "default-abcde"))["metadata"].get("deletionTimestamp")
    assert steps.events("RegistrationTimeout")
    labels = {"reason": "registration_timeout", "nodepool": "default", "capacity_type": "on-demand"}
    assert steps.metrics.sample("karpenter_nodeclaims_disrupted_total", labels) == 1.0
