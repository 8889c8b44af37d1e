"""The live static.provisioning controller (gate StaticCapacity) against the in-memory API server."""

from __future__ import annotations

from ctrl_harness import Rig, running, wait_for
from ctrl_objects import fast_settings, nodeclass, nodepool

from reconciler.kube.api import EVENT, NODEPOOL


def static_pool(replicas: int, **spec: object) -> dict[str, object]:
    pool = nodepool("fixed", **spec)
    pool["spec"]["replicas"] = replicas  # type: ignore[index]
    return pool


async def test_keeps_exactly_the_replicas_follows_scaling_and_never_consolidates() -> None:
    rig = Rig(settings=fast_settings(feature_gates={"StaticCapacity": True}))
    await rig.apply(nodeclass(), static_pool(3))
    async with running(rig):
        assert await wait_for(lambda: rig.converged(instances=3))
        # Empty nodes with consolidateAfter 0s: five disruption passes later they are all still there.
        seen = disruption_passes(rig)
        assert await wait_for(lambda: _at_least(disruption_passes(rig), seen + 5))
        assert len(await rig.cloud.list()) == 3
        # kubectl scale nodepool fixed --replicas 1 (the scale subresource writes spec.replicas)
        await rig.kube.patch(NODEPOOL, "fixed", {"spec": {"replicas": 1}})
        assert await wait_for(lambda: rig.converged(instances=1), timeout=60)
        await rig.kube.patch(NODEPOOL, "fixed", {"spec": {"replicas": 2}})
        assert await wait_for(lambda: rig.converged(instances=2), timeout=60)
    assert rig.metrics.sample("karpenter_nodeclaims_created_total",
                              {"reason": "provisioned", "nodepool": "fixed", "min_values_relaxed": "false"}) == 4.0
    messages = [line["message"] for line in rig.log_lines()]
    assert "provisioning nodeclaims to satisfy replica count" in messages
    assert "deprovisioning nodeclaims to satisfy replica count" in messages


def disruption_passes(rig: Rig) -> float:
    return rig.metrics.sample("controller_runtime_reconcile_total",
                              {"controller": "disruption", "result": "success"}) or 0.0


async def _at_least(value: float, wanted: float) -> bool:
    return value >= wanted


async def test_limits_nodes_caps_a_static_pool_and_is_reported_on_the_pool() -> None:
    rig = Rig(settings=fast_settings(feature_gates={"StaticCapacity": True}))
    await rig.apply(nodeclass(), static_pool(3, limits={"nodes": "2"}))
    async with running(rig):
        assert await wait_for(lambda: rig.converged(instances=2))
        assert await wait_for(lambda: _blocked(rig))
        assert len(await rig.cloud.list()) == 2
    messages = [e["message"] for e in rig.kube.objects(EVENT) if e["reason"] == "StaticCapacityBlocked"]
    assert any("limits.nodes 2 allows 2 of the 3" in m for m in messages)
    assert any("node limit reached (limits.nodes 2; 3 replicas wanted, 2 running)" in m for m in messages)


async def _blocked(rig: Rig) -> bool:
    return any("node limit reached" in e["message"] for e in rig.kube.objects(EVENT)
               if e["reason"] == "StaticCapacityBlocked")


async def test_without_the_gate_the_controller_does_not_run() -> None:
    rig = Rig()
    await rig.apply(nodeclass(), static_pool(2))
    async with running(rig) as reconciler:
        assert "static.provisioning" not in reconciler.loops
        assert await wait_for(lambda: _at_least(disruption_passes(rig), 3))
        assert await rig.cloud.list() == []
