"""The VPC: a new one with public/private subnets across N zones, or existing subnets tagged for discovery.

Private subnets carry ``karpenter.sh/discovery=<cluster>`` (the NodeClasses' default
subnet selector) and the internal-ELB role tag; public subnets carry the ELB role tag.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components.common import discovery_tags, type_token
from components.config import NetworkConfig

PUBLIC_ELB_TAG = "kubernetes.io/role/elb"
INTERNAL_ELB_TAG = "kubernetes.io/role/internal-elb"


@dataclass(slots=True, frozen=True)
class SubnetPlan:
    private_cidr: str
    public_cidr: str


def plan_subnets(vpc_cidr: str, zones: int) -> list[SubnetPlan]:
    """One large private and one small public block per zone, without overlaps.

    The VPC splits into equal blocks: the first ``zones`` are private (nodes and pods
    need the addresses); the last block is divided among the public subnets (NAT, LBs).
    """
    if zones < 1:
        raise ValueError("zones must be at least 1")
    vpc = ipaddress.IPv4Network(vpc_cidr)
    blocks = list(vpc.subnets(prefixlen_diff=math.ceil(math.log2(zones + 1))))
    public_blocks = list(blocks[-1].subnets(prefixlen_diff=max(1, math.ceil(math.log2(zones)))))
    if public_blocks[0].prefixlen > 28:
        raise ValueError(f"{vpc_cidr} is too small for {zones} zones")
    return [SubnetPlan(str(blocks[i]), str(public_blocks[i])) for i in range(zones)]


@dataclass(slots=True)
class NetworkArgs:
    cluster_name: str
    config: NetworkConfig
    tags: dict[str, str] = field(default_factory=dict)


class Network(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    private_subnet_ids: pulumi.Output[list[str]]
    public_subnet_ids: pulumi.Output[list[str]]

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_token("Network"), name, {}, opts)
        child = pulumi.ResourceOptions(parent=self)
        if args.config.mode == "create":
            self._create(name, args, child)
        else:
            self._adopt(name, args, child)
        self.register_outputs(
            {
                "vpc_id": self.vpc_id,
                "private_subnet_ids": self.private_subnet_ids,
                "public_subnet_ids": self.public_subnet_ids,
            }
        )

    def _create(self, name: str, args: NetworkArgs, child: pulumi.ResourceOptions) -> None:
        config = args.config
        plans = plan_subnets(config.cidr, config.availability_zones)
        zones = aws.get_availability_zones_output(
            state="available",
            filters=[{"name": "opt-in-status", "values": ["opt-in-not-required"]}],
            opts=pulumi.InvokeOptions(parent=self),
        ).names

        def zone(index: int) -> pulumi.Output[str]:
            return zones.apply(lambda names: _nth_zone(names, index, config.availability_zones))

        def tags(extra: dict[str, str], label: str) -> dict[str, str]:
            return {**args.tags, "Name": f"{args.cluster_name}-{label}", **extra}

        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=config.cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags=tags({}, "vpc"),
            opts=child,
        )
        gateway = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=tags({}, "igw"), opts=child)
        public_routes = aws.ec2.RouteTable(
            f"{name}-public-rt",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=gateway.id)],
            tags=tags({}, "public"),
            opts=child,
        )
        public: list[aws.ec2.Subnet] = []
        private: list[aws.ec2.Subnet] = []
        gateways: list[aws.ec2.NatGateway] = []
        routing: list[aws.ec2.RouteTableAssociation] = []
        for index, plan in enumerate(plans):
            subnet = aws.ec2.Subnet(
                f"{name}-public-{index}",
                vpc_id=vpc.id,
                cidr_block=plan.public_cidr,
                availability_zone=zone(index),
                map_public_ip_on_launch=False,
                tags=tags({PUBLIC_ELB_TAG: "1"}, f"public-{index}"),
                opts=child,
            )
            routing.append(
                aws.ec2.RouteTableAssociation(
                    f"{name}-public-{index}", subnet_id=subnet.id, route_table_id=public_routes.id, opts=child
                )
            )
            public.append(subnet)
            if index == 0 or config.nat_gateways == "one-per-az":
                address = aws.ec2.Eip(f"{name}-nat-{index}", domain="vpc", tags=tags({}, f"nat-{index}"), opts=child)
                gateways.append(
                    aws.ec2.NatGateway(
                        f"{name}-nat-{index}",
                        allocation_id=address.id,
                        subnet_id=subnet.id,
                        tags=tags({}, f"nat-{index}"),
                        opts=pulumi.ResourceOptions(parent=self, depends_on=[gateway]),
                    )
                )
        for index, plan in enumerate(plans):
            subnet = aws.ec2.Subnet(
                f"{name}-private-{index}",
                vpc_id=vpc.id,
                cidr_block=plan.private_cidr,
                availability_zone=zone(index),
                tags=tags({**discovery_tags(args.cluster_name), INTERNAL_ELB_TAG: "1"}, f"private-{index}"),
                opts=child,
            )
            nat = gateways[index] if config.nat_gateways == "one-per-az" else gateways[0]
            routes = aws.ec2.RouteTable(
                f"{name}-private-rt-{index}",
                vpc_id=vpc.id,
                routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)],
                tags=tags({}, f"private-{index}"),
                opts=child,
            )
            routing.append(
                aws.ec2.RouteTableAssociation(
                    f"{name}-private-{index}", subnet_id=subnet.id, route_table_id=routes.id, opts=child
                )
            )
            private.append(subnet)
        self.vpc_id = vpc.id
        # The subnet ids carry the routes (and so the NAT gateways) as dependencies: whatever runs in
        # the subnets keeps its egress until it is gone, e.g. while `pulumi destroy` drains nodes.
        self.private_subnet_ids = _ids_after(private, routing)
        self.public_subnet_ids = _ids_after(public, routing)

    def _adopt(self, name: str, args: NetworkArgs, child: pulumi.ResourceOptions) -> None:
        """Existing subnets: add only the tags Adze needs (``aws.ec2.Tag`` leaves other tags alone)."""
        config = args.config
        wanted: list[tuple[str, str, str]] = []
        for subnet_id in config.private_subnet_ids:
            if config.tag_discovery:
                wanted += [(subnet_id, key, value) for key, value in discovery_tags(args.cluster_name).items()]
            if config.tag_elb_roles:
                wanted.append((subnet_id, INTERNAL_ELB_TAG, "1"))
        if config.tag_elb_roles:
            wanted += [(subnet_id, PUBLIC_ELB_TAG, "1") for subnet_id in config.public_subnet_ids]
        for subnet_id, key, value in wanted:
            aws.ec2.Tag(
                f"{name}-{subnet_id}-{key.replace('/', '-')}",
                resource_id=subnet_id,
                key=key,
                value=value,
                opts=child,
            )
        self.vpc_id = pulumi.Output.from_input(config.vpc_id or "")
        self.private_subnet_ids = pulumi.Output.from_input(list(config.private_subnet_ids))
        self.public_subnet_ids = pulumi.Output.from_input(list(config.public_subnet_ids))


def _ids_after(subnets: list[aws.ec2.Subnet], routing: list[aws.ec2.RouteTableAssociation]) -> pulumi.Output[list[str]]:
    return pulumi.Output.all(pulumi.Output.all(*[s.id for s in subnets]), *[a.id for a in routing]).apply(
        lambda values: list(values[0])
    )


def _nth_zone(names: list[str], index: int, wanted: int) -> str:
    if len(names) < wanted:
        raise ValueError(f"adze:network.availabilityZones: {wanted} zones requested but the region offers {len(names)}")
    return names[index]
