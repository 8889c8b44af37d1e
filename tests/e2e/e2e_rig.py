"""The end-to-end rig: fake API server over HTTP + moto, the real ``App`` and the cluster's other parts.

The reconciler under test talks HTTP to ``FakeApiServer`` through ``LiveKube``
and to moto through ``AWSCloudProvider`` (CreateFleet, DescribeInstances,
TerminateInstances...). The parts Adze does not own (kubelets, kube-scheduler,
workload controllers: ``ctrl_cluster.FakeCluster``) act on the server's
in-memory store directly and list instances through their own provider.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from ctrl_cluster import CrashingCloud, CrashingKube, CrashSwitch, FakeCluster, Inventory, inventory
from ctrl_objects import deployment, fast_settings, fast_timings, nodepool
from support.fake_apiserver import FakeApiServer
from support.timescale import scaled

from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.cloud.aws.provider import AWSCloudProvider, AWSProviderConfig
from reconciler.controllers.aws_provider.interruption_controller import InterruptionLoop
from reconciler.controllers.operator.app import App
from reconciler.controllers.operator.manager import BackgroundLoop
from reconciler.controllers.runtime.context import ControllerContext, SystemClock, Timings
from reconciler.kube.leader import LeaderElectionConfig
from reconciler.kube.live import LiveKube
from reconciler.model import labels as wk
from reconciler.observability import Metrics, configure_logging
from reconciler.settings import Settings
from reconciler.sim.workloads import create_with_status

FAMILIES = ("c5.*", "m5.*")
LEASE_NAME = "adze-leader-election"


def e2e_lease(identity: str, name: str = LEASE_NAME) -> LeaderElectionConfig:
    """A replica's Lease with Karpenter's default timings (15 s lease, 10 s renew deadline), scaled by
    ADZE_TEST_TIME_SCALE. A replica shares one GIL with moto and the fake API server; with a 4 s renew
    deadline it missed renewals on a busy 2-core machine and exited (as it should), so nothing converged. A
    dead leader's lease expires within the scaled 15 s; only failover tests wait for that."""
    return LeaderElectionConfig(namespace="kube-system", name=name, identity=identity, lease_duration=scaled(15.0),
                                renew_deadline=scaled(10.0), retry_period=scaled(0.25))


def e2e_settings(**overrides: Any) -> Settings:
    """The unit tests' fast settings with Karpenter's own batch window (1 s idle, 10 s max), scaled. With a 50 ms
    window a loaded CI machine split the events of one Deployment's pods across passes and launched two
    NodeClaims where one fits, so counts of created NodeClaims depended on the load."""
    return fast_settings(**{"batch_idle_duration": scaled(1.0), "batch_max_duration": scaled(10.0), **overrides})


def e2e_timings(**overrides: Any) -> Timings:
    """The unit tests' fast timings with Karpenter's nomination period (10 s), scaled. A provisioner pass renews
    the nomination of the node its pods wait for; with a 0.5 s period a pass slowed by load let it lapse, and
    consolidation took the still-empty node as Empty and the pods got another (created/deleted churn)."""
    return fast_timings(**{"gc_min_age": 2.0, "nomination": scaled(10.0), **overrides})


def aws_provider(aws: OfflineAWS, metrics: Metrics | None = None) -> AWSCloudProvider:
    provider = AWSCloudProvider(AWSProviderConfig(
        cluster=aws.cluster_info(),
        region=aws.region,
        endpoint_url=aws.endpoint_url,
        instance_type_filters=({"Name": "instance-type", "Values": list(FAMILIES)},),
        access_key_id="testing",
        secret_access_key="testing",
        retry_mode="standard",
        max_attempts=5,
    ), metrics=metrics)
    provider.pricing.set_spot_prices(aws.spot_prices())
    return provider


def e2e_nodepool() -> dict[str, Any]:
    pool = nodepool()
    pool["spec"]["template"]["spec"]["requirements"] += [
        {"key": wk.INSTANCE_FAMILY, "operator": "In", "values": ["c5"]},
        {"key": wk.INSTANCE_SIZE, "operator": "In", "values": ["large", "xlarge", "2xlarge"]},
    ]
    return pool


