"""The process shell: start-up checks, leader election, health/metrics endpoints, shutdown."""

from __future__ import annotations

import asyncio
import urllib.request
from pathlib import Path

import pytest
from ctrl_cluster import FakeCluster
from ctrl_harness import wait_for
from ctrl_objects import catalog, deployment, fast_settings, fast_timings, nodeclass, nodepool
from support.timescale import scaled

from reconciler.cloud.sim.provider import SimulatedCloud
from reconciler.controllers.operator.app import (
    EXIT_FAILED,
    EXIT_INVALID,
    EXIT_OK,
    App,
    leader_config,
    main,
    missing_settings,
)
from reconciler.controllers.runtime.context import SystemClock
from reconciler.kube.api import LEASE, NODECLAIM
from reconciler.kube.leader import LeaderElectionConfig
from reconciler.kube.memory import MemoryKube
from reconciler.observability import Metrics
from reconciler.settings import Settings
from reconciler.sim.workloads import create_with_status


@pytest.mark.parametrize(
    ("env", "argv", "expected"),
    [
        ({"AWS_REGION": "us-east-1"}, [], "error: CLUSTER_NAME is not set"),
        ({"CLUSTER_NAME": "c"}, [], "error: the AWS region is not set (AWS_REGION or AWS_DEFAULT_REGION)"),
        ({"CLUSTER_NAME": "c", "AWS_REGION": "us-east-1", "BATCH_IDLE_DURATION": "soon"}, [],
         "error: BATCH_IDLE_DURATION: 'soon' is not a duration"),
        ({"CLUSTER_NAME": "c", "AWS_REGION": "us-east-1"}, ["--catalog", "x.yaml"],
         "error: --catalog only applies with --cloud simulated"),
        ({"CLUSTER_NAME": "c"}, ["--cloud", "simulated", "--kubeconfig", "/nonexistent/kubeconfig"],
         "error: no Kubernetes configuration: kubeconfig /nonexistent/kubeconfig does not exist"),
    ],
)
def test_refuses_to_start_with_one_clear_line(
    env: dict[str, str], argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv, env=env) == EXIT_INVALID
    err = capsys.readouterr().err.strip()
    assert err.startswith(expected), err
    assert "\n" not in err and "Traceback" not in err


def test_lease_defaults_are_karpenters(tmp_path: Path) -> None:
    config = leader_config({"HOSTNAME": "pod-a"}, namespace_file=tmp_path / "missing")
    assert (config.name, config.namespace) == ("karpenter-leader-election", "kube-system")
    # Karpenter's chart sets SYSTEM_NAMESPACE: in its Deployment Adze campaigns for Karpenter's own Lease.
    assert leader_config({"SYSTEM_NAMESPACE": "karpenter"}, namespace_file=tmp_path / "missing").namespace \
        == "karpenter"
    assert config.identity.startswith("pod-a_")
    namespace_file = tmp_path / "namespace"
    namespace_file.write_text("karpenter\n")
    assert leader_config({}, namespace_file=namespace_file).namespace == "karpenter"
    explicit = leader_config({"LEADER_ELECTION_NAME": "x", "LEADER_ELECTION_NAMESPACE": "ops"},
                             namespace_file=namespace_file)
    assert (explicit.name, explicit.namespace) == ("x", "ops")


def _lease(identity: str) -> LeaderElectionConfig:
    # Karpenter's lease timings: with 2/1.5 s a busy machine made the app miss a renewal and exit.
    return LeaderElectionConfig(namespace="kube-system", name="adze-leader-election", identity=identity,
                                lease_duration=scaled(15.0), renew_deadline=scaled(10.0), retry_period=scaled(0.2))


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=scaled(15)) as response:
        return response.status, response.read().decode()


async def test_app_leads_serves_probes_and_metrics_and_releases_the_lease_on_stop() -> None:
    clock = SystemClock()
    kube = MemoryKube(clock=clock.now, seed=5)
    cloud = SimulatedCloud(catalog(), clock=clock.now)
    for manifest in (nodeclass(), nodepool(), deployment(replicas=3)):
        await create_with_status(kube, manifest)
    app = App(fast_settings(metrics_port=0, health_probe_port=0), kube, cloud, leader=_lease("me"),
              timings=fast_timings(), clock=clock, metrics=Metrics())
    stop = asyncio.Event()
    cluster = asyncio.create_task(FakeCluster(kube, cloud, clock.now).run())
    running = asyncio.create_task(app.run(stop))
    try:
        assert await wait_for(lambda: _has_initialized_claim(kube), timeout=30)
        assert app.server is not None
        status, _ = await asyncio.to_thread(_get, f"http://127.0.0.1:{app.server.health_port}/healthz")
        ready, _ = await asyncio.to_thread(_get, f"http://127.0.0.1:{app.server.health_port}/readyz")
        assert (status, ready) == (200, 200)
        _, metrics = await asyncio.to_thread(_get, f"http://127.0.0.1:{app.server.metrics_port}/metrics")
        assert ('karpenter_nodeclaims_created_total{min_values_relaxed="false",nodepool="default",'
                'reason="provisioned"} 1.0') in metrics
        assert 'karpenter_cluster_state_synced 1.0' in metrics
        assert kube.peek(LEASE, "adze-leader-election", "kube-system")["spec"]["holderIdentity"] == "me"
        stop.set()
        assert await running == EXIT_OK
        assert not kube.peek(LEASE, "adze-leader-election", "kube-system")["spec"].get("holderIdentity")
    finally:
        cluster.cancel()
        running.cancel()
        await asyncio.gather(cluster, running, return_exceptions=True)


