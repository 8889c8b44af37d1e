"""Pure parts of the AWS provider: offering choice, fleet request/answer, ICE cache, GC, drift, user data."""

from __future__ import annotations

import base64
import tomllib
from datetime import UTC, datetime, timedelta

import pytest
import yaml

from reconciler.api.amifamily import AL2, AL2023, BOTTLEROCKET, CUSTOM, WINDOWS2022, family_of_nodeclass
from reconciler.cloud.aws import fleet as fleets
from reconciler.cloud.aws.allocatable import KubeletOverrides
from reconciler.cloud.aws.amis import AMI, AMISelectionError, Requirement, ResolvedAMIs, alias_parameters
from reconciler.cloud.aws.drift import drift_reason
from reconciler.cloud.aws.gc import orphans, referenced_instance_ids
from reconciler.cloud.aws.ice import UnavailableOfferings
from reconciler.cloud.aws.instances import InstanceRecord, parse_provider_id, provider_id
from reconciler.cloud.aws.launchtemplate import LaunchTemplateSpec, block_device_mappings, metadata_options
from reconciler.cloud.aws.netinterfaces import network_interfaces
from reconciler.cloud.aws.nodeclass import ResolvedNodeClass, SecurityGroup, Subnet, subnets_for_launch
from reconciler.cloud.aws.tags import launch_tags, validate_user_tags
from reconciler.cloud.aws.userdata import BootstrapOptions, ClusterInfo, kubelet_labels, render
from reconciler.cloud.types import InstanceType, LaunchRequest, Offering
from reconciler.model.resources import Resources

CLUSTER = ClusterInfo("demo", "https://api.example", "Q0E=", dns_ip="172.20.0.10", kubernetes_version="1.31")


def itype(name: str, *offerings: Offering) -> InstanceType:
    return InstanceType(name, Resources.of(cpu="2", memory="4Gi", pods="29"), offerings=offerings)


def request(**kw: object) -> LaunchRequest:
    base: dict[str, object] = {
        "nodeclaim": "nc",
        "nodepool": "default",
        "nodeclass": "default",
        "instance_types": ["a", "b"],
    }
    base.update(kw)
    return LaunchRequest(**base)  # type: ignore[arg-type]


def test_spot_preferred_and_spot_dearer_than_on_demand_dropped() -> None:
    types = {
        "a": itype("a", Offering("z1", "spot", 0.05), Offering("z1", "on-demand", 0.10)),
        "b": itype(
            "b", Offering("z1", "spot", 0.20), Offering("z2", "spot", 0.04), Offering("z1", "on-demand", 0.15)
        ),
    }
    candidates = fleets.candidates_for(request(), types, {"z1", "z2"})
    capacity_type, chosen = fleets.select_offerings(request(), candidates)
    assert capacity_type == "spot"
    assert [(c.instance_type.name, c.offering.zone) for c in chosen] == [("b", "z2"), ("a", "z1")]
    only_on_demand = request(capacity_types=["on-demand"])
    capacity_type, chosen = fleets.select_offerings(
        only_on_demand, fleets.candidates_for(only_on_demand, types, {"z1"})
    )
    assert capacity_type == "on-demand" and [c.offering.price for c in chosen] == [0.10, 0.15]


def test_unavailable_out_of_zone_and_unlaunchable_zones_are_not_candidates() -> None:
    types = {
        "a": itype(
            "a",
            Offering("z1", "spot", 0.05, available=False),
            Offering("z2", "spot", 0.06),
            Offering("z3", "spot", 0.01),
        )
    }
    assert [
        c.offering.zone for c in fleets.candidates_for(request(zones=["z2", "z3"]), types, {"z1", "z2"})
    ] == ["z2"]
    assert fleets.select_offerings(request(), []) == ("", [])


