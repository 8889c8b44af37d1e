"""A NodeClaim planned with NodeOverlay prices launches by them on AWS: CreateFleet overrides carry the overlaid
price as ``Priority`` and the fleet uses ``prioritized`` / ``capacity-optimized-prioritized`` (upstream)."""

from __future__ import annotations

from aws_harness import Recorder

from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.cloud.aws.provider import AWSCloudProvider
from reconciler.cloud.overlay import Overlay
from reconciler.cloud.types import LaunchRequest
from reconciler.model import labels as wk
from reconciler.model.nodepool import NodePool
from reconciler.scheduling.overlay_evaluation import evaluate

POOL = NodePool.from_manifest({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
                               "spec": {"template": {"spec": {"requirements": [], "nodeClassRef": {
                                   "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}})


def request(capacity_type: str, *, overlaid: bool) -> LaunchRequest:
    return LaunchRequest(nodeclaim=f"nc-{capacity_type}-{overlaid}", nodepool="default", nodeclass="default",
                         instance_types=["c5.large", "m5.large"], capacity_types=[capacity_type],
                         price_overlaid=overlaid)


async def _publish_m5_discount(aws: OfflineAWS, provider: AWSCloudProvider) -> None:
    types = await provider.instance_types(aws.nodeclass())
    m5 = Overlay.from_manifest({"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
                                "metadata": {"name": "m5"}, "spec": {"requirements": [
                                    {"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]}],
                                    "price": "0.001"}})
    provider.price_overlays = evaluate([m5], {"default": POOL}, {"default": types})


async def test_an_overlaid_claim_launches_by_the_overlay_prices(aws: OfflineAWS, provider: AWSCloudProvider) -> None:
    await _publish_m5_discount(aws, provider)
    recorder = Recorder().attach(provider)
    instance = await provider.create(request("on-demand", overlaid=True), aws.nodeclass())
    assert instance.instance_type == "m5.large"  # c5.large lists cheaper; the overlay says otherwise
    [fleet] = recorder.of("CreateFleet")
    assert fleet["OnDemandOptions"] == {"AllocationStrategy": "prioritized"}
    overrides = [o for config in fleet["LaunchTemplateConfigs"] for o in config["Overrides"]]
    assert overrides[0]["InstanceType"] == "m5.large" and overrides[0]["Priority"] == 0.001
    await provider.create(request("spot", overlaid=True), aws.nodeclass())
    assert recorder.of("CreateFleet")[1]["SpotOptions"] == {"AllocationStrategy": "capacity-optimized-prioritized"}


async def test_a_claim_planned_without_overlays_launches_by_list_prices(aws: OfflineAWS,
                                                                         provider: AWSCloudProvider) -> None:
    await _publish_m5_discount(aws, provider)
    recorder = Recorder().attach(provider)
    instance = await provider.create(request("on-demand", overlaid=False), aws.nodeclass())
    assert instance.instance_type == "c5.large"
    [fleet] = recorder.of("CreateFleet")
    assert fleet["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    assert all("Priority" not in o for config in fleet["LaunchTemplateConfigs"] for o in config["Overrides"])
