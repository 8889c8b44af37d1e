"""An in-process moto EC2/SSM/IAM/SQS endpoint seeded like an EKS cluster's account.

Used by ``simulate --cloud moto`` and the AWS tests: the real ``AWSCloudProvider``
runs its whole launch path (NodeClass resolution, launch templates, CreateFleet,
DescribeInstances, TerminateInstances) against moto's server on 127.0.0.1.

Seeded per environment: a VPC with three discovery-tagged subnets of different
sizes, a discovery-tagged security group, the node IAM role, and the EKS
optimized-AMI SSM parameters (which moto does not ship; they are written into
moto's SSM backend in-process because ``/aws/...`` names are reserved).
Prices: the bundled on-demand table, and spot at the preset's documented
fraction of on-demand (moto's spot history is a placeholder ``0.00001``).

moto is a test/dev dependency, imported only when this module is used.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3

from reconciler.cloud.aws.instancetype import spot_fraction
from reconciler.cloud.aws.moto_patches import (
    CapacityShortages,
    install_capacity_reservation_patch,
    install_fleet_patch,
    seed_capacity_reservation,
    set_fleet_faults,
)
from reconciler.cloud.aws.preset import load_catalog
from reconciler.cloud.aws.userdata import ClusterInfo

ACCOUNT_ID = "123456789012"
DISCOVERY_TAG = "karpenter.sh/discovery"
# Subnet CIDRs for the seeded zones, in order: different sizes so "most free IPs" has something to choose.
SUBNET_CIDRS = (
    "10.42.0.0/20",
    "10.42.16.0/22",
    "10.42.32.0/24",
    "10.42.33.0/24",
    "10.42.34.0/24",
    "10.42.35.0/24",
)
DEFAULT_ZONE_SUFFIXES = ("a", "b", "c")
NODE_ROLE_PREFIX = "KarpenterNodeRole-"
CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


@dataclass(slots=True)
class OfflineAWS:
    server: Any
    endpoint_url: str
    region: str
    cluster: str
    kubernetes_version: str
    zones: tuple[str, ...] = ()
    subnet_ids: dict[str, str] = field(default_factory=dict)  # zone -> subnet id
    security_group_id: str = ""
    ami_ids: dict[str, str] = field(default_factory=dict)  # "<arch>/<variant>" -> image id
    account_id: str = ACCOUNT_ID
    credentials: dict[str, str] = field(default_factory=lambda: dict(CREDENTIALS))
    # Clients by (service, region, endpoint, credentials), shared with every ``for_cluster`` sibling: building a
    # boto3 client builds its class and one method per operation (~25 ms for EC2), and clients are thread-safe.
    client_cache: dict[tuple[Any, ...], Any] = field(default_factory=dict, repr=False, compare=False)

    def client(self, service: str) -> Any:
        key = (service, self.region, self.endpoint_url, *sorted(self.credentials.items()))
        known = self.client_cache.get(key)
        if known is None:
            known = boto3.client(service, region_name=self.region, endpoint_url=self.endpoint_url, **self.credentials)
            self.client_cache[key] = known
        return known

    @property
    def node_role(self) -> str:
        return f"{NODE_ROLE_PREFIX}{self.cluster}"

    def for_cluster(self, cluster: str) -> OfflineAWS:
        """Another cluster in the same moto account (own VPC, subnets, SG, role): cheap test isolation."""
        other = OfflineAWS(
            self.server, self.endpoint_url, self.region, cluster, self.kubernetes_version, self.zones,
            account_id=self.account_id, credentials=dict(self.credentials), client_cache=self.client_cache,
        )
        seed(other)
        return other

    def cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            name=self.cluster,
            endpoint="https://ABCDEF.gr7.us-east-1.eks.amazonaws.com",
            ca_bundle="LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==",
            dns_ip="172.20.0.10",
            kubernetes_version=self.kubernetes_version,
        )

    def nodeclass(self, name: str = "default", **spec: Any) -> dict[str, Any]:
        """An EC2NodeClass selecting the seeded subnets/SG by discovery tag, AL2023 latest, the node role."""
        body: dict[str, Any] = {
            "role": self.node_role,
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {DISCOVERY_TAG: self.cluster}}],
            "securityGroupSelectorTerms": [{"tags": {DISCOVERY_TAG: self.cluster}}],
        }
        body.update(spec)
        return {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": name, "uid": f"uid-{name}", "generation": 1},
            "spec": body,
        }

    def spot_prices(self) -> dict[tuple[str, str], float]:
        """The preset's documented spot prices for every bundled type in the seeded zones."""
        return dict(_preset_spot_prices(self.region, frozenset(self.subnet_ids)))

    def add_capacity_reservation(self, reservation: Any) -> None:
        """Create a capacity reservation (a ``capacityreservation.CapacityReservation``) in this account."""
        seed_capacity_reservation(self.account_id, self.region, reservation)

    def reset(self) -> None:
        """Wipe moto's state and seed again (fresh IDs)."""
        _post(f"{self.endpoint_url}/moto-api/reset")
        seed(self)

    def stop(self) -> None:
        self.server.stop()


