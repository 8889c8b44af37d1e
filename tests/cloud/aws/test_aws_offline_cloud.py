"""``open_moto_cloud`` (what ``simulate --cloud moto`` runs on) and full, unfiltered discovery."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from aws_harness import make_provider

from reconciler.cloud.aws.offline import OfflineAWS, open_moto_cloud
from reconciler.cloud.types import InsufficientCapacityError, LaunchRequest


async def test_moto_cloud_launches_with_real_data_and_honours_capacity_shortages() -> None:
    clock = datetime(2026, 1, 1, tzinfo=UTC)
    cloud = open_moto_cloud(
        cluster="sim-demo",
        zones=("us-east-1a", "us-east-1b"),
        instance_types=("m5.large", "c6g.large"),
        now=lambda: clock,
    )
    try:
        nodeclass = cloud.env.nodeclass()
        types = {t.name: t for t in await cloud.provider.instance_types(nodeclass)}
        assert set(types) == {"m5.large", "c6g.large"}
        assert {o.zone for t in types.values() for o in t.offerings} == {"us-east-1a", "us-east-1b"}
        for zone in ("us-east-1a", "us-east-1b"):
            cloud.mark_unavailable("c6g.large", zone, "spot")
        request = LaunchRequest(
            nodeclaim="a",
            nodepool="default",
            nodeclass="default",
            instance_types=["c6g.large"],
            capacity_types=["spot"],
        )
        with pytest.raises(InsufficientCapacityError):
            await cloud.provider.create(request, nodeclass)
        request.capacity_types = ["spot", "on-demand"]
        instance = await cloud.provider.create(request, nodeclass)
        assert (instance.instance_type, instance.capacity_type) == ("c6g.large", "on-demand")
        assert instance.launched_at == clock
        # The security groups of the launch template reach the instance, so nothing looks drifted.
        assert await cloud.provider.is_drifted(instance, nodeclass) is None
    finally:
        cloud.close()


async def test_full_discovery_prices_every_bundled_type(moto_env: OfflineAWS) -> None:
    aws = moto_env.for_cluster("full-discovery")
    provider = make_provider(aws, instance_type_filters=())
    try:
        types = {t.name: t for t in await provider.instance_types(aws.nodeclass())}
    finally:
        provider.close()
    assert len(types) > 1000
    priced = [t for t in types.values() if any(o.available for o in t.offerings)]
    assert len(priced) > 700
    assert types["m5.large"].allocatable["cpu"] == 1930
    assert types["p4d.24xlarge"].capacity["nvidia.com/gpu"] == 8000
