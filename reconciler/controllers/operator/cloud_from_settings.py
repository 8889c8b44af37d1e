"""Building the reconciler's ``CloudProvider`` from settings: AWS (default) or the simulated cloud.

AWS needs what the node user data bakes in: the cluster endpoint and CA bundle
(``CLUSTER_ENDPOINT`` / ``CLUSTER_CA_BUNDLE``, else ``eks:DescribeCluster``),
the Kubernetes version and service CIDR (DescribeCluster) and the cluster DNS
IP (the ``kube-system/kube-dns`` Service, as Karpenter reads it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reconciler.cloud.types import CloudProvider
from reconciler.controllers.runtime.context import Clock, ControllerLog
from reconciler.kube.api import ApiError, Kind, KubeAPI
from reconciler.observability import Metrics
from reconciler.settings import Settings

log = ControllerLog("cloudprovider")
SERVICE = Kind("v1", "Service")


class StartupError(RuntimeError):
    """The reconciler cannot start; the message says what to set or fix (one line)."""


def simulated_cloud(catalog_path: str | None, clock: Clock) -> CloudProvider:
    """The simulated cloud with a scenario file's ``catalog:`` section, or the aws-us-east-1 preset."""
    from reconciler.cloud.sim.provider import SimulatedCloud
    from reconciler.sim.catalog import build_catalog, catalog_shaper, shutdown_seconds
    from reconciler.sim.scenario import ScenarioError, load_scenario_file

    try:
        if catalog_path:
            if not Path(catalog_path).is_file():
                raise StartupError(f"--catalog: {catalog_path} does not exist")
            catalog = load_scenario_file(catalog_path).catalog
        else:
            catalog = {"preset": "aws-us-east-1"}
        return SimulatedCloud(build_catalog(catalog), clock=clock.now, shaper=catalog_shaper(catalog),
                              shutdown_seconds=shutdown_seconds(catalog))
    except ScenarioError as err:
        raise StartupError(f"--catalog {catalog_path}: {err}") from None


async def aws_cloud(settings: Settings, env: Mapping[str, str], kube: KubeAPI,
                    metrics: Metrics | None = None) -> CloudProvider:
    from reconciler.cloud.aws.provider import AWSCloudProvider, AWSProviderConfig

    cluster = await discover_cluster(settings, env, kube)
    try:
        config = AWSProviderConfig(
            cluster=cluster,
            region=settings.aws_region,
            endpoint_url=env.get("AWS_ENDPOINT_URL") or None,
            vm_memory_overhead_percent=float(env.get("VM_MEMORY_OVERHEAD_PERCENT") or 0.075),
            reserved_enis=int(env.get("RESERVED_ENIS") or 0),
            disable_dry_run=_flag(env, "DISABLE_DRY_RUN"),
            reserved_capacity=settings.gate("ReservedCapacity"),
        )
    except ValueError as err:
        raise StartupError(f"VM_MEMORY_OVERHEAD_PERCENT / RESERVED_ENIS: {err}") from None
    provider = AWSCloudProvider(config, metrics=metrics)
    try:
        await check_ec2_access(provider)
    except Exception as err:
        provider.close()
        raise StartupError(f"cannot reach EC2 in {settings.aws_region}: {err}") from None
    return provider


def _flag(env: Mapping[str, str], name: str) -> bool:
    text = (env.get(name) or "false").strip().lower()
    if text not in ("true", "false"):
        raise StartupError(f"{name}: {env.get(name)!r} must be true or false")
    return text == "true"


async def check_ec2_access(provider: Any) -> None:
    """Karpenter's start-up check: a DescribeInstanceTypes dry run, an action the controller policy grants
    (DescribeAvailabilityZones, used before, is not in it and crash-looped the reconciler in a real account).
    AWS answers a permitted dry run with the DryRunOperation error; some endpoints just answer."""
    from botocore.exceptions import ClientError

    try:
        await provider.caller.call(provider.clients.ec2.describe_instance_types, DryRun=True, MaxResults=5)
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") != "DryRunOperation":
            raise


async def discover_cluster(settings: Settings, env: Mapping[str, str], kube: KubeAPI) -> Any:
    from reconciler.cloud.aws.userdata import ClusterInfo

    endpoint = settings.cluster_endpoint or env.get("CLUSTER_ENDPOINT", "")
    ca_bundle = env.get("CLUSTER_CA_BUNDLE", "")
    described: dict[str, Any] = {}
    try:
        described = await asyncio.to_thread(_describe_cluster, settings, env)
    except Exception as err:
        if not (endpoint and ca_bundle):
            raise StartupError(
                f"cannot discover cluster {settings.cluster_name!r}: set CLUSTER_ENDPOINT and CLUSTER_CA_BUNDLE "
                f"(eks:DescribeCluster failed: {err})"
            ) from None
        log.warning("eks:DescribeCluster failed; using CLUSTER_ENDPOINT/CLUSTER_CA_BUNDLE", error=str(err))
    network = described.get("kubernetesNetworkConfig") or {}
    info: dict[str, Any] = {
        "name": settings.cluster_name,
        "endpoint": endpoint or described.get("endpoint", ""),
        "ca_bundle": ca_bundle or (described.get("certificateAuthority") or {}).get("data", ""),
        "dns_ip": await _cluster_dns_ip(kube),
    }
    if described.get("version"):
        info["kubernetes_version"] = str(described["version"])
    # nodeadm's cluster CIDR: the IPv4 service range, else the IPv6 one (an IPv6 cluster), as upstream reads it.
    if network.get("serviceIpv4Cidr") or network.get("serviceIpv6Cidr"):
        info["service_cidr"] = str(network.get("serviceIpv4Cidr") or network["serviceIpv6Cidr"])
    if not info["endpoint"] or not info["ca_bundle"]:
        raise StartupError(f"cluster {settings.cluster_name!r} has no endpoint or CA bundle; set CLUSTER_ENDPOINT "
                           "and CLUSTER_CA_BUNDLE")
    return ClusterInfo(**info)


def _describe_cluster(settings: Settings, env: Mapping[str, str]) -> dict[str, Any]:
    from reconciler.cloud.aws.clients import new_session

    client = new_session().client("eks", region_name=settings.aws_region,
                                  endpoint_url=env.get("AWS_ENDPOINT_URL") or None)
    return dict(client.describe_cluster(name=settings.cluster_name)["cluster"])


async def _cluster_dns_ip(kube: KubeAPI) -> str:
    try:
        service = await kube.get(SERVICE, "kube-dns", "kube-system")
    except ApiError:
        return ""  # no kube-dns Service: the AMI's default cluster DNS applies
    return str((service.get("spec") or {}).get("clusterIP") or "")


def close_cloud(cloud: CloudProvider) -> None:
    close = getattr(cloud, "close", None)
    if callable(close):
        close()
