"""``python -m reconciler run``: the live reconciler process.

Start-up: settings from Karpenter's environment variables (refusing, with one
line on stderr and exit code 2, when CLUSTER_NAME or the AWS region is missing,
a value is malformed, or a feature gate or setting asks for something Adze does
not implement: ``reconciler.api.support``), Kubernetes configuration from a kubeconfig or the
pod's service account, the cloud (AWS by default; ``--cloud simulated`` for
local runs), ``/metrics`` on METRICS_PORT (8080) and ``/healthz`` + ``/readyz``
on HEALTH_PROBE_PORT (8081). Then it campaigns for the Lease
LEADER_ELECTION_NAME (default ``karpenter-leader-election``, Karpenter's own, so
Adze and Karpenter in one namespace never act together: whichever holds it leads,
the other waits) in LEADER_ELECTION_NAMESPACE (default: SYSTEM_NAMESPACE, the pod's
namespace, else ``kube-system``); only the leader runs the
controllers, plus the AWS cloud's periodic loops (prices, instance types,
launch-template garbage collection; ``controllers.aws_provider.refresh_loops``) and, with
INTERRUPTION_QUEUE, the interruption consumer. SIGTERM/SIGINT stop the controllers and release the lease so the
standby takes over at once. Losing the lease ends the process (exit code 1) so
no two replicas ever act together: at the renew deadline the controllers are cancelled, and the
leadership gate (``kube.leadership``) refuses every write and every AWS request attempt from then on,
including the retries and pages of a boto3 call still running in its thread.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import signal
import socket
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from reconciler.api.support_check import environment_check
from reconciler.cloud.types import CloudProvider
from reconciler.controllers.exporters.metered_clients import MeteredCloud, MeteredKube
from reconciler.controllers.operator.cloud_from_settings import StartupError, aws_cloud, close_cloud, simulated_cloud
from reconciler.controllers.operator.manager import BackgroundLoop, Reconciler
from reconciler.controllers.runtime.context import Clock, ControllerContext, ControllerLog, SystemClock, Timings
from reconciler.kube.api import KubeAPI
from reconciler.kube.leader import LeaderElectionConfig, LeaderElector, LeadershipLost
from reconciler.kube.leadership import GatedKube
from reconciler.observability import EventRecorder, HealthChecks, Metrics, ObservabilityServer, configure_logging
from reconciler.settings import Settings, SettingsError

log = ControllerLog("app")
EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2
DEFAULT_LEASE_NAME = "karpenter-leader-election"  # Karpenter's: one leader between the two
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def leader_config(env: Mapping[str, str], namespace_file: Path = SERVICE_ACCOUNT_NAMESPACE) -> LeaderElectionConfig:
    namespace = env.get("LEADER_ELECTION_NAMESPACE") or env.get("SYSTEM_NAMESPACE") or ""
    if not namespace and namespace_file.is_file():
        namespace = namespace_file.read_text().strip()
    host = env.get("POD_NAME") or env.get("HOSTNAME") or socket.gethostname()
    return LeaderElectionConfig(
        namespace=namespace or "kube-system",
        name=env.get("LEADER_ELECTION_NAME") or DEFAULT_LEASE_NAME,
        identity=f"{host}_{uuid.uuid4()}",
    )


def app_leader(settings: Settings, env: Mapping[str, str]) -> LeaderElectionConfig | None:
    """The Lease to campaign for; None with DISABLE_LEADER_ELECTION=true (the controllers run at once)."""
    return leader_config(env) if settings.leader_elect else None


def missing_settings(settings: Settings, cloud: str) -> str:
    """The one-line reason the reconciler must not start, or ""."""
    if not settings.cluster_name:
        return "CLUSTER_NAME is not set (the EKS cluster this reconciler manages)"
    if cloud == "aws" and not settings.aws_region:
        return "the AWS region is not set (AWS_REGION or AWS_DEFAULT_REGION)"
    return ""


@dataclass
class App:
    """One reconciler process; ``main`` builds it from the environment, tests build it directly."""

    settings: Settings
    kube: KubeAPI
    cloud: CloudProvider
    leader: LeaderElectionConfig | None = None
    timings: Timings = field(default_factory=Timings)
    clock: Clock = field(default_factory=SystemClock)
    metrics: Metrics = field(default_factory=Metrics)
    extra_loops: Callable[[ControllerContext], dict[str, BackgroundLoop]] | None = None
    serve: bool = True
    seed: int | None = None
    reconciler: Reconciler | None = None
    elector: LeaderElector | None = None
    server: ObservabilityServer | None = None
    _kube: KubeAPI | None = field(default=None, repr=False)

    async def run(self, stop: asyncio.Event | None = None) -> int:
        """Until ``stop`` is set (then release the lease, exit 0) or leadership is lost (exit 1)."""
        stop = stop or asyncio.Event()
        self.metrics.build_info.labels(**build_labels()).set(1)
        self._kube = MeteredKube(self.kube, self.metrics.runtime)
        work: asyncio.Task[None] | None = None
        health = HealthChecks(
            liveness={"controllers": lambda: work is None or not work.done()},
            readiness={"synced-or-standby": self._ready},
        )
        if self.serve:
            self.server = ObservabilityServer(self.metrics, health, metrics_port=self.settings.metrics_port,
                                              health_port=self.settings.health_probe_port)
            await self.server.start()
        if self.leader is not None:
            self.metrics.runtime.leader.labels(name=self.leader.name).set(0)
            self.elector = LeaderElector(self._kube, self.leader, clock=self.clock.now,
                                         monotonic=self.clock.monotonic)
            work = asyncio.create_task(self.elector.run(self._lead), name="leader")
            log.info("waiting for leadership", lease=f"{self.leader.namespace}/{self.leader.name}",
                     identity=self.leader.identity)
        else:
            work = asyncio.create_task(self._lead(), name="controllers")
        stopping = asyncio.create_task(stop.wait(), name="stop")
        try:
            await asyncio.wait({work, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if work.done():
                error = work.exception()
                if isinstance(error, LeadershipLost):
                    log.error("lost leadership; exiting", error=str(error))
                    return EXIT_FAILED
                if error is not None:
                    log.error("controllers stopped", error=repr(error))
                    return EXIT_FAILED
                return EXIT_OK
            log.info("shutting down")
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError, LeadershipLost):
                await work  # the elector releases the lease on the way out
            return EXIT_OK
        finally:
            stopping.cancel()
            if not work.done():  # cancelled from outside: stop the controllers and release the lease
                work.cancel()
                await asyncio.gather(work, return_exceptions=True)
            if self.server is not None:
                await self.server.stop()

    def _ready(self) -> bool:
        """A standby is ready (it is healthy, just not leading); a leader once its cluster state is synced."""
        if self.elector is not None and not self.elector.is_leader:
            return True
        return self.reconciler is not None and self.reconciler.ready.is_set()

    async def _lead(self) -> None:
        # Every log line of this reconciler's tasks (created below, so they inherit it) names the cluster.
        structlog.contextvars.bind_contextvars(cluster=self.settings.cluster_name)
        kube: KubeAPI = self._kube or self.kube
        if self.elector is not None:  # nothing is written or sent to the cloud once leadership may be lost
            kube = GatedKube(kube, self.elector.gate)
            guard = getattr(self.cloud, "guard", None)
            if callable(guard):
                guard(self.elector.gate.check)
        ctx = ControllerContext(
            kube, MeteredCloud(self.cloud, self.metrics), self.settings, clock=self.clock, timings=self.timings,
            metrics=self.metrics, events=EventRecorder(kube, component="karpenter", clock=self.clock.now),
        )
        loops = self.extra_loops(ctx) if self.extra_loops is not None else {}
        self.reconciler = Reconciler(ctx, seed=self.seed, extra_loops=loops)
        log.info("starting controllers", cluster=self.settings.cluster_name, cloud=getattr(self.cloud, "name", ""))
        leading = self.metrics.runtime.leader.labels(name=self.leader.name) if self.leader is not None else None
        if leading is not None:
            leading.set(1)
        try:
            await self.reconciler.run()
        finally:
            if leading is not None:
                leading.set(0)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("adze")
    except Exception:
        return "unknown"


# Go's names for the machine architectures Python reports.
_GOARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def build_labels(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``karpenter_build_info``'s labels: Adze's version, the runtime in place of Go's version, the
    architecture by Go's name, and the commit the image was built from (``ADZE_COMMIT``)."""
    env = os.environ if env is None else env
    machine = platform.machine().lower()
    return {"version": _version(), "goversion": f"python{platform.python_version()}",
            "goarch": _GOARCH.get(machine, machine), "commit": env.get("ADZE_COMMIT", "")}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m reconciler run",
                                     description="Run the live reconciler (Karpenter v1 API) against a cluster.")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config, else $KUBECONFIG or "
                                             "~/.kube/config)")
    parser.add_argument("--context", help="kubeconfig context")
    parser.add_argument("--cloud", choices=("aws", "simulated"), default="aws",
                        help="aws (default) or simulated: launch nothing real, for local runs")
    parser.add_argument("--catalog", metavar="SCENARIO.yaml",
                        help="with --cloud simulated: take the instance types from this scenario's catalog "
                             "(default: the aws-us-east-1 preset)")
    return parser


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    env = os.environ if env is None else env
    try:
        settings = Settings.from_env(env)
    except SettingsError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_INVALID
    problem = missing_settings(settings, args.cloud)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_INVALID
    if args.catalog and args.cloud != "simulated":
        print("error: --catalog only applies with --cloud simulated", file=sys.stderr)
        return EXIT_INVALID
    configure_logging(settings.log_level)
    for warning in environment_check(env)[1]:  # Karpenter defaults Adze accepts without acting on them
        log.warning("setting not implemented", detail=warning)
    try:
        return asyncio.run(_run(args, settings, env))
    except StartupError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_INVALID
    except KeyboardInterrupt:
        return EXIT_OK