@dataclass
class Replica:
    """One reconciler process: its own HTTP client, AWS provider, metrics and (maybe) crash switch."""

    app: App
    kube: LiveKube
    cloud: AWSCloudProvider
    task: asyncio.Task[int] | None = None
    switch: CrashSwitch | None = None

    def disruption_passes(self) -> int:
        """Disruption passes this replica has decided so far (its scheduling-duration samples)."""
        count = self.app.metrics.registry.get_sample_value(
            "karpenter_scheduler_scheduling_duration_seconds_count", {"controller": "disruption"})
        return int(count or 0)

    def observed_holder(self) -> str:
        """Who holds the Lease as this replica's elector last read it ("" before its first read)."""
        return self.app.elector.observed_holder if self.app.elector is not None else ""

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        await self.kube.close()
        self.cloud.close()


@dataclass
class E2E:
    aws: OfflineAWS
    server: FakeApiServer = field(default_factory=lambda: FakeApiServer(bookmark_interval=0.05, pod_shutdown_seconds=0))
    clock: SystemClock = field(default_factory=SystemClock)
    logs: io.StringIO = field(default_factory=io.StringIO)
    replicas: list[Replica] = field(default_factory=list)
    cluster: FakeCluster | None = None
    observer: AWSCloudProvider | None = None

    async def start(self, replicas: int = 5) -> None:
        configure_logging("info", stream=self.logs)
        await self.server.start()
        kube = self.server.kube
        for manifest in (self.aws.nodeclass(), e2e_nodepool(), deployment(replicas=replicas, cpu="1500m")):
            manifest["metadata"].pop("uid", None)
            await create_with_status(kube, manifest)
        self.observer = aws_provider(self.aws)
        self.cluster = FakeCluster(kube, self.observer, self.clock.now)

    def replica(self, *, lease: LeaderElectionConfig | None = None, switch: CrashSwitch | None = None,
                seed: int = 1, serve: bool = False, interruption_queue: str = "", token: str = "t",
                extra_loops: Callable[[ControllerContext, AWSCloudProvider], dict[str, BackgroundLoop]] | None = None,
                ) -> Replica:
        kube = LiveKube.for_url(self.server.url, token=token, watch_timeout=5)
        metrics = Metrics()  # one registry per process, the provider's families on it (as ``run`` builds it)
        cloud = aws_provider(self.aws, metrics)
        settings = e2e_settings(cluster_name=self.aws.cluster, metrics_port=0, health_probe_port=0,
                                interruption_queue=interruption_queue)

        def loops(ctx: ControllerContext) -> dict[str, BackgroundLoop]:
            found: dict[str, BackgroundLoop] = dict(extra_loops(ctx, cloud)) if extra_loops else {}
            if interruption_queue:
                found["interruption"] = InterruptionLoop(ctx, cloud)
            return found

        app = App(
            settings,
            CrashingKube(kube, switch) if switch else kube,  # type: ignore[arg-type]
            CrashingCloud(cloud, switch) if switch else cloud,  # type: ignore[arg-type]
            leader=lease, timings=e2e_timings(), clock=self.clock, metrics=metrics,
            serve=serve, seed=seed, extra_loops=loops if interruption_queue or extra_loops else None,
        )
        replica = Replica(app, kube, cloud, switch=switch)
        self.replicas.append(replica)
        return replica

    def launch(self, replica: Replica) -> Replica:
        replica.task = asyncio.create_task(replica.app.run())
        return replica

    async def inventory(self) -> Inventory:
        assert self.observer is not None
        return await inventory(self.server.kube, self.observer)

    async def converged(self, instances: int | None = None) -> bool:
        inv = await self.inventory()
        return inv.converged and bool(inv.instances) and (instances is None or len(inv.instances) == instances)

    def ec2_instances(self) -> list[dict[str, Any]]:
        """Every instance moto knows for this cluster, terminated ones included."""
        ec2 = self.aws.client("ec2")
        reservations = ec2.describe_instances(
            Filters=[{"Name": "tag:eks:eks-cluster-name", "Values": [self.aws.cluster]}]
        )["Reservations"]
        return [i for r in reservations for i in r["Instances"]]

    def log_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.logs.getvalue().splitlines() if line.startswith("{")]

    async def close(self) -> None:
        for replica in self.replicas:
            await replica.stop()
        if self.observer is not None:
            self.observer.close()
        await self.server.stop()


@contextlib.asynccontextmanager
async def e2e(aws: OfflineAWS, replicas: int = 5) -> AsyncIterator[E2E]:
    rig = E2E(aws)
    await rig.start(replicas)
    assert rig.cluster is not None
    surroundings = asyncio.create_task(rig.cluster.run(interval=0.05))
    try:
        yield rig
    finally:
        surroundings.cancel()
        await asyncio.gather(surroundings, return_exceptions=True)
        await rig.close()
    assert not rig.server.violations, rig.server.violations
