"""``/metrics`` on the metrics port (8080) and ``/healthz`` + ``/readyz`` on the health-probe port
(8081), as the Karpenter chart wires its probes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from aiohttp import web
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from reconciler.observability.metrics import Metrics

Check = Callable[[], bool | Awaitable[bool]]


@dataclass(slots=True)
class HealthChecks:
    """Named liveness and readiness checks; a check that raises counts as failing."""

    liveness: dict[str, Check] = field(default_factory=dict)
    readiness: dict[str, Check] = field(default_factory=dict)

    async def failing(self, checks: Mapping[str, Check]) -> list[str]:
        failed = []
        for name, check in checks.items():
            try:
                result = check()
                ok = await result if isinstance(result, Awaitable) else result
            except Exception:
                ok = False
            if not ok:
                failed.append(name)
        return failed


class ObservabilityServer:
    """``/metrics`` on ``metrics_port``; ``/healthz`` and ``/readyz`` on ``health_port`` (0 = any free port)."""

    def __init__(
        self,
        metrics: Metrics,
        health: HealthChecks,
        *,
        metrics_port: int = 8080,
        health_port: int = 8081,
        host: str = "0.0.0.0",
    ) -> None:
        self.metrics = metrics
        self.health = health
        self.host = host
        self.requested_ports = (metrics_port, health_port)
        self.metrics_port = 0
        self.health_port = 0
        self._runners: list[web.AppRunner] = []

    async def start(self) -> None:
        metrics_app = web.Application()
        metrics_app.router.add_get("/metrics", self._metrics)
        health_app = web.Application()
        health_app.router.add_get("/healthz", self._probe(lambda: self.health.liveness))
        health_app.router.add_get("/readyz", self._probe(lambda: self.health.readiness))
        ports = []
        for app, port in zip((metrics_app, health_app), self.requested_ports, strict=True):
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, self.host, port)
            await site.start()
            self._runners.append(runner)
            ports.append(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        self.metrics_port, self.health_port = ports

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()
        self._runners = []

    async def _metrics(self, request: web.Request) -> web.Response:
        response = web.Response(body=self.metrics.render())
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    def _probe(self, checks: Callable[[], Mapping[str, Check]]) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(request: web.Request) -> web.Response:
            failed = await self.health.failing(checks())
            if failed:
                return web.Response(status=500, text="failed: " + ", ".join(failed) + "\n")
            return web.Response(text="ok\n")

        return handler