async def _run(args: argparse.Namespace, settings: Settings, env: Mapping[str, str]) -> int:
    from reconciler.kube.live import ConfigError, LiveKube

    try:
        kube = await LiveKube.from_environment(args.kubeconfig, args.context, qps=settings.kube_client_qps,
                                               burst=settings.kube_client_burst)
    except ConfigError as err:
        raise StartupError(str(err)) from None
    clock = SystemClock()
    metrics = Metrics()  # one registry: the AWS provider's families are served with the controllers'
    cloud: CloudProvider | None = None
    try:
        cloud = simulated_cloud(args.catalog, clock) if args.cloud == "simulated" else await aws_cloud(
            settings, env, kube, metrics)
        app = App(settings, kube, cloud, leader=app_leader(settings, env), clock=clock,
                  metrics=metrics, extra_loops=cloud_loops(settings, cloud, env))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        return await app.run(stop)
    finally:
        if cloud is not None:
            close_cloud(cloud)
        await kube.close()


def cloud_loops(
    settings: Settings, cloud: CloudProvider, env: Mapping[str, str]
) -> Callable[[ControllerContext], dict[str, BackgroundLoop]] | None:
    """The AWS cloud's own leader loops: price, instance-type and launch-template upkeep, capacity-block
    expiry and reserved capacity-type sync (ReservedCapacity gate), and the interruption queue when
    INTERRUPTION_QUEUE is set. Other clouds have none."""
    if getattr(cloud, "name", "") != "aws":
        return None
    from reconciler.cloud.aws.provider import AWSCloudProvider
    from reconciler.controllers.aws_provider.capacity_reservation_controller import capacity_reservation_loops
    from reconciler.controllers.aws_provider.interruption_controller import interruption_loop
    from reconciler.controllers.aws_provider.refresh_loops import aws_refresh_loops

    if not isinstance(cloud, AWSCloudProvider):
        return None
    provider = cloud
    isolated_vpc = env.get("ISOLATED_VPC", "").strip().lower() == "true"

    def build(ctx: ControllerContext) -> dict[str, BackgroundLoop]:
        loops: dict[str, BackgroundLoop] = dict(aws_refresh_loops(ctx, provider, isolated_vpc=isolated_vpc))
        loops.update(capacity_reservation_loops(ctx, provider))
        if settings.interruption_queue:
            loops["interruption"] = interruption_loop(ctx, provider)
        return loops

    return build


if __name__ == "__main__":
    sys.exit(main())
