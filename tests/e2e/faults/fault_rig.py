"""The rig for fault tests: reconciler replicas (the real ``App``), each behind its own ``FaultProxy``.

``ApiServer`` is what a test needs of an API server, whichever it is: its URL, an admin client (``KubeAPI``)
to seed and inspect objects, and ``surroundings(cloud)``, the parts of a cluster Adze does not own (kubelets
registering a Node per running instance, kube-scheduler, workload controllers). ``fake_apiserver()`` gives
the project's fake API server with ``ctrl_cluster.FakeCluster`` as the surroundings; a real control plane
gives its own (its kubelet stand-in, kube-scheduler, controller-manager).

Every replica talks to the API server only through its proxy, so every request it makes is recorded there
(``replica.proxy.requests``) and can be stalled, reset or answered with an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import json
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ctrl_cluster import FakeCluster
from e2e_rig import Replica, aws_provider, e2e_settings, e2e_timings
from support.adze_cluster import adze_cluster
from support.control_plane import ControlPlane
from support.fake_apiserver import FakeApiServer
from support.fault_proxy import FaultProxy

from components.common import LEADER_ELECTION_LEASE
from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.cloud.aws.provider import AWSCloudProvider
from reconciler.cloud.types import CloudProvider
from reconciler.controllers.operator.app import App
from reconciler.controllers.operator.manager import BackgroundLoop
from reconciler.controllers.runtime.context import ControllerContext, Timings
from reconciler.kube.api import KubeAPI, Manifest
from reconciler.kube.leader import LeaderElectionConfig
from reconciler.kube.live import LiveKube
from reconciler.observability import Metrics, configure_logging
from reconciler.sim.workloads import create_with_status

Surroundings = Callable[[CloudProvider], AbstractAsyncContextManager[None]]


@dataclass
class ApiServer:
    """``namespace`` holds the test's workloads and the leader-election Lease (``lease_name``); a replica
    presents ``token`` (its own name when None) through its proxy, which reaches ``url`` over TLS with
    ``upstream_ssl`` when the server is HTTPS."""

    name: str
    url: str
    admin: KubeAPI
    surroundings: Surroundings
    violations: Callable[[], list[str]] = list
    namespace: str = "default"
    lease_namespace: str = "kube-system"
    lease_name: str = "adze-leader-election"
    token: str | None = None
    upstream_ssl: ssl.SSLContext | None = None

    def lease(self, config: LeaderElectionConfig) -> LeaderElectionConfig:
        """``config`` with this server's Lease (the one the replicas' RBAC lets them take)."""
        return dataclasses.replace(config, namespace=self.lease_namespace, name=self.lease_name)


@contextlib.asynccontextmanager
async def fake_apiserver(bookmark_interval: float = 0.05) -> AsyncIterator[ApiServer]:
    server = FakeApiServer(bookmark_interval=bookmark_interval)
    await server.start()

    @contextlib.asynccontextmanager
    async def surroundings(cloud: CloudProvider) -> AsyncIterator[None]:
        cluster = FakeCluster(server.kube, cloud, lambda: datetime.now(UTC))
        task = asyncio.create_task(cluster.run(interval=0.05))
        try:
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    try:
        yield ApiServer("fake", server.url, server.kube, surroundings, lambda: server.violations)
    finally:
        await server.stop()


@contextlib.asynccontextmanager
async def real_apiserver(plane: ControlPlane, aws: OfflineAWS, namespace: str, workdir: Path
                         ) -> AsyncIterator[ApiServer]:
    """The real control plane for one test: its own namespace (workloads and the Lease), EKS nodes joining
    from ``aws``'s instances, the reconciler's ServiceAccount token; everything removed afterwards."""

    @contextlib.asynccontextmanager
    async def surroundings(_cloud: CloudProvider) -> AsyncIterator[None]:
        yield  # kube-scheduler and kube-controller-manager run with the plane, the nodes with the cluster

    with adze_cluster(plane, aws, namespace, workdir) as cluster:
        identity = cluster.identity.identity
        assert plane.admin is not None, "the control plane is started"
        admin = await LiveKube.from_environment(kubeconfig=str(plane.admin.kubeconfig))
        try:
            yield ApiServer("real", plane.url, admin, surroundings, cluster.denied_requests, namespace=namespace,
                            lease_namespace=namespace, lease_name=LEADER_ELECTION_LEASE, token=identity.token,
                            upstream_ssl=identity.context)
        finally:
            await admin.close()


class SteppedClock:
    """The system clock with a wall-clock offset a test can step (NTP stepping a node's clock); the monotonic
    clock is untouched, as on a real machine."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def monotonic(self) -> float:
        import time

        return time.monotonic()

    def step(self, seconds: float) -> None:
        self.offset += timedelta(seconds=seconds)


@dataclass(kw_only=True)
class ProxiedReplica(Replica):
    """One reconciler process talking to the API server only through its own ``proxy``."""

    name: str
    proxy: FaultProxy

    async def stop(self) -> None:
        await super().stop()
        await self.proxy.stop()


@dataclass
class FaultRig:
    server: ApiServer
    aws: OfflineAWS
    logs: io.StringIO = field(default_factory=io.StringIO)
    replicas: list[ProxiedReplica] = field(default_factory=list)
    observer: AWSCloudProvider | None = None
    _surroundings: AbstractAsyncContextManager[None] | None = None

    async def start(self) -> None:
        configure_logging("info", stream=self.logs)
        self.observer = aws_provider(self.aws)
        self._surroundings = self.server.surroundings(self.observer)
        await self._surroundings.__aenter__()

    async def seed(self, *manifests: Manifest) -> None:
        for manifest in manifests:
            metadata = manifest["metadata"]
            for generated in ("uid", "generation"):
                metadata.pop(generated, None)
            if metadata.get("namespace"):  # a namespaced object: it belongs in the test's namespace
                metadata["namespace"] = self.server.namespace
            await create_with_status(self.server.admin, manifest)

    async def replica(
        self, name: str, *, lease: LeaderElectionConfig | None = None, timings: Timings | None = None,
        clock: Any = None, watch_timeout: float = 5.0, settings: dict[str, Any] | None = None,
        extra_loops: Callable[[ControllerContext, AWSCloudProvider], dict[str, BackgroundLoop]] | None = None,
    ) -> ProxiedReplica:
        proxy = FaultProxy(self.server.url, upstream_ssl=self.server.upstream_ssl)
        await proxy.start()
        kube = LiveKube.for_url(proxy.url, token=self.server.token or name, watch_timeout=watch_timeout)
        metrics = Metrics()
        cloud = aws_provider(self.aws, metrics)
        loops = (lambda ctx: extra_loops(ctx, cloud)) if extra_loops is not None else None
        app = App(
            e2e_settings(cluster_name=self.aws.cluster, metrics_port=0, health_probe_port=0, **(settings or {})),
            kube, cloud, leader=lease, timings=timings or e2e_timings(), metrics=metrics,
            serve=False, seed=len(self.replicas) + 1, extra_loops=loops, **({"clock": clock} if clock else {}),
        )
        replica = ProxiedReplica(app, kube, cloud, name=name, proxy=proxy)
        self.replicas.append(replica)
        return replica

    def launch(self, replica: ProxiedReplica) -> ProxiedReplica:
        replica.task = asyncio.create_task(replica.app.run(), name=f"replica-{replica.name}")
        return replica

    def log_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.logs.getvalue().splitlines() if line.startswith("{")]

    def tracebacks(self) -> int:
        return sum(1 for line in self.log_lines() if "Traceback" in str(line.get("exception", "")))

    async def close(self) -> None:
        for replica in self.replicas:
            await replica.stop()
        if self._surroundings is not None:
            await self._surroundings.__aexit__(None, None, None)
        if self.observer is not None:
            self.observer.close()


@contextlib.asynccontextmanager
async def fault_rig(server: ApiServer, aws: OfflineAWS) -> AsyncIterator[FaultRig]:
    rig = FaultRig(server, aws)
    await rig.start()
    try:
        yield rig
    finally:
        await rig.close()
    assert not server.violations(), server.violations()
