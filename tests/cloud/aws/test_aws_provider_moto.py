"""The AWS provider against moto: NodeClass resolution, launch, ICE, throttling, delete, drift, GC."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import pytest
import yaml
from aws_harness import FaultPlan, Recorder

from reconciler.cloud.aws import tags as owned
from reconciler.cloud.aws.gc import collect_orphans
from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.cloud.aws.provider import AWSCloudProvider
from reconciler.cloud.types import (
    InstanceNotFoundError,
    InsufficientCapacityError,
    LaunchRequest,
    NodeClassNotReadyError,
)
from reconciler.model import labels as wk


def ownership(cluster: str) -> dict[str, str]:
    return {
        f"kubernetes.io/cluster/{cluster}": "owned",
        "eks:eks-cluster-name": cluster,
        "karpenter.sh/nodepool": "default",
        "karpenter.k8s.aws/ec2nodeclass": "default",
    }


def request(name: str = "nc-1", types: tuple[str, ...] = ("m5.large", "c5.large", "m6i.large"), **kw: object):
    return LaunchRequest(
        nodeclaim=name, nodepool="default", nodeclass="default", instance_types=list(types), **kw
    )


def cheapest(provider: AWSCloudProvider, types: list, names: tuple[str, ...], capacity_type: str) -> tuple:
    by_name = {t.name: t for t in types}
    options = [
        (o.price, name, o.zone)
        for name in names
        for o in by_name[name].offerings
        if o.available and o.capacity_type == capacity_type
    ]
    return min(options)


async def test_nodeclass_status_resolves_subnets_groups_amis_and_profile(aws: OfflineAWS, provider) -> None:
    status = await provider.nodeclass_status(aws.nodeclass())
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions == dict.fromkeys(
        [
            "SubnetsReady",
            "SecurityGroupsReady",
            "AMIsReady",
            "InstanceProfileReady",
            "PlacementGroupReady",
            "ValidationSucceeded",
            "CapacityReservationsReady",  # the ReservedCapacity gate is on by default
            "Ready",
        ],
        "True",
    )
    # Subnets are sorted by free addresses: the /20 first, the /24 last.
    assert [s["zone"] for s in status["subnets"]] == ["us-east-1a", "us-east-1b", "us-east-1c"]
    assert status["subnets"][0]["zoneID"].startswith("use1-az")
    assert [g["id"] for g in status["securityGroups"]] == [aws.security_group_id]
    ami_ids = {a["id"] for a in status["amis"]}
    assert aws.ami_ids["amd64/standard"] in ami_ids and aws.ami_ids["arm64/standard"] in ami_ids
    iam = aws.client("iam")
    profile = iam.get_instance_profile(InstanceProfileName=status["instanceProfile"])["InstanceProfile"]
    assert [r["RoleName"] for r in profile["Roles"]] == [aws.node_role]
    assert profile["Path"].startswith(f"/karpenter/us-east-1/{aws.cluster}/")
    profile_tags = {t["Key"]: t["Value"] for t in profile["Tags"]}
    assert profile_tags[f"kubernetes.io/cluster/{aws.cluster}"] == "owned"
    assert profile_tags["topology.kubernetes.io/region"] == "us-east-1"
    assert profile_tags["karpenter.k8s.aws/ec2nodeclass"] == "default"


async def test_unresolvable_nodeclass_is_not_ready_and_create_refuses(aws: OfflineAWS, provider) -> None:
    broken = aws.nodeclass(
        subnetSelectorTerms=[{"tags": {"karpenter.sh/discovery": "nobody"}}],
        tags={"eks:eks-cluster-name": "x"},
    )
    status = await provider.nodeclass_status(broken)
    conditions = {c["type"]: (c["status"], c["message"]) for c in status["conditions"]}
    assert conditions["Ready"][0] == "False"
    assert "spec.tags.eks:eks-cluster-name" in conditions["ValidationSucceeded"][1]
    with pytest.raises(NodeClassNotReadyError, match="not ready"):
        await provider.create(request(), broken)
    with pytest.raises(NodeClassNotReadyError):
        await provider.create(request(), None)
    missing_subnets = aws.nodeclass(subnetSelectorTerms=[{"tags": {"karpenter.sh/discovery": "nobody"}}])
    status = await provider.nodeclass_status(missing_subnets)
    message = next(c["message"] for c in status["conditions"] if c["type"] == "SubnetsReady")
    assert "spec.subnetSelectorTerms: no subnet matches" in message


async def test_instance_types_priced_and_limited_to_subnet_zones(aws: OfflineAWS, provider) -> None:
    types = {t.name: t for t in await provider.instance_types(aws.nodeclass())}
    m5 = types["m5.large"]
    assert m5.allocatable["cpu"] == 1930
    zones = {o.zone for o in m5.offerings}
    assert zones <= {"us-east-1a", "us-east-1b", "us-east-1c"}
    on_demand = {o.price for o in m5.offerings if o.capacity_type == "on-demand"}
    assert on_demand == {0.096}
    assert all(o.available for o in m5.offerings)
    # g5 needs the NVIDIA AMI variant, which the alias resolved, so it is launchable; labels flow through.
    assert types["g5.xlarge"].labels[wk.INSTANCE_GPU_MANUFACTURER] == "nvidia"
    assert any(o.available for o in types["g5.xlarge"].offerings)


async def test_create_launches_cheapest_spot_with_owned_launch_template(aws: OfflineAWS, provider) -> None:
    recorder = Recorder().attach(provider)
    nodeclass = aws.nodeclass()
    types = await provider.instance_types(nodeclass)
    names = ("m5.large", "c5.large", "m6i.large")
    price, best_type, best_zone = cheapest(provider, types, names, "spot")
    instance = await provider.create(
        request(taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}], labels={"team": "a"}),
        nodeclass,
    )
    assert (instance.instance_type, instance.zone, instance.capacity_type) == (best_type, best_zone, "spot")
    assert instance.price == price
    assert instance.provider_id == f"aws:///{best_zone}/{instance.provider_id.rsplit('/', 1)[1]}"
    assert instance.labels[wk.ZONE_ID].startswith("use1-az")

    fleet = recorder.of("CreateFleet")[0]
    assert fleet["Type"] == "instant"
    assert fleet["SpotOptions"] == {"AllocationStrategy": "price-capacity-optimized"}
    assert fleet["TargetCapacitySpecification"] == {
        "TotalTargetCapacity": 1,
        "DefaultTargetCapacityType": "spot",
    }
    overrides = [o for config in fleet["LaunchTemplateConfigs"] for o in config["Overrides"]]
    assert {o["InstanceType"] for o in overrides} == set(names)
    # One subnet per zone, the zone's subnet with most free IPs, zone stated for error mapping.
    assert {(o["AvailabilityZone"], o["SubnetId"]) for o in overrides} <= set(
        (zone, subnet) for zone, subnet in aws.subnet_ids.items()
    )

    # The launch template as stored in EC2 (moto does not apply most of it to instances; check it directly).
    ec2 = aws.client("ec2")
    template_name = fleet["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"]["LaunchTemplateName"]
    assert template_name.startswith("karpenter.k8s.aws/")
    version = ec2.describe_launch_template_versions(LaunchTemplateName=template_name)[
        "LaunchTemplateVersions"
    ][0]
    data = version["LaunchTemplateData"]
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 1
    assert data["SecurityGroupIds"] == [aws.security_group_id]
    assert data["IamInstanceProfile"]["Name"].startswith(f"{aws.cluster}_")
    assert data["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"] == 20
    user_data = base64.b64decode(data["UserData"]).decode()
    assert "kind: NodeConfig" in user_data and "maxPods:" in user_data
    nodeconfig = yaml.safe_load(user_data.split("Content-Type: application/node.eks.aws\n\n")[1].split("--//")[0])
    assert nodeconfig["spec"]["kubelet"]["config"]["registerWithTaints"] == [
        {"key": "dedicated", "value": "db", "effect": "NoSchedule"},
        {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
    ]
    assert "team=a" in user_data

    described = ec2.describe_instances(InstanceIds=[instance.provider_id.rsplit("/", 1)[1]])
    item = described["Reservations"][0]["Instances"][0]
    tags = {t["Key"]: t["Value"] for t in item["Tags"]}
    assert ownership(aws.cluster).items() <= tags.items()
    assert tags["karpenter.sh/nodeclaim"] == "nc-1"


async def test_every_creating_ec2_request_carries_the_iam_ownership_tags(aws: OfflineAWS, provider) -> None:
    recorder = Recorder().attach(provider)
    nodeclass = aws.nodeclass(tags={"team": "payments"})
    await provider.create(request("nc-a"), nodeclass)
    await provider.create(request("nc-b", capacity_types=["on-demand"]), nodeclass)
    creating = [
        (name, params)
        for _, name, params in recorder.calls
        if name in ("CreateFleet", "CreateLaunchTemplate", "RunInstances", "CreateTags")
    ]
    # RunInstances only as the NodeClass validation's dry run.
    assert {name for name, _ in creating} == {"CreateFleet", "CreateLaunchTemplate", "RunInstances"}
    assert all(p.get("DryRun") for name, p in creating if name == "RunInstances")
    required = {f"kubernetes.io/cluster/{aws.cluster}": "owned", "eks:eks-cluster-name": aws.cluster}
    for name, params in creating:
        specs = params["TagSpecifications"]
        assert specs, name
        for spec in specs:
            tags = {t["Key"]: t["Value"] for t in spec["Tags"]}
            assert required.items() <= tags.items(), (name, spec["ResourceType"])
            # The validation carries the key with no pool (as upstream's); launches carry their pool.
            assert "karpenter.sh/nodepool" in tags, (name, spec["ResourceType"])
            assert tags["karpenter.sh/nodepool"] or params.get("DryRun") or name == "CreateLaunchTemplate"
            assert tags["team"] == "payments"
    fleet_types = {
        spec["ResourceType"] for _, p in creating if _ == "CreateFleet" and not p.get("DryRun")
        for spec in p["TagSpecifications"]
    }
    assert fleet_types == {"instance", "volume", "fleet"}
    # Deleting is allowed only on resources that carry the ownership tags (resource-tag conditions).
    for instance in await provider.list():
        await provider.delete(instance.provider_id)
    ec2 = aws.client("ec2")
    terminated = [i for params in recorder.of("TerminateInstances") for i in params["InstanceIds"]]
    assert len(terminated) == 2
    for reservation in ec2.describe_instances(InstanceIds=terminated)["Reservations"]:
        for item in reservation["Instances"]:
            tags = {t["Key"]: t["Value"] for t in item["Tags"]}
            assert tags[f"kubernetes.io/cluster/{aws.cluster}"] == "owned" and tags.get(
                "karpenter.sh/nodepool"
            )
    for _, params in creating:
        if "LaunchTemplateData" in params:
            inner = params["LaunchTemplateData"]["TagSpecifications"]
            assert all(required.items() <= {t["Key"]: t["Value"] for t in s["Tags"]}.items() for s in inner)


async def test_create_is_idempotent_per_nodeclaim(aws: OfflineAWS, provider) -> None:
    first = await provider.create(request(), aws.nodeclass())
    again = await provider.create(request(), aws.nodeclass())
    assert again.provider_id == first.provider_id
    assert len(await provider.list()) == 1


def notin_claim(name: str, types: tuple[str, ...], zone: str) -> dict:
    """A NodeClaim as the scheduler writes it for a pod with ``zone NotIn [zone]`` and ``capacity-type NotIn
    [spot]``: NotIn alone, no In list for either key."""
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {wk.NODEPOOL: "default"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": wk.INSTANCE_TYPE, "operator": "In", "values": list(types)},
                {"key": wk.ZONE, "operator": "NotIn", "values": [zone]},
                {"key": wk.CAPACITY_TYPE, "operator": "NotIn", "values": ["spot"]},
            ],
        },
    }


async def test_a_claims_notin_alone_keeps_its_zone_and_capacity_type_out_of_the_fleet(
    aws: OfflineAWS, provider
) -> None:
    recorder = Recorder().attach(provider)
    nodeclass = aws.nodeclass()
    types = await provider.instance_types(nodeclass)
    names = ("m5.large", "c5.large", "m6i.large")
    _, _, cheapest_on_demand_zone = cheapest(provider, types, names, "on-demand")
    launch = LaunchRequest.from_nodeclaim(notin_claim("nc-notin", names, cheapest_on_demand_zone))
    instance = await provider.create(launch, nodeclass)
    assert instance.capacity_type == "on-demand"
    assert instance.zone != cheapest_on_demand_zone
    fleet = recorder.of("CreateFleet")[0]
    assert fleet["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"
    overrides = [o for config in fleet["LaunchTemplateConfigs"] for o in config["Overrides"]]
    assert overrides and cheapest_on_demand_zone not in {o["AvailabilityZone"] for o in overrides}


async def test_ice_offerings_are_skipped_cached_and_reported(
    aws: OfflineAWS, provider, faults: FaultPlan
) -> None:
    nodeclass = aws.nodeclass()
    types = await provider.instance_types(nodeclass)
    names = ("m5.large", "c5.large")
    _, best_type, best_zone = cheapest(provider, types, names, "spot")
    faults.ice.add(("spot", best_type, best_zone))
    instance = await provider.create(request(types=names), nodeclass)
    assert (instance.instance_type, instance.zone) != (best_type, best_zone)
    assert provider.unavailable.is_unavailable("spot", best_type, best_zone)
    refreshed = {t.name: t for t in await provider.instance_types(nodeclass)}
    offering = next(
        o for o in refreshed[best_type].offerings if o.zone == best_zone and o.capacity_type == "spot"
    )
    assert not offering.available


async def test_all_offerings_ice_raises_insufficient_capacity_then_on_demand(
    aws: OfflineAWS, provider, faults
) -> None:
    nodeclass = aws.nodeclass()
    for zone in aws.subnet_ids:
        faults.ice.add(("spot", "m5.large", zone))
    with pytest.raises(InsufficientCapacityError) as caught:
        await provider.create(request(types=("m5.large",), capacity_types=["spot"]), nodeclass)
    assert {o[1] for o in caught.value.offerings} == set(aws.subnet_ids)
    assert len(await provider.list()) == 0
    # The provisioner re-plans; with spot exhausted the same NodeClaim lands on on-demand.
    instance = await provider.create(request(types=("m5.large",)), nodeclass)
    assert instance.capacity_type == "on-demand"
    assert faults.fleet_calls == 2


async def test_partial_fleet_errors_mark_offerings_even_when_something_launched(
    aws, provider, faults
) -> None:
    nodeclass = aws.nodeclass()
    faults.fleet_errors[("spot", "c5.large", "us-east-1b")] = "InsufficientFreeAddressesInSubnet"
    faults.fleet_errors[("spot", "m5.large", "us-east-1a")] = "MaxSpotInstanceCountExceeded"
    faults.fleet_errors[("spot", "m6i.large", "us-east-1c")] = "InvalidParameterValue"
    instance = await provider.create(request(), nodeclass)
    assert instance.provider_id
    assert provider.unavailable.is_unavailable("spot", "c5.large", "us-east-1b")
    assert provider.unavailable.is_unavailable("spot", "m5.large", "us-east-1a")
    assert provider.unavailable.is_subnet_unavailable(aws.subnet_ids["us-east-1b"])
    assert not provider.unavailable.is_unavailable("spot", "m6i.large", "us-east-1c")  # not a capacity error


async def test_missing_spot_service_linked_role_falls_back_to_on_demand(aws, provider, faults) -> None:
    faults.whole_call_errors["CreateFleet"] = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"
    with pytest.raises(InsufficientCapacityError, match="service-linked role"):
        await provider.create(request(), aws.nodeclass())
    faults.whole_call_errors.clear()
    assert provider.unavailable.is_unavailable("spot", "m5.large", "us-east-1a")
    instance = await provider.create(request(), aws.nodeclass())
    assert instance.capacity_type == "on-demand"


async def test_throttled_calls_are_retried_without_duplicate_launches(aws, provider, faults) -> None:
    faults.throttle = 0.5
    nodeclass = aws.nodeclass()
    launched = [await provider.create(request(f"nc-{i}"), nodeclass) for i in range(4)]
    assert faults.throttled > 0
    instances = await provider.list()
    assert len(instances) == 4 == len({i.provider_id for i in launched})


async def test_launch_template_deleted_behind_our_back_is_recreated(aws, provider) -> None:
    nodeclass = aws.nodeclass()
    recorder = Recorder().attach(provider)
    await provider.create(request("nc-1"), nodeclass)
    name = recorder.of("CreateFleet")[0]["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"][
        "LaunchTemplateName"
    ]
    aws.client("ec2").delete_launch_template(LaunchTemplateName=name)
    await provider.create(request("nc-2"), nodeclass)
    assert len(recorder.of("CreateFleet")) == 3  # the stale attempt, then the retry
    assert [c["LaunchTemplateName"] for c in recorder.of("CreateLaunchTemplate")].count(name) == 2


async def test_delete_get_list(aws, provider) -> None:
    instance = await provider.create(request(), aws.nodeclass())
    fetched = await provider.get(instance.provider_id)
    assert (fetched.instance_type, fetched.nodeclaim, fetched.nodepool) == (
        instance.instance_type,
        "nc-1",
        "default",
    )
    assert [i.provider_id for i in await provider.list()] == [instance.provider_id]
    await provider.delete(instance.provider_id)
    with pytest.raises(InstanceNotFoundError):
        await provider.get(instance.provider_id)
    with pytest.raises(InstanceNotFoundError):
        await provider.delete(instance.provider_id)
    with pytest.raises(InstanceNotFoundError):
        await provider.delete("aws:///us-east-1a/i-0123456789abcdef0")
    assert await provider.list() == []


async def test_drift_for_ami_security_groups_and_subnets(aws: OfflineAWS, provider) -> None:
    nodeclass = aws.nodeclass()
    instance = await provider.create(request(types=("m5.large",)), nodeclass)
    ec2 = aws.client("ec2")
    instance_id = instance.provider_id.rsplit("/", 1)[1]
    # moto puts fleet instances in the default group; put it where the launch template said.
    ec2.modify_instance_attribute(InstanceId=instance_id, Groups=[aws.security_group_id])
    assert await provider.is_drifted(instance, nodeclass) is None

    other_group = ec2.create_security_group(GroupName="other", Description="x")["GroupId"]
    assert (
        await provider.is_drifted(instance, aws.nodeclass(securityGroupSelectorTerms=[{"id": other_group}]))
        == "SecurityGroupDrift"
    )

    subnet_ids = [s for z, s in aws.subnet_ids.items() if z != instance.zone]
    only_others = aws.nodeclass(subnetSelectorTerms=[{"id": s} for s in subnet_ids])
    assert await provider.is_drifted(instance, only_others) == "SubnetDrift"

    pinned = aws.nodeclass(
        amiSelectorTerms=[{"id": aws.ami_ids["arm64/standard"]}, {"id": aws.ami_ids["amd64/nvidia"]}]
    )
    assert await provider.is_drifted(instance, pinned) == "AMIDrift"


async def test_orphans_older_than_30s_are_garbage_collected(aws: OfflineAWS, provider) -> None:
    nodeclass = aws.nodeclass()
    kept = await provider.create(request("kept"), nodeclass)
    orphan = await provider.create(request("orphan"), nodeclass)
    nodeclaims = [{"metadata": {"name": "kept"}, "status": {"providerID": kept.provider_id}}]
    now = datetime.now(UTC)
    assert await collect_orphans(provider, nodeclaims, now) == []  # too young
    collected = await collect_orphans(provider, nodeclaims, now + timedelta(seconds=31))
    assert collected == [orphan.provider_id]
    assert [i.provider_id for i in await provider.list()] == [kept.provider_id]


async def test_unowned_instances_are_invisible_to_list_and_gc(aws: OfflineAWS, provider) -> None:
    ec2 = aws.client("ec2")
    ec2.run_instances(
        ImageId=aws.ami_ids["amd64/standard"],
        MinCount=1,
        MaxCount=1,
        InstanceType="m5.large",
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": owned.EKS_CLUSTER_NAME_TAG, "Value": aws.cluster}]}
        ],
    )
    assert await provider.list() == []
    assert await collect_orphans(provider, [], datetime.now(UTC) + timedelta(hours=1)) == []


async def test_instance_profile_garbage_collection(aws: OfflineAWS, provider) -> None:
    status = await provider.nodeclass_status(aws.nodeclass())
    keep = status["instanceProfile"]
    other = (await provider.nodeclass_status(aws.nodeclass("second")))["instanceProfile"]
    assert keep != other
    deleted = await provider.nodeclasses.garbage_collect_instance_profiles({keep})
    assert deleted == [other]
    names = [p["InstanceProfileName"] for p in aws.client("iam").list_instance_profiles()["InstanceProfiles"]]
    assert keep in names and other not in names