def test_a_claims_notin_without_an_in_list_rules_its_values_out() -> None:
    """``zone NotIn [z1]`` and ``capacity-type NotIn [spot]`` alone (no In list for either key, as a pod's
    anti-requirements leave a NodeClaim): z1 and spot are out of the fleet, though they are cheapest."""
    claim = {
        "metadata": {"name": "nc", "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["a", "b"]},
                {"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["z1"]},
                {"key": "karpenter.sh/capacity-type", "operator": "NotIn", "values": ["spot"]},
            ],
        },
    }
    req = LaunchRequest.from_nodeclaim(claim)
    types = {
        "a": itype("a", Offering("z1", "spot", 0.01), Offering("z1", "on-demand", 0.03),
                   Offering("z2", "spot", 0.02), Offering("z2", "on-demand", 0.06)),
        "b": itype("b", Offering("z1", "on-demand", 0.04), Offering("z2", "on-demand", 0.05)),
    }
    candidates = fleets.candidates_for(req, types, {"z1", "z2"})
    assert {(c.instance_type.name, c.offering.zone, c.offering.capacity_type) for c in candidates} == {
        ("a", "z2", "on-demand"), ("b", "z2", "on-demand")}
    every_offering = [fleets.Candidate(t, o) for t in types.values() for o in t.offerings]
    assert fleets.choose_capacity_type(req, every_offering) == "on-demand"
    capacity_type, chosen = fleets.select_offerings(req, candidates)
    assert capacity_type == "on-demand"
    assert [(c.instance_type.name, c.offering.zone) for c in chosen] == [("b", "z2"), ("a", "z2")]


def test_metal_and_gpu_types_leave_the_fleet_while_a_generic_type_can_launch() -> None:
    """Upstream's exotic filter on the real catalogue: the metal and GPU options are the cheapest here."""
    from reconciler.cloud.aws.preset import load_preset

    real = {t.name: t for t in load_preset()}
    cheap = {"c7g.metal": 0.5, "g4dn.xlarge": 0.6, "c7g.16xlarge": 0.9}
    types = {
        name: InstanceType(name, real[name].capacity, offerings=(Offering("z1", "on-demand", price),),
                           labels=real[name].labels)
        for name, price in cheap.items()
    }
    req = request(instance_types=list(cheap))
    _, chosen = fleets.select_offerings(req, fleets.candidates_for(req, types, {"z1"}))
    assert [c.instance_type.name for c in chosen] == ["c7g.16xlarge"]
    exotic_only = request(instance_types=["g4dn.xlarge", "c7g.metal"])
    _, chosen = fleets.select_offerings(exotic_only, fleets.candidates_for(exotic_only, types, {"z1"}))
    assert [c.instance_type.name for c in chosen] == ["c7g.metal", "g4dn.xlarge"]
    # A generic type without an offering in the launchable zones does not keep the exotic ones out.
    types["c7g.16xlarge"] = InstanceType("c7g.16xlarge", real["c7g.16xlarge"].capacity,
                                         offerings=(Offering("z9", "on-demand", 0.9),))
    _, chosen = fleets.select_offerings(req, fleets.candidates_for(req, types, {"z1"}))
    assert [c.instance_type.name for c in chosen] == ["c7g.metal", "g4dn.xlarge"]


def test_at_most_sixty_instance_types_cheapest_first() -> None:
    names = [f"t{i:03d}" for i in range(100)]
    types = {n: itype(n, Offering("z1", "on-demand", 1.0 + i / 1000)) for i, n in enumerate(reversed(names))}
    req = request(instance_types=names)
    _, chosen = fleets.select_offerings(req, fleets.candidates_for(req, types, {"z1"}))
    assert len(chosen) == 60
    assert chosen[0].offering.price == min(c.offering.price for c in chosen)