@functools.lru_cache(maxsize=16)
def _preset_spot_prices(region: str, zones: frozenset[str]) -> dict[tuple[str, str], float]:
    """Computed once per region and zones (a SHA-256 per type and zone, ~20 ms); callers get a copy."""
    catalog = load_catalog(region)
    return {
        (entry.info.name, zone): round(entry.on_demand_price * spot_fraction(entry.info.name, zone), 6)
        for entry in catalog.entries
        for zone in entry.zones
        if zone in zones and "spot" in entry.info.usage_classes
    }


def _post(url: str) -> None:
    request = urllib.request.Request(url, data=b"", method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()


def start_offline_aws(
    *,
    region: str = "us-east-1",
    cluster: str = "adze",
    kubernetes_version: str = "1.32",
    port: int = 0,
    zones: tuple[str, ...] | None = None,
    faithful_fleet_security_groups: bool = True,
    own_account: bool = False,
) -> OfflineAWS:
    """Start moto's threaded server on 127.0.0.1 (a free port by default) and seed it.

    ``faithful_fleet_security_groups`` patches moto (in this process) so fleet
    instances get their launch template's security groups as on AWS; without
    it every moto instance sits in the default group and looks SG-drifted.
    ``own_account``: seed a fresh moto account (its own access key), so runs in one process never
    see each other's VPCs, roles or instances (moto's state is per process, per account).
    """
    from moto.server import ThreadedMotoServer

    install_fleet_patch(faithful_fleet_security_groups)
    install_capacity_reservation_patch()
    if zones is not None and len(zones) > len(SUBNET_CIDRS):
        raise ValueError(f"at most {len(SUBNET_CIDRS)} zones can be seeded")

    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per AWS call otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    host, bound = server.get_host_and_port()
    chosen = tuple(zones) if zones else tuple(f"{region}{suffix}" for suffix in DEFAULT_ZONE_SUFFIXES)
    environment = OfflineAWS(server, f"http://{host}:{bound}", region, cluster, kubernetes_version, chosen)
    if own_account:
        environment.account_id, environment.credentials = _fresh_account()
    try:
        seed(environment)
    except Exception:
        server.stop()
        raise
    return environment


def seed(environment: OfflineAWS) -> None:
    ec2 = environment.client("ec2")
    discovery = [{"Key": DISCOVERY_TAG, "Value": environment.cluster}]
    vpc = ec2.create_vpc(CidrBlock="10.42.0.0/16")["Vpc"]["VpcId"]
    environment.subnet_ids = {}
    for zone, cidr in zip(environment.zones, SUBNET_CIDRS, strict=False):
        subnet = ec2.create_subnet(
            VpcId=vpc,
            CidrBlock=cidr,
            AvailabilityZone=zone,
            TagSpecifications=[{"ResourceType": "subnet", "Tags": discovery}],
        )["Subnet"]["SubnetId"]
        environment.subnet_ids[zone] = subnet
    environment.security_group_id = ec2.create_security_group(
        GroupName=f"{environment.cluster}-nodes",
        Description="nodes",
        VpcId=vpc,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": discovery}],
    )["GroupId"]
    iam = environment.client("iam")
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
    iam.create_role(RoleName=environment.node_role, AssumeRolePolicyDocument=json.dumps(trust))
    environment.ami_ids = _pick_images(ec2)
    seed_eks_ami_parameters(
        environment.region, environment.kubernetes_version, environment.ami_ids, environment.account_id
    )


_PICKED_IMAGES: dict[str, dict[str, str]] = {}
_accounts = itertools.count(1)


def _fresh_account() -> tuple[str, dict[str, str]]:
    """A moto account of its own: an IAM user there and its access key (moto maps keys to accounts)."""
    from moto.iam.models import iam_backends

    account_id = f"{210000000000 + os.getpid() % 10_000 * 1000 + next(_accounts)}"
    backend = iam_backends[account_id]["aws"]
    backend.create_user("us-east-1", "adze-offline")
    key = backend.create_access_key("adze-offline")
    return account_id, {"aws_access_key_id": key.access_key_id, "aws_secret_access_key": key.secret_access_key}


def _pick_images(ec2: Any) -> dict[str, str]:
    """Deterministic stand-ins for the EKS AMIs among moto's public Amazon images (cached per region)."""
    region = ec2.meta.region_name
    if region in _PICKED_IMAGES:
        return dict(_PICKED_IMAGES[region])
    chosen = {}
    for arch, ec2_arch in (("amd64", "x86_64"), ("arm64", "arm64")):
        images = ec2.describe_images(
            Owners=["amazon"],
            Filters=[
                {"Name": "architecture", "Values": [ec2_arch]},
                {"Name": "name", "Values": ["al2023-ami-*"]},
            ],
        )["Images"]
        ids = sorted(image["ImageId"] for image in images)
        if len(ids) < 3:
            raise RuntimeError(f"moto has too few {ec2_arch} images to stand in for EKS AMIs")
        chosen[f"{arch}/standard"] = ids[0]
        chosen[f"{arch}/nvidia"] = ids[1]
        if arch == "amd64":
            chosen[f"{arch}/neuron"] = ids[2]
    _PICKED_IMAGES[region] = dict(chosen)
    return chosen


def eks_parameter_names(kubernetes_version: str, ami_ids: Mapping[str, str]) -> dict[str, str]:
    """SSM parameter name -> image id for the AL2023 and Bottlerocket aliases."""
    names = {}
    for key, image_id in ami_ids.items():
        arch, variant = key.split("/")
        ec2_arch = "x86_64" if arch == "amd64" else "arm64"
        names[
            f"/aws/service/eks/optimized-ami/{kubernetes_version}/amazon-linux-2023/{ec2_arch}/{variant}"
            "/recommended/image_id"
        ] = image_id
        if variant in ("standard", "nvidia"):
            flavour = "" if variant == "standard" else "-nvidia"
            names[
                f"/aws/service/bottlerocket/aws-k8s-{kubernetes_version}{flavour}/{ec2_arch}/latest/image_id"
            ] = image_id
    return names


def seed_eks_ami_parameters(
    region: str, kubernetes_version: str, ami_ids: Mapping[str, str], account_id: str = ACCOUNT_ID
) -> None:
    """Write public EKS AMI parameters straight into moto's SSM backend (same process only)."""
    from moto.ssm.models import Parameter, ssm_backends

    backend = ssm_backends[account_id][region]
    now = datetime.now(UTC)
    for name, image_id in eks_parameter_names(kubernetes_version, ami_ids).items():
        backend._parameters[name] = [
            Parameter(  # type: ignore[abstract]  # moto's own class; it leaves two CloudFormation hooks abstract
                account_id=account_id,
                name=name,
                value=image_id,
                parameter_type="String",
                description=None,
                allowed_pattern=None,
                keyid=None,
                last_modified_date=now,
                version=1,
                data_type="aws:ec2:image",
            )
        ]


@dataclass(slots=True)
class MotoCloud:
    """The real AWS provider wired to a private, seeded moto: what ``simulate --cloud moto`` runs on."""

    env: OfflineAWS
    provider: Any  # AWSCloudProvider
    shortages: CapacityShortages

    def mark_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> None:
        """Make CreateFleet answer InsufficientInstanceCapacity for this offering from now on."""
        self.shortages.offerings.add((capacity_type, instance_type, zone))

    def close(self) -> None:
        self.provider.close()
        set_fleet_faults(None)
        self.env.stop()


def satisfy_nodeclasses(environment: OfflineAWS, nodeclasses: Sequence[Mapping[str, Any]]) -> None:
    """Seed what these EC2NodeClasses select: their subnet and security-group selector tags on the
    seeded subnets and group, their node roles. Selectors by ID or name cannot be met by a fresh
    account (moto picks the IDs): ``ValueError`` names the term."""
    ec2 = environment.client("ec2")
    iam = environment.client("iam")
    trust = json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
    })
    roles = {environment.node_role}
    for nodeclass in nodeclasses:
        name = str((nodeclass.get("metadata") or {}).get("name", ""))
        spec = nodeclass.get("spec") or {}
        for field_name, resources in (
            ("subnetSelectorTerms", list(environment.subnet_ids.values())),
            ("securityGroupSelectorTerms", [environment.security_group_id]),
        ):
            for index, term in enumerate(spec.get(field_name) or []):
                tags = (term or {}).get("tags")
                if not tags or set(term) - {"tags"}:
                    raise ValueError(
                        f"EC2NodeClass {name}: spec.{field_name}[{index}]: only tag selectors can be seeded in moto"
                    )
                values = [{"Key": str(k), "Value": "" if v == "*" else str(v)} for k, v in tags.items()]
                ec2.create_tags(Resources=resources, Tags=values)
        role = spec.get("role")
        if role and role not in roles:
            iam.create_role(RoleName=str(role), AssumeRolePolicyDocument=trust)
            roles.add(str(role))


