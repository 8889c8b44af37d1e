"""Launch features of issue 26 item 8 against moto, checked in the launch template EC2 stored.

EFA requests, ``spec.networkInterfaces``, ``ipPrefixCount``, ``connectionTracking``,
``cpuOptions.nestedVirtualization``, IPv6 clusters, ``placementGroupSelector``; and the acceptance
line: a Bottlerocket and an AL2 EC2NodeClass with ``kubelet.systemReserved``/``evictionHard`` launch
with user data that sets them. Every call is authorized against the generated controller policies.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from aws_harness import Recorder, make_provider
from userdata_readback import kubelet_config

from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.cloud.aws.provider import AWSCloudProvider
from reconciler.cloud.types import LaunchRequest, NodeClassNotReadyError
from reconciler.model.resources import Resources

EFA = "vpc.amazonaws.com/efa"


def request(types: list[str], name: str = "nc-1", **kw: Any) -> LaunchRequest:
    return LaunchRequest(nodeclaim=name, nodepool="default", nodeclass="default", instance_types=types,
                         capacity_types=["on-demand"], **kw)


def stored_template(aws: OfflineAWS, recorder: Recorder) -> dict[str, Any]:
    """The LaunchTemplateData EC2 (moto) stored for the last real launch."""
    fleet = recorder.of("CreateFleet")[-1]
    name = fleet["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"]["LaunchTemplateName"]
    versions = aws.client("ec2").describe_launch_template_versions(LaunchTemplateName=name, Versions=["$Latest"])
    return dict(versions["LaunchTemplateVersions"][0]["LaunchTemplateData"])


def user_data(data: dict[str, Any]) -> str:
    return base64.b64decode(data["UserData"]).decode()


@pytest.fixture
def enforced(aws: OfflineAWS) -> Iterator[Any]:
    """``make_provider`` with overrides, every call authorized against the generated policies."""
    from support.controller_iam import enforce_on_provider, enforcement

    made: list[tuple[AWSCloudProvider, Any]] = []

    def build(**overrides: Any) -> AWSCloudProvider:
        provider = make_provider(aws, **overrides)
        made.append((provider, enforce_on_provider(enforcement(aws), provider)))
        return provider

    yield build
    for provider, guard in made:
        provider.close()
        assert not guard.denials, guard.denied_report()


async def test_an_efa_request_gets_one_efa_interface_per_efa_the_type_has(aws: OfflineAWS, provider) -> None:
    recorder = Recorder().attach(provider)
    nodeclass = aws.nodeclass()
    instance = await provider.create(request(["g5.8xlarge"], requests=Resources.of(**{EFA: 1})), nodeclass)
    data = stored_template(aws, recorder)
    assert data["NetworkInterfaces"] == [
        {"NetworkCardIndex": 0, "DeviceIndex": 0, "InterfaceType": "efa", "Groups": [aws.security_group_id]}
    ]
    assert "SecurityGroupIds" not in data
    assert instance.capacity.amount(EFA) == 1000
    # The same type without an EFA request: EC2's default interface, and no EFA advertised.
    plain = await provider.create(request(["g5.8xlarge"], name="nc-2"), nodeclass)
    data = stored_template(aws, recorder)
    assert "NetworkInterfaces" not in data and data["SecurityGroupIds"] == [aws.security_group_id]
    assert EFA not in plain.capacity


async def test_nodeclass_network_interfaces_shape_templates_pods_and_compatibility(aws: OfflineAWS, provider) -> None:
    interfaces = [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
                  {"networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "efa-only"}]
    nodeclass = aws.nodeclass(networkInterfaces=interfaces, ipPrefixCount=2)
    default_types = {t.name: t for t in await provider.instance_types(aws.nodeclass("plain"))}
    types = {t.name: t for t in await provider.instance_types(nodeclass)}
    # A type without EFA cannot take an EFA-only interface; g5.8xlarge can, and loses that ENI's pods.
    assert not any(o.available for o in types["m5.large"].offerings)
    g5, g5_default = types["g5.8xlarge"], default_types["g5.8xlarge"]
    assert any(o.available for o in g5.offerings)
    assert g5.capacity.amount(EFA) == 1000
    assert g5.capacity.amount("pods") < g5_default.capacity.amount("pods")
    recorder = Recorder().attach(provider)
    await provider.create(request(["g5.8xlarge", "m5.large"]), nodeclass)
    data = stored_template(aws, recorder)
    assert data["NetworkInterfaces"] == [
        {"NetworkCardIndex": 0, "DeviceIndex": 0, "InterfaceType": "interface", "Groups": [aws.security_group_id],
         "Ipv4PrefixCount": 2},
        {"NetworkCardIndex": 0, "DeviceIndex": 1, "InterfaceType": "efa-only", "Groups": [aws.security_group_id]},
    ]


async def test_prefixes_conntrack_and_public_ip_on_the_primary_interface(aws: OfflineAWS, provider) -> None:
    nodeclass = aws.nodeclass(ipPrefixCount=3, associatePublicIPAddress=False,
                              connectionTracking={"tcpEstablishedTimeout": 3600, "udpTimeout": 30})
    types = {t.name: t for t in await provider.instance_types(nodeclass)}
    assert not any(o.available for o in types["m6i.metal"].offerings)  # connection tracking needs Nitro
    recorder = Recorder().attach(provider)
    await provider.create(request(["m5.large"]), nodeclass)
    assert stored_template(aws, recorder)["NetworkInterfaces"] == [{
        "DeviceIndex": 0, "Groups": [aws.security_group_id], "Ipv4PrefixCount": 3,
        "AssociatePublicIpAddress": False,
        "ConnectionTrackingSpecification": {"TcpEstablishedTimeout": 3600, "UdpTimeout": 30},
    }]


async def test_nested_virtualization_only_on_types_that_support_it(aws: OfflineAWS, enforced) -> None:
    provider = enforced(instance_type_filters=({"Name": "instance-type", "Values": ["m5.large", "m7i.large"]},))
    nodeclass = aws.nodeclass(cpuOptions={"nestedVirtualization": "enabled"})
    types = {t.name: t for t in await provider.instance_types(nodeclass)}
    assert not any(o.available for o in types["m5.large"].offerings)
    assert any(o.available for o in types["m7i.large"].offerings)
    recorder = Recorder().attach(provider)
    instance = await provider.create(request(["m5.large", "m7i.large"]), nodeclass)
    assert instance.instance_type == "m7i.large"
    assert stored_template(aws, recorder)["CpuOptions"] == {"NestedVirtualization": "enabled"}


async def test_ipv6_cluster_nodes_get_ipv6_addresses_dns_and_imds(aws: OfflineAWS, enforced) -> None:
    cluster = dataclasses.replace(aws.cluster_info(), dns_ip="fd00:10::a", service_cidr="fd00:10::/108")
    provider = enforced(cluster=cluster)
    recorder = Recorder().attach(provider)
    await provider.create(request(["m5.large"]), aws.nodeclass(ipPrefixCount=1))
    data = stored_template(aws, recorder)
    assert data["NetworkInterfaces"] == [{"DeviceIndex": 0, "Groups": [aws.security_group_id], "Ipv6PrefixCount": 1,
                                          "PrimaryIpv6": True, "Ipv6AddressCount": 1}]
    assert data["MetadataOptions"]["HttpProtocolIpv6"] == "enabled"  # the class says nothing about IMDS
    config = kubelet_config("AL2023", user_data(data))
    assert config["clusterDNS"] == ["fd00:10::a"] and config["_spec"]["cluster"]["cidr"] == "fd00:10::/108"
    al2 = aws.nodeclass("al2", amiFamily="AL2", amiSelectorTerms=[{"id": aws.ami_ids["amd64/standard"]}],
                        metadataOptions={"httpProtocolIPv6": "disabled"})
    await provider.create(request(["m5.large"], name="nc-2", ), al2)
    data = stored_template(aws, recorder)
    assert "--ip-family ipv6" in user_data(data) and data["MetadataOptions"]["HttpProtocolIpv6"] == "disabled"


async def test_placement_group_selected_by_name_places_and_labels_the_nodes(aws: OfflineAWS, provider) -> None:
    ec2 = aws.client("ec2")
    group = ec2.create_placement_group(GroupName=f"{aws.cluster}-hpc", Strategy="cluster")["PlacementGroup"]
    nodeclass = aws.nodeclass(placementGroupSelector={"name": f"{aws.cluster}-hpc"})
    status = await provider.nodeclass_status(nodeclass)
    assert {c["type"]: c["status"] for c in status["conditions"]}["PlacementGroupReady"] == "True"
    types = {t.name: t for t in await provider.instance_types(nodeclass)}
    assert types["m5.large"].labels["karpenter.k8s.aws/placement-group-id"] == group["GroupId"]
    recorder = Recorder().attach(provider)
    instance = await provider.create(request(["m5.large"]), nodeclass)
    assert stored_template(aws, recorder)["Placement"] == {"GroupId": group["GroupId"]}
    assert instance.labels["karpenter.k8s.aws/placement-group-id"] == group["GroupId"]
    by_id = await provider.nodeclass_status(aws.nodeclass("by-id", placementGroupSelector={"id": group["GroupId"]}))
    assert all(c["status"] == "True" for c in by_id["conditions"])


@pytest.mark.parametrize(
    ("strategy", "reason", "message"),
    [(None, "PlacementGroupNotFound", "not found"),
     ("partition", "PlacementGroupStrategyUnsupported", "partition strategy, which Adze does not support")],
)
async def test_an_unusable_placement_group_keeps_the_class_not_ready(
    aws: OfflineAWS, provider, strategy: str | None, reason: str, message: str
) -> None:
    name = f"{aws.cluster}-{strategy or 'missing'}"
    if strategy:
        aws.client("ec2").create_placement_group(GroupName=name, Strategy=strategy, PartitionCount=3)
    nodeclass = aws.nodeclass(placementGroupSelector={"name": name})
    condition = next(c for c in (await provider.nodeclass_status(nodeclass))["conditions"]
                     if c["type"] == "PlacementGroupReady")
    assert (condition["status"], condition["reason"]) == ("False", reason) and message in condition["message"]
    with pytest.raises(NodeClassNotReadyError, match="PlacementGroupReady"):
        await provider.create(request(["m5.large"]), nodeclass)


async def test_bottlerocket_and_al2_classes_launch_with_their_reserved_and_eviction_settings(
    aws: OfflineAWS, provider
) -> None:
    kubelet = {"systemReserved": {"cpu": "200m", "memory": "512Mi"},
               "evictionHard": {"memory.available": "7%", "nodefs.available": "12%"}}
    classes = {
        "Bottlerocket": aws.nodeclass("br", amiSelectorTerms=[{"alias": "bottlerocket@latest"}], kubelet=kubelet),
        "AL2": aws.nodeclass("al2", amiFamily="AL2", amiSelectorTerms=[{"id": aws.ami_ids["amd64/standard"]}],
                             kubelet=kubelet),
    }
    recorder = Recorder().attach(provider)
    for index, (family, nodeclass) in enumerate(classes.items()):
        types = {t.name: t for t in await provider.instance_types(nodeclass)}
        await provider.create(request(["m5.large"], name=f"nc-{index}"), nodeclass)
        node = kubelet_config(family, user_data(stored_template(aws, recorder)))
        assert node["systemReserved"] == kubelet["systemReserved"]
        assert node["evictionHard"] == kubelet["evictionHard"]
        assert node["maxPods"] == types["m5.large"].capacity.amount("pods") // 1000