async def test_app_exits_with_failure_when_another_replica_takes_the_lease() -> None:
    clock = SystemClock()
    kube = MemoryKube(clock=clock.now, seed=5)
    cloud = SimulatedCloud(catalog(), clock=clock.now)
    app = App(fast_settings(), kube, cloud, leader=_lease("me"), timings=fast_timings(), clock=clock,
              metrics=Metrics(), serve=False)
    running = asyncio.create_task(app.run())
    assert await wait_for(lambda: _holder_is(kube, "me"), timeout=15)
    lease = kube.peek(LEASE, "adze-leader-election", "kube-system")
    lease["spec"]["holderIdentity"] = "usurper"
    await kube.replace(lease)
    assert await asyncio.wait_for(running, timeout=scaled(5)) == EXIT_FAILED


async def _has_initialized_claim(kube: MemoryKube) -> bool:
    return any(
        c["type"] == "Initialized" and c["status"] == "True"
        for claim in kube.objects(NODECLAIM) for c in (claim.get("status") or {}).get("conditions") or []
    )


async def _holder_is(kube: MemoryKube, identity: str) -> bool:
    lease = kube.peek(LEASE, "adze-leader-election", "kube-system")
    return bool(lease) and lease["spec"].get("holderIdentity") == identity


# Karpenter v1.14's chart (charts/karpenter/templates/deployment.yaml), rendered with its default values.
KARPENTER_CHART_ENV = {
    "KUBERNETES_MIN_VERSION": "1.19.0-0", "KARPENTER_SERVICE": "karpenter", "LOG_LEVEL": "info",
    "METRICS_PORT": "8080", "HEALTH_PROBE_PORT": "8081", "SYSTEM_NAMESPACE": "karpenter", "CPU_REQUESTS": "1000",
    "MEMORY_LIMIT": "1073741824",
    "FEATURE_GATES": "ReservedCapacity=true,SpotToSpotConsolidation=false,NodeRepair=false,NodeOverlay=false,"
                     "StaticCapacity=false,CapacityBuffer=false",
    "BATCH_MAX_DURATION": "10s", "BATCH_IDLE_DURATION": "1s", "PREFERENCE_POLICY": "Respect",
    "MIN_VALUES_POLICY": "Strict", "CLUSTER_NAME": "prod", "CLUSTER_ENDPOINT": "", "ISOLATED_VPC": "false",
    "EKS_CONTROL_PLANE": "false", "VM_MEMORY_OVERHEAD_PERCENT": "0.075", "INTERRUPTION_QUEUE": "prod",
    "ENABLE_ZONAL_SHIFT": "false", "RESERVED_ENIS": "0", "IGNORE_DRA_REQUESTS": "true",
    "DISABLE_CLUSTER_STATE_OBSERVABILITY": "false", "DISABLE_DRY_RUN": "false", "AMI_REFRESH_INTERVAL": "1m",
    "HOSTNAME": "karpenter-7c9d8b5f4-x2x9k",
}


def test_in_karpenters_deployment_adze_reads_its_environment_and_campaigns_for_its_lease(tmp_path: Path) -> None:
    """docs/deploying.md's in-place migration swaps the image in Karpenter's Deployment: Adze must start from
    the chart's environment and campaign for Karpenter's Lease in Karpenter's namespace."""
    settings = Settings.from_env(KARPENTER_CHART_ENV)
    assert (settings.cluster_name, settings.interruption_queue, settings.batch_max_duration) == ("prod", "prod", 10.0)
    # The chart leaves the region to the SDK; Adze needs it named (IRSA injects AWS_REGION; else set it).
    assert missing_settings(settings, "aws").startswith("the AWS region is not set")
    assert not missing_settings(Settings.from_env({**KARPENTER_CHART_ENV, "AWS_REGION": "us-west-2"}), "aws")
    config = leader_config(KARPENTER_CHART_ENV, namespace_file=tmp_path / "missing")
    assert (config.name, config.namespace) == ("karpenter-leader-election", "karpenter")
