"""The network component: a new VPC (subnet plan, NAT, routes, tags) or tags on existing subnets."""

from __future__ import annotations

import ipaddress
import itertools

import pytest
from pulumi_harness import EXISTING_VPC, ProgramRun, run_stack

from components.network import INTERNAL_ELB_TAG, PUBLIC_ELB_TAG, plan_subnets

DISCOVERY = "karpenter.sh/discovery"


@pytest.mark.parametrize(
    ("cidr", "zones"), [("10.0.0.0/16", 2), ("10.0.0.0/16", 3), ("10.1.0.0/20", 6), ("172.16.0.0/12", 4)]
)
def test_subnet_plan_fits_the_vpc_without_overlaps(cidr: str, zones: int) -> None:
    vpc = ipaddress.IPv4Network(cidr)
    plans = plan_subnets(cidr, zones)
    blocks = [ipaddress.IPv4Network(c) for p in plans for c in (p.private_cidr, p.public_cidr)]
    assert len(plans) == zones
    assert all(block.subnet_of(vpc) for block in blocks)
    assert not any(a.overlaps(b) for a, b in itertools.combinations(blocks, 2))
    for plan in plans:  # nodes and pods live in the private subnets
        assert (
            ipaddress.IPv4Network(plan.private_cidr).num_addresses
            > ipaddress.IPv4Network(plan.public_cidr).num_addresses
        )


def test_subnet_plan_rejects_a_vpc_too_small() -> None:
    with pytest.raises(ValueError, match="too small"):
        plan_subnets("10.0.0.0/26", 6)


def test_new_vpc_has_public_and_private_subnets_per_zone(dev: ProgramRun) -> None:
    subnets = dev.of_type("aws:ec2/subnet:Subnet")
    private = [s for s in subnets if "private" in s.name]
    public = [s for s in subnets if "public" in s.name]
    assert len(private) == len(public) == 2
    assert {s.inputs["availabilityZone"] for s in private} == {"us-west-2a", "us-west-2b"}
    for subnet in private:
        assert subnet.inputs["tags"][DISCOVERY] == "adze-dev"
        assert subnet.inputs["tags"][INTERNAL_ELB_TAG] == "1"
        assert PUBLIC_ELB_TAG not in subnet.inputs["tags"]
    for subnet in public:
        assert subnet.inputs["tags"][PUBLIC_ELB_TAG] == "1"
        assert DISCOVERY not in subnet.inputs["tags"]
        assert subnet.inputs["mapPublicIpOnLaunch"] is False
    vpc = dev.one("aws:ec2/vpc:Vpc")
    assert vpc.inputs["cidrBlock"] == "10.40.0.0/16"
    assert vpc.inputs["enableDnsHostnames"] is True


def test_single_nat_gateway_routes_every_private_subnet(dev: ProgramRun) -> None:
    nats = dev.of_type("aws:ec2/natGateway:NatGateway")
    assert len(nats) == 1
    private_tables = [t for t in dev.of_type("aws:ec2/routeTable:RouteTable") if "private" in t.name]
    assert len(private_tables) == 2
    nat_id = nats[0].id
    assert all(t.inputs["routes"][0]["natGatewayId"] == nat_id for t in private_tables)
    public_table = dev.one("aws:ec2/routeTable:RouteTable", "public")
    assert (
        public_table.inputs["routes"][0]["gatewayId"] == dev.one("aws:ec2/internetGateway:InternetGateway").id
    )


def test_one_nat_gateway_per_zone_in_prod(prod: ProgramRun) -> None:
    nats = prod.of_type("aws:ec2/natGateway:NatGateway")
    assert len(nats) == 3
    tables = sorted(
        (t for t in prod.of_type("aws:ec2/routeTable:RouteTable") if "private" in t.name),
        key=lambda t: t.name,
    )
    assert len({t.inputs["routes"][0]["natGatewayId"] for t in tables}) == 3
    assert len(prod.of_type("aws:ec2/eip:Eip")) == 3


EXISTING_NETWORK = {
    "mode": "existing",
    "vpcId": EXISTING_VPC,
    "privateSubnetIds": [f"subnet-0b5e1e9d7c3a2f10{zone}" for zone in "abc"],
    "publicSubnetIds": [f"subnet-0b5e1e9d7c3a2f11{zone}" for zone in "abc"],
    "tagElbRoles": False,
}


def test_existing_subnets_are_tagged_not_created() -> None:
    run = run_stack("staging", **{"adze:network": EXISTING_NETWORK})
    assert not run.of_type("aws:ec2/vpc:Vpc")
    assert not run.of_type("aws:ec2/subnet:Subnet")
    tags = run.of_type("aws:ec2/tag:Tag")
    subnet_tags = {
        (t.inputs["resourceId"], t.inputs["key"], t.inputs["value"])
        for t in tags
        if t.inputs["resourceId"].startswith("subnet-")
    }
    assert subnet_tags == {
        (subnet, DISCOVERY, "adze-staging") for subnet in EXISTING_NETWORK["privateSubnetIds"]
    }  # tagElbRoles is false: public subnets and ELB roles are left alone
    cluster = run.one("eks:index:Cluster")
    assert cluster.inputs["vpcId"] == EXISTING_VPC
    assert cluster.inputs["privateSubnetIds"] == EXISTING_NETWORK["privateSubnetIds"]


def test_two_stacks_in_one_account_get_distinct_names(dev: ProgramRun, prod: ProgramRun) -> None:
    dev_names = {r.name for r in dev.registrations if r.typ.startswith("aws:")}
    prod_names = {r.name for r in prod.registrations if r.typ.startswith("aws:")}
    assert not dev_names & prod_names
    # No AWS resource sets a physical name: Pulumi auto-names them with a random suffix.
    for registration in dev.registrations:
        if registration.typ.startswith("aws:") and registration.typ != "aws:ec2/tag:Tag":
            assert "name" not in registration.inputs or registration.typ == "aws:eks/addon:Addon", (
                registration.typ
            )


def test_existing_subnets_can_be_left_untagged() -> None:
    network = {
        "mode": "existing",
        "vpcId": EXISTING_VPC,
        "privateSubnetIds": ["subnet-0b5e1e9d7c3a2f10a", "subnet-0b5e1e9d7c3a2f10b"],
        "tagDiscovery": False,
    }
    node_classes = [
        {
            "name": "default",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"adze.dev/nodes": "true"}}],
        }
    ]
    run = run_stack("staging", **{"adze:network": network, "adze:nodeClasses": node_classes})
    assert all(not t.inputs["resourceId"].startswith("subnet-") for t in run.of_type("aws:ec2/tag:Tag"))
    spec = next(run.k8s_objects("EC2NodeClass")).inputs["spec"]
    assert spec["subnetSelectorTerms"] == [{"tags": {"adze.dev/nodes": "true"}}]
