"""boto3 clients and the bridge that runs their blocking calls off the event loop.

boto3 is synchronous; every call goes through ``AwsCaller.call`` which runs it in
a dedicated thread pool behind an ``asyncio.Semaphore`` (bounded concurrency),
times it and counts errors by code. Retries are botocore's ``adaptive`` mode
(``standard`` + client-side rate limiting): legacy mode does not retry EC2's
HTTP-400 ``RequestLimitExceeded``.

A ``gate`` (the leader's ``LeadershipGate.check``) is asked before every call and, through a botocore
``request-created`` hook, before every HTTP attempt of it (each retry, each paginator page): a call
running in the thread pool when leadership is lost starts nothing more.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from reconciler.cloud.aws import metrics

DEFAULT_MAX_CONCURRENCY = 16
# Karpenter's AWS HTTP client gives up after 4 minutes.
DEFAULT_READ_TIMEOUT = 240.0
# The Pricing API is served from a few regions only.
PRICING_REGIONS = {"ap-": "ap-south-1", "cn-": "cn-northwest-1", "eu-": "eu-central-1"}


# Raises when a call must not start (the leadership gate's ``check``); called with what is about to be sent.
Gate = Callable[[str], None]


def pricing_region(region: str) -> str:
    for prefix, pricing in PRICING_REGIONS.items():
        if region.startswith(prefix):
            return pricing
    return "us-east-1"


def error_code(error: BaseException) -> str:
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Code", "Unknown"))
    return type(error).__name__


@dataclass(slots=True, frozen=True)
class ClientOptions:
    region: str
    endpoint_url: str | None = None  # e.g. a moto server in tests / offline simulation
    retry_mode: str = "adaptive"
    max_attempts: int = 8
    read_timeout: float = DEFAULT_READ_TIMEOUT
    # Within the leader election's margin (lease duration - renew deadline, 5 s by default): a request started
    # before the renew deadline reaches AWS, or is given up, before a standby may act (kube/leadership.py).
    connect_timeout: float = 5.0
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    # Explicit credentials are only for offline endpoints; real AWS uses the SDK chain.
    access_key_id: str | None = None
    secret_access_key: str | None = None


class AwsClients:
    """Lazily built boto3 clients sharing one session and retry configuration."""

    def __init__(self, options: ClientOptions, session: boto3.session.Session | None = None) -> None:
        self.options = options
        self._session = session or boto3.session.Session(
            aws_access_key_id=options.access_key_id,
            aws_secret_access_key=options.secret_access_key,
            region_name=options.region,
        )
        self._config = Config(
            retries={"mode": options.retry_mode, "max_attempts": options.max_attempts},
            read_timeout=options.read_timeout,
            connect_timeout=options.connect_timeout,
            max_pool_connections=max(options.max_concurrency, 10),
        )
        self._clients: dict[str, Any] = {}
        self.gate: Gate | None = None

    def client(self, service: str) -> Any:
        if service not in self._clients:
            region = pricing_region(self.options.region) if service == "pricing" else self.options.region
            client = self._session.client(
                service, region_name=region, endpoint_url=self.options.endpoint_url, config=self._config
            )
            client.meta.events.register("request-created", self._check_gate)
            self._clients[service] = client
        return self._clients[service]

    def _check_gate(self, request: Any = None, operation_name: str = "", **_: Any) -> None:
        """Before each HTTP attempt (first try, retry or next page), in whatever thread sends it."""
        gate = self.gate
        if gate is not None:
            gate(f"AWS {operation_name or 'request'}")

    @property
    def ec2(self) -> Any:
        return self.client("ec2")

    @property
    def ssm(self) -> Any:
        return self.client("ssm")

    @property
    def iam(self) -> Any:
        return self.client("iam")

    @property
    def sqs(self) -> Any:
        return self.client("sqs")

    @property
    def pricing(self) -> Any:
        return self.client("pricing")


class AwsCaller:
    """Run blocking boto3 calls in a bounded thread pool."""

    def __init__(self, max_concurrency: int = DEFAULT_MAX_CONCURRENCY) -> None:
        self._executor = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="aws")
        self._max_concurrency = max_concurrency
        self._semaphores: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}
        self.gate: Gate | None = None

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        semaphore = self._semaphores.get(loop)
        if semaphore is None:
            semaphore = self._semaphores[loop] = asyncio.Semaphore(self._max_concurrency)
        return semaphore

    async def call(self, method: Callable[..., Any], **kwargs: Any) -> Any:
        operation = getattr(method, "__name__", "call")
        if self.gate is not None:
            self.gate(f"AWS {operation}")
        async with self._semaphore():
            started = time.perf_counter()
            try:
                return await asyncio.get_running_loop().run_in_executor(
                    self._executor, partial(method, **kwargs)
                )
            except Exception as err:
                metrics.errors.labels(operation=operation, error=error_code(err)).inc()
                raise
            finally:
                metrics.api_duration.labels(operation=operation).observe(time.perf_counter() - started)

    async def paginate(self, client: Any, operation: str, result_key: str, **kwargs: Any) -> list[Any]:
        """All items of a paginated operation (the paginator runs in the pool too)."""

        def collect() -> list[Any]:
            items: list[Any] = []
            for page in client.get_paginator(operation).paginate(**kwargs):
                items.extend(page.get(result_key) or [])
            return items

        collect.__name__ = operation
        return await self.call(collect)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