def open_moto_cloud(
    *,
    cluster: str,
    region: str = "us-east-1",
    zones: tuple[str, ...] | None = None,
    instance_types: tuple[str, ...] | None = None,
    kubernetes_version: str = "1.32",
    now: Any = None,
    monotonic: Any = None,
    prices: Any = None,
    nodeclasses: Sequence[Mapping[str, Any]] = (),
    own_account: bool = False,
    capacity_reservations: Sequence[Any] = (),
    reserved_capacity: bool = True,
) -> MotoCloud:
    """Start and seed moto, and build an ``AWSCloudProvider`` against it.

    EC2NodeClasses should select subnets and security groups by
    ``karpenter.sh/discovery: <cluster>`` and use role ``KarpenterNodeRole-<cluster>``
    (the names the example scenarios use with cluster ``demo``). ``instance_types``
    narrows discovery to those names; prices are the bundled on-demand table and
    the preset's documented spot fractions unless ``prices`` (a ``PriceSource``) is
    given. ``now``/``monotonic`` are the provider's clocks (the simulator's virtual
    time); ``nodeclasses`` are seeded so they resolve (``satisfy_nodeclasses``).
    """
    from reconciler.cloud.aws.provider import AWSCloudProvider, AWSProviderConfig

    env = start_offline_aws(
        region=region, cluster=cluster, kubernetes_version=kubernetes_version, zones=zones, own_account=own_account
    )
    try:
        satisfy_nodeclasses(env, nodeclasses)
        for reservation in capacity_reservations:
            env.add_capacity_reservation(reservation)
    except Exception:
        env.stop()
        raise
    shortages = CapacityShortages()
    set_fleet_faults(shortages)
    filters = ({"Name": "instance-type", "Values": list(instance_types)},) if instance_types else ()
    config = AWSProviderConfig(
        cluster=env.cluster_info(),
        region=region,
        endpoint_url=env.endpoint_url,
        instance_type_filters=filters,
        access_key_id=env.credentials["aws_access_key_id"],
        secret_access_key=env.credentials["aws_secret_access_key"],
        reserved_capacity=reserved_capacity,
    )
    clocks: dict[str, Any] = {"now": now, "monotonic": monotonic}
    provider = AWSCloudProvider(config, prices=prices, **{k: v for k, v in clocks.items() if v is not None})
    if prices is None:
        provider.pricing.set_spot_prices(env.spot_prices())
    return MotoCloud(env, provider, shortages)
