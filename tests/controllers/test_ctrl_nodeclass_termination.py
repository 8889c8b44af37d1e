"""The EC2NodeClass finalizer (``karpenter.k8s.aws/termination``), step by step on a manual clock."""

from __future__ import annotations

from typing import Any

from ctrl_steps import Steps, nodeclaim_manifest

from reconciler.controllers.pools_and_classes.nodeclass_termination import NodeClassTermination
from reconciler.controllers.pools_and_classes.status_controller import StatusController
from reconciler.kube.api import EC2NODECLASS, NODECLAIM, NotFoundError
from reconciler.model.labels import NODECLASS_TERMINATION_FINALIZER


class CleaningCloud:
    """The simulated cloud plus the optional cleanup hook, which records calls and can fail on demand."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.cleaned: list[str] = []
        self.failures = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def delete_nodeclass_resources(self, nodeclass: dict[str, Any]) -> dict[str, list[str]]:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("DeleteLaunchTemplate: RequestLimitExceeded")
        self.cleaned.append(nodeclass["metadata"]["name"])
        return {"launch-templates": ["karpenter.k8s.aws/abc"], "instance-profiles": ["c_123"]}


async def setup() -> tuple[Steps, CleaningCloud, NodeClassTermination]:
    steps = Steps()
    cloud = CleaningCloud(steps.cloud)
    steps.cloud = cloud
    await steps.basics()
    return steps, cloud, NodeClassTermination(steps.context(), steps.store)


async def finalizers(steps: Steps) -> list[str]:
    return list((await steps.kube.get(EC2NODECLASS, "default"))["metadata"].get("finalizers") or [])


async def test_every_nodeclass_gets_the_finalizer_once() -> None:
    steps, _, controller = await setup()
    await controller.reconcile_once()
    await controller.reconcile_once()
    assert await finalizers(steps) == [NODECLASS_TERMINATION_FINALIZER]


async def test_a_deleted_nodeclass_waits_for_its_nodeclaims_then_cleans_up_and_goes() -> None:
    steps, cloud, controller = await setup()
    await controller.reconcile_once()
    await steps.kube.create(nodeclaim_manifest("default-abcde"))
    await steps.kube.delete(EC2NODECLASS, "default")

    assert await controller.reconcile_once() == []
    assert await controller.reconcile_once() == []
    assert await finalizers(steps) == [NODECLASS_TERMINATION_FINALIZER]
    assert cloud.cleaned == []
    waiting = steps.events("WaitingOnNodeClaimTermination")
    assert len(waiting) == 1 and "default-abcde" in waiting[0]["message"]

    await steps.kube.delete(NODECLAIM, "default-abcde")
    assert await controller.reconcile_once() == ["default"]
    assert cloud.cleaned == ["default"]
    try:
        await steps.kube.get(EC2NODECLASS, "default")
        raise AssertionError("the EC2NodeClass should be gone once its finalizer is released")
    except NotFoundError:
        pass


async def test_a_claim_the_cache_has_not_seen_yet_still_holds_the_class() -> None:
    steps, cloud, controller = await setup()
    await controller.reconcile_once()
    steps.lagging.add("NodeClaim")  # the watch is behind: only the API server knows the new claim
    await steps.kube.create(nodeclaim_manifest("default-fresh"))
    await steps.kube.delete(EC2NODECLASS, "default")
    assert await controller.reconcile_once() == []
    assert cloud.cleaned == []


async def test_a_failed_cleanup_keeps_the_finalizer_and_is_retried() -> None:
    steps, cloud, controller = await setup()
    await controller.reconcile_once()
    cloud.failures = 1
    await steps.kube.delete(EC2NODECLASS, "default")
    assert await controller.reconcile_once() == []
    assert await finalizers(steps) == [NODECLASS_TERMINATION_FINALIZER]
    assert "RequestLimitExceeded" in steps.events("FailedCleanup")[0]["message"]
    assert await controller.reconcile_once() == [], "backing off: not tried again at once"
    steps.clock.advance(1.3)  # the first backoff step: 1 s (+ up to 20 % jitter)
    assert await controller.reconcile_once() == ["default"]
    assert cloud.cleaned == ["default"]


async def test_a_cloud_without_cleanup_just_releases_and_other_finalizers_stay() -> None:
    steps = Steps()
    await steps.basics()
    controller = NodeClassTermination(steps.context(), steps.store)
    await controller.reconcile_once()
    current = await steps.kube.get(EC2NODECLASS, "default")
    await steps.kube.patch(EC2NODECLASS, "default", {"metadata": {
        "finalizers": [*current["metadata"]["finalizers"], "example.com/keep"]}})
    await steps.kube.delete(EC2NODECLASS, "default")
    assert await controller.reconcile_once() == ["default"]
    assert await finalizers(steps) == ["example.com/keep"]


async def test_nodepools_of_a_deleting_nodeclass_are_not_ready() -> None:
    steps, _, controller = await setup()
    await controller.reconcile_once()
    await steps.kube.create(nodeclaim_manifest("default-abcde"))  # holds the class
    await steps.kube.delete(EC2NODECLASS, "default")
    status = StatusController(steps.context(), steps.store)
    pool = steps.store.manifests("NodePool")[0]
    conditions = {c["type"]: c for c in status.nodepool_status(pool)["conditions"]}
    assert conditions["NodeClassReady"]["status"] == "False"
    assert conditions["NodeClassReady"]["message"] == "EC2NodeClass 'default' is being deleted"