def test_fleet_request_and_answer_round_trip() -> None:
    overrides = [fleets.Override("m5.large", "us-east-1a", "subnet-a", "ami-1", 0.03)]
    body = fleets.create_fleet_request(
        "on-demand", {"lt-1": overrides}, [{"ResourceType": "instance", "Tags": []}], context="ctx"
    )
    assert body["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    assert body["Context"] == "ctx" and "SpotOptions" not in body
    answer = {
        "Instances": [
            {
                "InstanceIds": ["i-1"],
                "InstanceType": "m5.large",
                "Lifecycle": "on-demand",
                "LaunchTemplateAndOverrides": {
                    "Overrides": {"SubnetId": "subnet-a", "InstanceType": "m5.large"}
                },
            }
        ],
        "Errors": [
            {
                "ErrorCode": "InsufficientInstanceCapacity",
                "ErrorMessage": "none",
                "Lifecycle": "on-demand",
                "LaunchTemplateAndOverrides": {
                    "Overrides": {"InstanceType": "c5.large", "SubnetId": "subnet-a"}
                },
            },
            {"ErrorCode": "InvalidFleetConfiguration", "ErrorMessage": "bad"},
        ],
    }
    launched, errors = fleets.parse_fleet_response(answer, "on-demand", overrides)
    assert launched == [
        fleets.LaunchedInstance("i-1", "m5.large", "us-east-1a", "on-demand", "subnet-a", "ami-1")
    ]
    assert errors[0].zone == "us-east-1a" and errors[0].is_capacity_error
    assert not errors[1].is_capacity_error


def test_unavailable_offerings_expire_after_three_minutes() -> None:
    now = [1000.0]
    cache = UnavailableOfferings(clock=lambda: now[0])
    cache.mark_unavailable("spot", "m5.large", "z1")
    cache.mark_capacity_type_unavailable("on-demand")
    cache.mark_subnet_unavailable("subnet-1")
    assert cache.is_unavailable("spot", "m5.large", "z1") and not cache.is_unavailable(
        "spot", "m5.large", "z2"
    )
    assert cache.is_unavailable("on-demand", "anything", "z9") and cache.is_subnet_unavailable("subnet-1")
    seq = cache.seq
    now[0] += 179.9
    assert cache.unavailable() == [("spot", "m5.large", "z1")]
    now[0] += 0.2
    assert not cache.is_unavailable("spot", "m5.large", "z1") and not cache.is_unavailable(
        "on-demand", "x", "z"
    )
    cache.cleanup()
    assert cache.unavailable() == [] and cache.seq == seq


def test_subnet_per_zone_with_most_free_addresses() -> None:
    subnets = [Subnet("s1", "z1", "", 10), Subnet("s2", "z1", "", 200), Subnet("s3", "z2", "", 5)]
    chosen = subnets_for_launch(subnets, {"z1", "z2"}, lambda s: s == "s2")
    assert {z: s.id for z, s in chosen.items()} == {"z1": "s1", "z2": "s3"}


def test_provider_ids() -> None:
    assert parse_provider_id(provider_id("us-east-1a", "i-0abc")) == ("us-east-1a", "i-0abc")
    for bad in ("gce://x", "aws:///us-east-1a/", "aws:///us-east-1a/vol-1"):
        with pytest.raises(ValueError, match="providerID"):
            parse_provider_id(bad)


def record(instance_id: str, age: float, state: str = "running", **kw: object) -> InstanceRecord:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return InstanceRecord(instance_id, "m5.large", "z1", "spot", state, now - timedelta(seconds=age), **kw)  # type: ignore[arg-type]


def test_orphans_are_old_unreferenced_and_alive() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    claims = [
        {"status": {"providerID": "aws:///z1/i-kept"}},
        {"status": {}},
        {"status": {"providerID": "junk"}},
    ]
    referenced = referenced_instance_ids(claims)
    assert referenced == {"i-kept"}
    records = [
        record("i-kept", 300),
        record("i-young", 10),
        record("i-old", 31),
        record("i-dying", 300, "shutting-down"),
    ]
    assert [r.id for r in orphans(records, referenced, now)] == ["i-old"]


def resolved_nodeclass() -> ResolvedNodeClass:
    resolved = ResolvedNodeClass("default", {}, AL2023, KubeletOverrides(), {})
    resolved.subnets = [Subnet("subnet-a", "z1", "", 10)]
    resolved.security_groups = [SecurityGroup("sg-1", "nodes")]
    arm = (Requirement("kubernetes.io/arch", "In", ("arm64",)),)
    amd = (Requirement("kubernetes.io/arch", "In", ("amd64",)),)
    resolved.amis = ResolvedAMIs(AL2023, [AMI("ami-amd", "x", amd), AMI("ami-arm", "y", arm)])
    return resolved


def test_drift_reasons_in_karpenter_order() -> None:
    resolved = resolved_nodeclass()
    amd64 = {"kubernetes.io/arch": "amd64"}
    good = record("i-1", 100, image_id="ami-amd", subnet_id="subnet-a", security_group_ids=("sg-1",))
    assert drift_reason(good, resolved, amd64) is None
    assert (
        drift_reason(
            record("i-1", 1, image_id="ami-arm", subnet_id="subnet-a", security_group_ids=("sg-1",)),
            resolved,
            amd64,
        )
        == "AMIDrift"
    )
    assert (
        drift_reason(
            record("i-1", 1, image_id="ami-amd", subnet_id="subnet-a", security_group_ids=("sg-2",)),
            resolved,
            amd64,
        )
        == "SecurityGroupDrift"
    )
    assert (
        drift_reason(
            record("i-1", 1, image_id="ami-amd", subnet_id="subnet-z", security_group_ids=("sg-1",)),
            resolved,
            amd64,
        )
        == "SubnetDrift"
    )


def test_ownership_tags_win_and_reserved_user_tags_are_rejected() -> None:
    tags = launch_tags("demo", "np", "nc", {"team": "a", "Name": "x"}, nodeclaim="claim")
    assert tags["kubernetes.io/cluster/demo"] == "owned" and tags["eks:eks-cluster-name"] == "demo"
    assert (
        tags["karpenter.sh/nodepool"] == "np"
        and tags["karpenter.sh/nodeclaim"] == "claim"
        and tags["team"] == "a"
    )
    for key in ("kubernetes.io/cluster/other", "karpenter.sh/nodepool", "karpenter.sh/nodeclaim"):
        with pytest.raises(ValueError, match=f"spec.tags.{key}"):
            validate_user_tags({key: "x"})


def test_alias_parameters_per_family() -> None:
    al2023 = alias_parameters("al2023@latest", "1.31")
    assert "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/nvidia/recommended/image_id" in {
        p.path for p in al2023
    }
    pinned = alias_parameters("al2023@v20240807", "1.31")
    assert pinned[0].path.endswith("amazon-eks-node-al2023-x86_64-standard-1.31-v20240807/image_id")
    assert alias_parameters("al2@v20240807", "1.30")[2].path == (
        "/aws/service/eks/optimized-ami/1.30/amazon-linux-2-gpu/amazon-eks-gpu-node-1.30-v20240807/image_id"
    )
    bottlerocket = {p.path for p in alias_parameters("bottlerocket@1.20.0", "1.31")}
    assert "/aws/service/bottlerocket/aws-k8s-1.31-nvidia/arm64/1.20.0/image_id" in bottlerocket
    assert alias_parameters("windows2022@latest", "1.31")[0].path.endswith("EKS_Optimized-1.31/image_id")
    with pytest.raises(AMISelectionError, match="@latest"):
        alias_parameters("windows2022@v1", "1.31")
    with pytest.raises(AMISelectionError, match="unknown alias family"):
        alias_parameters("ubuntu@latest", "1.31")


def test_family_from_alias_or_field() -> None:
    assert (
        family_of_nodeclass({"spec": {"amiSelectorTerms": [{"alias": "bottlerocket@latest"}]}})
        is BOTTLEROCKET
    )
    assert family_of_nodeclass({"spec": {"amiFamily": "AL2", "amiSelectorTerms": [{"id": "ami-1"}]}}) is AL2
    assert family_of_nodeclass({"spec": {}}) is AL2023


def test_launch_template_defaults_to_imdsv2_and_is_content_addressed() -> None:
    options = metadata_options(None)
    assert options["HttpTokens"] == "required" and options["HttpPutResponseHopLimit"] == 1
    assert metadata_options({"httpTokens": "optional"})["HttpTokens"] == "optional"
    mappings = block_device_mappings(
        {
            "blockDeviceMappings": [
                {
                    "deviceName": "/dev/xvda",
                    "ebs": {"volumeSize": "100Gi", "volumeType": "gp3", "encrypted": True},
                }
            ]
        },
        AL2023,
    )
    assert mappings == [
        {"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 100, "VolumeType": "gp3", "Encrypted": True}}
    ]
    assert [m["DeviceName"] for m in block_device_mappings({}, BOTTLEROCKET)] == ["/dev/xvda", "/dev/xvdb"]
    with pytest.raises(ValueError, match=r"spec.blockDeviceMappings\[0\].ebs.volumeSize"):
        block_device_mappings(
            {"blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "big"}}]}, AL2023
        )
    spec = LaunchTemplateSpec("ami-1", "#!/bin/bash", "profile", ("sg-1",), (), options, {"k": "v"})
    same = LaunchTemplateSpec("ami-1", "#!/bin/bash", "profile", ("sg-1",), (), dict(options), {"k": "v"})
    other = LaunchTemplateSpec("ami-2", "#!/bin/bash", "profile", ("sg-1",), (), options, {"k": "v"})
    assert spec.name == same.name != other.name and spec.name.startswith("karpenter.k8s.aws/")
    data = spec.data()
    assert base64.b64decode(data["UserData"]).decode() == "#!/bin/bash"
    interfaces = network_interfaces(security_groups=("sg-1",), associate_public_ip=True)
    assert interfaces == [{"DeviceIndex": 0, "Groups": ["sg-1"], "AssociatePublicIpAddress": True}]
    public = LaunchTemplateSpec("ami-1", "", "p", ("sg-1",), (), options, {},
                                network_interfaces=tuple(interfaces)).data()
    assert "SecurityGroupIds" not in public and public["NetworkInterfaces"][0]["Groups"] == ["sg-1"]


BOOT = BootstrapOptions(
    labels={
        "karpenter.sh/nodepool": "default",
        "team": "a",
        "kubernetes.io/hostname": "x",
        "node-role.kubernetes.io/worker": "",
        "node.kubernetes.io/instance-type": "m5.large",
    },
    taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
    max_pods=29,
)


def test_kubelet_may_only_set_permitted_kubernetes_labels() -> None:
    labels = kubelet_labels(BOOT.labels)
    assert "node-role.kubernetes.io/worker" not in labels
    assert {
        "team",
        "karpenter.sh/nodepool",
        "kubernetes.io/hostname",
        "node.kubernetes.io/instance-type",
    } <= set(labels)


def test_al2023_user_data_is_mime_with_a_nodeconfig_after_the_users_part() -> None:
    text = render(
        AL2023, CLUSTER, BootstrapOptions(BOOT.labels, BOOT.taints, 29, {}, "#!/bin/bash\necho hello")
    )
    assert text.startswith("MIME-Version: 1.0")
    parts = text.split("--//")
    assert "text/x-shellscript" in parts[1] and "echo hello" in parts[1]
    nodeconfig = yaml.safe_load(parts[2].split("\n\n", 1)[1])
    assert nodeconfig["kind"] == "NodeConfig"
    assert nodeconfig["spec"]["cluster"]["apiServerEndpoint"] == "https://api.example"
    assert nodeconfig["spec"]["kubelet"]["config"]["maxPods"] == 29
    assert nodeconfig["spec"]["kubelet"]["config"]["clusterDNS"] == ["172.20.0.10"]
    assert nodeconfig["spec"]["kubelet"]["config"]["registerWithTaints"] == [
        {"key": "gpu", "value": "true", "effect": "NoSchedule"},
        {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
    ]
    assert nodeconfig["spec"]["kubelet"]["flags"] == [
        '--node-labels="karpenter.sh/nodepool=default,kubernetes.io/hostname=x,'
        'node.kubernetes.io/instance-type=m5.large,team=a"'
    ]


def test_al2_and_windows_bootstrap_scripts() -> None:
    al2 = render(AL2, CLUSTER, BOOT)
    assert "/etc/eks/bootstrap.sh 'demo'" in al2 and "--max-pods=29" in al2 and "--use-max-pods false" in al2
    windows = render(WINDOWS2022, CLUSTER, BOOT)
    assert windows.startswith("<powershell>") and "-EKSClusterName 'demo'" in windows


def test_bottlerocket_toml_merges_user_settings() -> None:
    custom = (
        '[settings.kubernetes]\ncluster-name = "wrong"\n[settings.kubernetes.node-labels]\nmine = "yes"\n'
        "[settings.host-containers.admin]\nenabled = true\n"
    )
    text = render(BOTTLEROCKET, CLUSTER, BootstrapOptions(BOOT.labels, BOOT.taints, 29, {}, custom))
    settings = tomllib.loads(text)["settings"]
    kubernetes = settings["kubernetes"]
    assert kubernetes["cluster-name"] == "demo" and kubernetes["max-pods"] == 29
    assert kubernetes["node-labels"]["mine"] == "yes" and kubernetes["node-labels"]["team"] == "a"
    assert kubernetes["node-taints"] == {"gpu": ["true:NoSchedule"], "karpenter.sh/unregistered": [":NoExecute"]}
    assert settings["host-containers"]["admin"]["enabled"] is True


def test_custom_family_passes_user_data_through() -> None:
    assert render(CUSTOM, CLUSTER, BootstrapOptions(custom="#cloud-config\n")) == "#cloud-config\n"


def _reserved(zone: str, reservation: str, left: int, *, kind: str = "default", price: float = 1e-8,
              interruptible: bool = False) -> Offering:
    return Offering(zone, "reserved", price, reservation_id=reservation, reservation_type=kind,
                    reservation_capacity=left, interruptible=interruptible)


def test_a_reserved_launch_targets_what_one_fleet_can() -> None:
    """Karpenter's reservation filters: one reservation per (type, zone) (the one with most left), one kind of
    reservation per fleet (ODCR before capacity block before interruptible at a price tie), one capacity block."""
    types = {
        "a": itype("a", _reserved("z1", "cr-small", 1), _reserved("z1", "cr-big", 5), _reserved("z2", "cr-z2", 1),
                   Offering("z1", "on-demand", 0.1)),
        "b": itype("b", _reserved("z1", "cr-block", 1, kind="capacity-block"),
                   _reserved("z1", "cr-int", 1, interruptible=True), Offering("z1", "spot", 0.01)),
    }
    req = request(capacity_types=["reserved", "spot", "on-demand"])
    capacity_type, chosen = fleets.select_offerings(req, fleets.candidates_for(req, types, {"z1", "z2"}))
    assert capacity_type == "reserved"
    assert sorted(c.offering.reservation_id for c in chosen) == ["cr-big", "cr-z2"]
    assert fleets.target_capacity_type(capacity_type, chosen) == "on-demand"

    blocks = {
        "a": itype("a", _reserved("z1", "cr-b1", 1, kind="capacity-block", price=2e-8)),
        "b": itype("b", _reserved("z1", "cr-b2", 1, kind="capacity-block", price=1e-8),
                   _reserved("z2", "cr-b3", 1, kind="capacity-block", price=3e-8)),
    }
    capacity_type, chosen = fleets.select_offerings(req, fleets.candidates_for(req, blocks, {"z1", "z2"}))
    assert [(c.instance_type.name, c.offering.reservation_id) for c in chosen] == [("b", "cr-b2")]
    assert fleets.target_capacity_type(capacity_type, chosen) == "capacity-block"
    body = fleets.create_fleet_request("reserved", {}, [], target="capacity-block")
    assert "OnDemandOptions" not in body and body["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == (
        "capacity-block")

    interruptible = {"b": itype("b", _reserved("z1", "cr-int", 1, interruptible=True))}
    capacity_type, chosen = fleets.select_offerings(req, fleets.candidates_for(req, interruptible, {"z1"}))
    assert fleets.target_capacity_type(capacity_type, chosen) == "reserved-capacity"
    body = fleets.create_fleet_request("reserved", {}, [], target="reserved-capacity")
    assert body["ReservedCapacityOptions"] == {"ReservationTypes": ["interruptible-capacity-reservation"]}


def test_a_claim_pinned_to_reservations_launches_only_into_them() -> None:
    types = {"a": itype("a", _reserved("z1", "cr-1", 1), _reserved("z1", "cr-2", 9), Offering("z1", "spot", 0.01))}
    req = request(instance_types=["a"], capacity_types=["reserved"], reservation_ids=["cr-1"])
    _, chosen = fleets.select_offerings(req, fleets.candidates_for(req, types, {"z1"}))
    assert [c.offering.reservation_id for c in chosen] == ["cr-1"]
    absent = request(instance_types=["a"], reservation_ids=[])  # capacity-reservation-id DoesNotExist
    capacity_type, _ = fleets.select_offerings(absent, fleets.candidates_for(absent, types, {"z1"}))
    assert capacity_type == "spot"
