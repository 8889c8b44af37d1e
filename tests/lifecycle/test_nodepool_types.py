"""``instance_types_by_nodepool``: the one place the live controllers and the simulator get a NodePool's types."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.lifecycle.nodepool_types import instance_types_by_nodepool
from reconciler.state.cluster import ClusterState


def nodepool(name: str, nodeclass: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": nodeclass},
                "requirements": []}}}}


def nodeclass(name: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name}, "spec": {}}


class Cloud:
    def __init__(self, failing: str = "") -> None:
        self.asked: list[str | None] = []
        self.failing = failing

    async def instance_types(self, nodeclass: Mapping[str, Any] | None) -> list[Any]:
        name = None if nodeclass is None else nodeclass["metadata"]["name"]
        self.asked.append(name)
        if name == self.failing:
            raise RuntimeError("DescribeInstanceTypes: throttled")
        return [f"{name}-type"]


def state(*manifests: dict[str, Any]) -> ClusterState:
    cluster = ClusterState()
    for manifest in manifests:
        cluster.upsert(manifest)
    return cluster


async def test_a_pool_whose_nodeclass_is_missing_gets_no_types_and_the_cloud_is_not_asked() -> None:
    cloud = Cloud()
    found = await instance_types_by_nodepool(
        cloud, state(nodeclass("default"), nodepool("a", "default"), nodepool("b", "default"),
                     nodepool("orphan", "absent")))  # type: ignore[arg-type]
    assert found == {"a": ["default-type"], "b": ["default-type"], "orphan": []}
    assert cloud.asked == ["default"]  # once per EC2NodeClass, never for a missing one


async def test_a_cloud_error_leaves_only_that_nodeclass_pools_without_types() -> None:
    cloud = Cloud(failing="flaky")
    found = await instance_types_by_nodepool(
        cloud, state(nodeclass("default"), nodeclass("flaky"), nodepool("a", "default"),
                     nodepool("b", "flaky")))  # type: ignore[arg-type]
    assert found == {"a": ["default-type"], "b": []}
