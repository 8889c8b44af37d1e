"""The AWS provider's periodic loops (prices, instance types, launch-template GC) against moto.

Every pass runs for real against an in-process moto server (the Pricing API, which moto
lacks, through botocore's Stubber); time is a ``ManualClock`` and the loops' sleep is
injected, so nothing waits.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto.server import ThreadedMotoServer
from structlog.testing import capture_logs

from reconciler.cloud.aws import tags as owned
from reconciler.cloud.aws.clients import AwsClients
from reconciler.cloud.aws.launchtemplate import LaunchTemplateSpec
from reconciler.cloud.aws.provider import AWSCloudProvider, AWSProviderConfig
from reconciler.cloud.aws.userdata import ClusterInfo
from reconciler.cloud.sim.provider import SimulatedCloud
from reconciler.controllers.aws_provider.refresh_loops import aws_refresh_loops, unneeded_launch_templates
from reconciler.controllers.operator.app import cloud_loops
from reconciler.controllers.operator.manager import Reconciler
from reconciler.controllers.runtime.context import ControllerContext, ManualClock
from reconciler.kube.api import NODECLAIM
from reconciler.kube.memory import MemoryKube
from reconciler.settings import Settings

HOURS_12 = 12 * 3600.0
REGION = "us-east-1"
_clusters = itertools.count(1)
# One botocore session for every provider here: its service models load once, not per test.
_SESSION = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing")


class Stop(Exception):
    """Raised by the injected sleep to end a loop after the passes a test wants."""


class Sleeps:
    def __init__(self, stop_after: int) -> None:
        self.delays: list[float] = []
        self.stop_after = stop_after

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        if len(self.delays) >= self.stop_after:
            raise Stop


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime(2026, 11, 1, 9, tzinfo=UTC))


@pytest.fixture
def provider(moto_url: str, clock: ManualClock) -> Iterator[AWSCloudProvider]:
    config = AWSProviderConfig(
        cluster=ClusterInfo(f"refresh-{next(_clusters)}", "https://example.eks.amazonaws.com", "Y2E="),
        region=REGION,
        endpoint_url=moto_url,
        instance_type_filters=({"Name": "instance-type", "Values": ["m5.*"]},),
        access_key_id="testing",
        secret_access_key="testing",
        retry_mode="standard",
    )
    clients = AwsClients(config.client_options(), session=_SESSION)
    created = AWSCloudProvider(config, clients=clients, now=clock.now, monotonic=clock.monotonic)
    yield created
    created.close()


@pytest.fixture
def ctx(provider: AWSCloudProvider, clock: ManualClock) -> ControllerContext:
    return ControllerContext(MemoryKube(clock=clock.now), provider, Settings(cluster_name=provider.cluster),
                             clock=clock)


def price_item(instance_type: str, usd: str) -> str:
    return json.dumps({
        "product": {"attributes": {"instanceType": instance_type}},
        "terms": {"OnDemand": {"T": {"priceDimensions": {"D": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}}}},
    })


def stub_pricing(provider: AWSCloudProvider, *, failures: int = 0) -> Stubber:
    stub = Stubber(provider.clients.pricing)
    for _ in range(failures):
        stub.add_client_error("get_products", service_error_code="AccessDeniedException", http_status_code=400)
    stub.add_response("get_products", {"PriceList": [price_item("m5.large", "0.1234")], "FormatVersion": "aws_v1"})
    stub.add_response("get_products", {"PriceList": [price_item("m5.metal", "5.5")], "FormatVersion": "aws_v1"})
    stub.activate()
    return stub


# --- prices ------------------------------------------------------------------------------------


async def test_a_price_pass_takes_on_demand_from_the_pricing_api_and_spot_from_price_history(
    ctx: ControllerContext, provider: AWSCloudProvider
) -> None:
    pricing = provider.pricing
    bundled = pricing.on_demand_price("m5.large")
    assert bundled is not None and pricing.spot_price("m5.large", "us-east-1a") == bundled  # spot starts at OD
    stub = stub_pricing(provider)
    loops = aws_refresh_loops(ctx, provider, sleep=Sleeps(1))

    with capture_logs() as logs:
        assert await loops["pricing.ondemand"].run_once() == HOURS_12
        assert await loops["pricing.spot"].run_once() == HOURS_12
    stub.assert_no_pending_responses()
    assert pricing.on_demand_price("m5.large") == 0.1234 and pricing.on_demand_price("m5.metal") == 5.5
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=provider.config.endpoint_url,
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    history = ec2.describe_spot_price_history(InstanceTypes=["m5.large"], AvailabilityZone="us-east-1a")
    assert pricing.spot_price("m5.large", "us-east-1a") == float(history["SpotPriceHistory"][0]["SpotPrice"])
    assert pricing.staleness("on-demand") == 0 and pricing.staleness("spot") == 0
    lines = {line["event"]: line for line in logs}
    assert lines["refreshed on-demand prices"]["instance_types"] == 2
    assert lines["refreshed spot prices"]["offerings"] > 0


async def test_a_failing_refresh_is_retried_with_backoff_and_then_waits_the_interval(
    ctx: ControllerContext, provider: AWSCloudProvider
) -> None:
    bundled = provider.pricing.on_demand_price("m5.large")
    stub = stub_pricing(provider, failures=2)
    sleeps = Sleeps(stop_after=3)
    loop = aws_refresh_loops(ctx, provider, sleep=sleeps)["pricing.ondemand"]
    with capture_logs() as logs, pytest.raises(Stop):
        await loop.run()
    assert sleeps.delays == [15.0, 30.0, HOURS_12]  # two failures back off, the success waits 12 h
    stub.assert_no_pending_responses()
    assert provider.pricing.on_demand_price("m5.large") == 0.1234 != bundled
    failures = [line for line in logs if line["event"] == "refreshed on-demand prices failed"]
    assert [(f["failures"], f["retry_in"], f["log_level"]) for f in failures] == [(1, 15.0, "warning"),
                                                                                  (2, 30.0, "warning")]
    assert "AccessDeniedException" in failures[0]["error"] and loop.failures == 0


def test_isolated_vpcs_and_govcloud_keep_the_bundled_on_demand_prices(
    ctx: ControllerContext, provider: AWSCloudProvider
) -> None:
    assert "pricing.ondemand" not in aws_refresh_loops(ctx, provider, isolated_vpc=True)
    assert "pricing.spot" in aws_refresh_loops(ctx, provider, isolated_vpc=True)  # EC2 is reachable


# --- instance types ----------------------------------------------------------------------------


async def test_instance_types_are_refreshed_every_12_hours_after_start_up(
    ctx: ControllerContext, provider: AWSCloudProvider
) -> None:
    seen_before_first_pass: list[int] = []

    class Record(Sleeps):
        async def __call__(self, seconds: float) -> None:
            seen_before_first_pass.append(len(provider.instance_type_provider.infos))
            await super().__call__(seconds)

    sleeps = Record(stop_after=2)
    with pytest.raises(Stop):
        await aws_refresh_loops(ctx, provider, sleep=sleeps)["instancetype.refresh"].run()
    assert sleeps.delays == [HOURS_12, HOURS_12]
    assert seen_before_first_pass[0] == 0  # start-up leaves the first fetch to the provisioning path
    assert "m5.large" in provider.instance_type_provider.infos


# --- launch templates --------------------------------------------------------------------------


def template(provider: AWSCloudProvider, nodeclass: str, variant: str) -> LaunchTemplateSpec:
    return LaunchTemplateSpec(
        image_id="ami-12c6146b",
        user_data=f"#!/bin/bash\n# {variant}\n",
        instance_profile="profile",
        security_group_ids=("sg-1",),
        block_device_mappings=(),
        metadata_options={"HttpTokens": "required"},
        tags=owned.launch_tags(provider.cluster, "pool", nodeclass),
    )


def manifest(kind: str, name: str, **body: Any) -> dict[str, Any]:
    group = "karpenter.k8s.aws/v1" if kind == "EC2NodeClass" else "karpenter.sh/v1"
    return {"apiVersion": group, "kind": kind, "metadata": {"name": name}, **body}


def claim(name: str, nodeclass: str, provider_id: str = "") -> dict[str, Any]:
    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": nodeclass}
    status = {"providerID": provider_id} if provider_id else {}
    return manifest("NodeClaim", name, spec={"nodeClassRef": ref}, status=status)


async def test_unneeded_launch_templates_are_deleted_and_needed_ones_stay(
    ctx: ControllerContext, provider: AWSCloudProvider, clock: ManualClock
) -> None:
    kube = ctx.kube
    assert isinstance(kube, MemoryKube)
    kube.load([
        manifest("EC2NodeClass", "default"), manifest("EC2NodeClass", "busy"),
        claim("default-a", "default", "aws:///us-east-1a/i-0123"), claim("busy-b", "busy"),  # busy-b: launching
    ])
    templates = provider.launch_templates
    used = await templates.ensure(template(provider, "default", "used"))
    idle = await templates.ensure(template(provider, "default", "idle"))
    orphaned = await templates.ensure(template(provider, "deleted", "orphaned"))
    launching = await templates.ensure(template(provider, "busy", "launching"))
    ec2 = provider.clients.ec2
    ours = {owned.EKS_CLUSTER_NAME_TAG: provider.cluster}
    ec2.create_launch_template(  # a user's own template carrying the cluster tag: not Adze's to delete
        LaunchTemplateName="team-template", LaunchTemplateData={"ImageId": "ami-12c6146b"},
        TagSpecifications=owned.tag_specifications(["launch-template"], ours),
    )
    other_cluster = "karpenter.k8s.aws/another-cluster"
    ec2.create_launch_template(
        LaunchTemplateName=other_cluster, LaunchTemplateData={"ImageId": "ami-12c6146b"},
        TagSpecifications=owned.tag_specifications(["launch-template"], {owned.EKS_CLUSTER_NAME_TAG: "another"}),
    )

    ours_and_others = {used, idle, orphaned, launching, "team-template", other_cluster}

    def remaining() -> set[str]:
        # Asked by name: the moto server is shared by the session, other tests' templates are not our business.
        present = set()
        for name in ours_and_others:
            try:
                ec2.describe_launch_templates(LaunchTemplateNames=[name])
            except ec2.exceptions.ClientError:
                continue
            present.add(name)
        return present

    gc = aws_refresh_loops(ctx, provider, sleep=Sleeps(1))["launchtemplate.garbagecollection"]
    clock.advance(120)  # past the 1-min template cache: nothing has been used lately...
    await templates.ensure(template(provider, "default", "used"))  # ...except this one
    with capture_logs() as logs:
        assert await gc.run_once() == 300
    assert remaining() == {used, idle, launching, "team-template", other_cluster}  # only the orphan went
    deleted = [line for line in logs if line["event"] == "deleted launch template"]
    assert [(d["name"], d["reason"]) for d in deleted] == [(orphaned, "EC2NodeClass 'deleted' no longer exists")]

    clock.advance(300)
    await templates.ensure(template(provider, "default", "used"))  # still launching with it
    await gc.run_once()
    assert remaining() == {used, launching, "team-template", other_cluster}  # idle for a whole pass: gone

    await kube.patch(NODECLAIM, "busy-b", {"status": {"providerID": "aws:///us-east-1a/i-0456"}}, subresource="status")
    clock.advance(300)
    await gc.run_once()  # the launch is over: first seen idle now
    clock.advance(300)
    await gc.run_once()
    assert remaining() == {"team-template", other_cluster}  # "used" went idle too


async def test_profiles_of_node_classes_that_are_gone_are_collected_unless_an_instance_uses_them(
    ctx: ControllerContext, provider: AWSCloudProvider
) -> None:
    kube = ctx.kube
    assert isinstance(kube, MemoryKube)
    kube.load([{**manifest("EC2NodeClass", "live"), "metadata": {"name": "live", "uid": "uid-live"}}])
    iam, ec2 = provider.clients.iam, provider.clients.ec2
    iam.create_role(RoleName=f"{provider.cluster}-node", AssumeRolePolicyDocument="{}")

    def profile(uid: str) -> str:
        name = f"{provider.cluster}_{uid}"
        iam.create_instance_profile(InstanceProfileName=name, Path=f"/karpenter/{REGION}/{provider.cluster}/{uid}/")
        iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=f"{provider.cluster}-node")
        return name

    live, gone, used = profile("uid-live"), profile("uid-gone"), profile("uid-used")
    outside = f"{provider.cluster}_elsewhere"
    iam.create_instance_profile(InstanceProfileName=outside, Path="/team/")
    ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="m5.large",
                      IamInstanceProfile={"Name": used}, TagSpecifications=owned.tag_specifications(
                          ["instance"], owned.launch_tags(provider.cluster, "pool", "gone-class")))

    gc = aws_refresh_loops(ctx, provider, sleep=Sleeps(1))["instanceprofile.garbagecollection"]
    with capture_logs() as logs:
        assert await gc.run_once() == 30 * 60
    assert [line["name"] for line in logs if line["event"] == "deleted instance profile"] == [gone]
    names = {p["InstanceProfileName"] for p in iam.list_instance_profiles()["InstanceProfiles"]}
    assert {live, used, outside} <= names and gone not in names
    assert "instanceprofile.garbagecollection" not in aws_refresh_loops(ctx, provider, isolated_vpc=True)


def test_template_verdicts_spare_launching_node_classes_and_wait_a_grace_period() -> None:
    verdicts = unneeded_launch_templates(
        {"karpenter.k8s.aws/a": "default", "karpenter.k8s.aws/b": "busy", "karpenter.k8s.aws/c": "gone",
         "mine": "default"},
        nodeclasses={"default", "busy"}, launching={"busy"}, first_seen={}, now=100.0, grace=300.0,
    )
    assert verdicts.unneeded == {"karpenter.k8s.aws/c": "EC2NodeClass 'gone' no longer exists"}
    assert verdicts.first_seen == {"karpenter.k8s.aws/a": 100.0}
    later = unneeded_launch_templates({"karpenter.k8s.aws/a": "default"}, {"default"}, set(), verdicts.first_seen,
                                      now=400.0, grace=300.0)
    assert later.unneeded == {"karpenter.k8s.aws/a": "unused"}


# --- wiring ------------------------------------------------------------------------------------


def test_the_live_reconciler_schedules_the_aws_loops_for_the_aws_cloud_only(
    ctx: ControllerContext, provider: AWSCloudProvider, clock: ManualClock
) -> None:
    settings = Settings(cluster_name=provider.cluster, aws_region=REGION)
    build = cloud_loops(settings, provider, {})
    assert build is not None
    reconciler = Reconciler(ctx, extra_loops=build(ctx))
    expected = {"pricing.ondemand", "pricing.spot", "instancetype.refresh", "launchtemplate.garbagecollection",
                "instanceprofile.garbagecollection"}
    assert expected <= set(reconciler.loops) and "interruption" not in reconciler.loops

    isolated = cloud_loops(settings, provider, {"ISOLATED_VPC": "true"})
    assert isolated is not None and "pricing.ondemand" not in isolated(ctx)
    queued = cloud_loops(settings.with_overrides(interruption_queue="adze-queue"), provider, {})
    assert queued is not None and "interruption" in queued(ctx)
    assert cloud_loops(settings, SimulatedCloud([], clock=clock.now), {}) is None
