"""boto3 clients and the bridge that runs their blocking calls off the event loop.

boto3 is synchronous; every call goes through ``AwsCaller.call`` which runs it in
a dedicated thread pool behind an ``asyncio.Semaphore`` (bounded concurrency).
Retries are botocore's ``adaptive`` mode (``standard`` + client-side rate
limiting): legacy mode does not retry EC2's HTTP-400 ``RequestLimitExceeded``.
Each client reports its requests, attempts, latencies and retries through
botocore's event hooks as Karpenter's SDK instrumentation does (``aws_sdk_go_*``:
service, action, HTTP status code; 0 when no response came back).

A ``gate`` (the leader's ``LeadershipGate.check``) is asked before every call and, through a botocore
``request-created`` hook, before every HTTP attempt of it (each retry, each paginator page): a call
running in the thread pool when leadership is lost starts nothing more.
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import json
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

import boto3
import botocore.session
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.loaders import JSONFileLoader, Loader, create_loader

from reconciler.cloud.aws.metrics import AWSMetrics

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


class PlainJSONFileLoader(JSONFileLoader):
    """botocore's model files decoded into plain dicts. botocore decodes them into ``OrderedDict``s, which cost
    half as much again as dicts (ordered too, since Python 3.7) and which nothing in botocore needs: the EC2
    model alone is 14 MB that way, 9 MB as dicts, and it stays loaded for the life of the process."""

    def load_file(self, file_path: str) -> Any:
        for extension, opener in ((".json", open), (".json.gz", gzip.open)):
            if os.path.isfile(file_path + extension):
                with opener(file_path + extension, "rb") as source:
                    return json.loads(source.read().decode("utf-8"))
        return None


@functools.cache
def shared_loader() -> Loader:
    """One botocore data loader for every session of the process: the models and the endpoint data it has
    read (``endpoints.json`` alone is 4 MB decoded) are cached on it, so a second session reads nothing again."""
    loader = create_loader(botocore.session.Session().get_config_variable("data_path"))
    loader.file_loader = PlainJSONFileLoader()
    return loader


def new_session(**options: Any) -> boto3.session.Session:
    """A boto3 session (``boto3.session.Session``'s options) on the process's ``shared_loader``. Not boto3's
    default session, which a ``boto3.client(...)`` call would build and keep with its own copy of everything."""
    core = botocore.session.Session()
    core.register_component("data_loader", shared_loader())
    return boto3.session.Session(botocore_session=core, **options)


class AwsClients:
    """Lazily built boto3 clients sharing one session and retry configuration."""

    def __init__(self, options: ClientOptions, session: boto3.session.Session | None = None,
                 metrics: AWSMetrics | None = None) -> None:
        self.options = options
        self.metrics = metrics
        self._session = session or new_session(
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
            if self.metrics is not None:
                instrument(client, self.metrics)
            self._clients[service] = client
        return self._clients[service]

    def _check_gate(self, request: Any = None, operation_name: str = "", **_: Any) -> None:
        """Before each HTTP attempt (first try, retry or next page), in whatever thread sends it."""
        gate = self.gate
        if gate is not None:
            gate(f"AWS {operation_name or 'request'}")

    def instrument(self, metrics: AWSMetrics) -> None:
        """Report the SDK metrics of every client, built already or later, to ``metrics``."""
        if self.metrics is metrics:
            return
        self.metrics = metrics
        for client in self._clients.values():
            instrument(client, metrics)

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
        if self.gate is not None:
            self.gate(f"AWS {getattr(method, '__name__', 'call')}")
        async with self._semaphore():
            return await asyncio.get_running_loop().run_in_executor(self._executor, partial(method, **kwargs))

    async def paginate(self, client: Any, operation: str, result_key: str, *,
                       convert: Callable[[Any], Any] | None = None, **kwargs: Any) -> list[Any]:
        """All items of a paginated operation (the paginator runs in the pool too); with ``convert``, each item
        converted as its page arrives (``None`` results dropped), so only one page of raw items is held."""

        def collect() -> list[Any]:
            items: list[Any] = []
            for page in client.get_paginator(operation).paginate(**kwargs):
                raw = page.get(result_key) or []
                items.extend(raw if convert is None else (c for c in map(convert, raw) if c is not None))
            return items

        collect.__name__ = operation
        return await self.call(collect)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


_STARTED, _ATTEMPT_STARTED, _MODEL = "adze_call_started", "adze_attempt_started", "adze_operation"


def instrument(client: Any, metrics: AWSMetrics) -> None:
    """Count and time the client's calls and their attempts (botocore hooks run in the calling thread)."""
    service = str(client.meta.service_model.service_id)
    hyphenized = client.meta.service_model.service_id.hyphenize()

    def call_started(model: Any, context: dict[str, Any], **_: Any) -> None:
        context[_STARTED] = time.perf_counter()
        context[_MODEL] = model

    def attempt_started(request: Any, **_: Any) -> None:
        request.context[_ATTEMPT_STARTED] = time.perf_counter()

    def attempt_done(context: dict[str, Any], response_dict: dict[str, Any] | None = None, **_: Any) -> None:
        model = context.get(_MODEL)
        labels = {"service": service, "action": model.name if model is not None else "",
                  "code": str((response_dict or {}).get("status_code", 0))}
        metrics.sdk_attempts.labels(**labels).inc()
        started = context.get(_ATTEMPT_STARTED)
        if started is not None:
            metrics.sdk_attempt_duration.labels(**labels).observe(time.perf_counter() - started)

    def call_done(model: Any, context: dict[str, Any], code: int, retries: int) -> None:
        labels = {"service": service, "action": model.name if model is not None else "", "code": str(code)}
        metrics.sdk_requests.labels(**labels).inc()
        metrics.sdk_retries.labels(**labels).observe(retries)
        started = context.get(_STARTED)
        if started is not None:
            metrics.sdk_duration.labels(**labels).observe(time.perf_counter() - started)

    def answered(http_response: Any, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        retries = int((parsed.get("ResponseMetadata") or {}).get("RetryAttempts") or 0)
        call_done(model, context, int(getattr(http_response, "status_code", 0) or 0), retries)

    def failed(exception: BaseException, context: dict[str, Any], **_: Any) -> None:
        attempts = int((context.get("retries") or {}).get("attempt") or 1)
        call_done(context.get(_MODEL), context, 0, attempts - 1)

    events = client.meta.events
    events.register(f"before-call.{hyphenized}", call_started)
    events.register(f"request-created.{hyphenized}", attempt_started)
    events.register(f"response-received.{hyphenized}", attempt_done)
    events.register(f"after-call.{hyphenized}", answered)
    events.register(f"after-call-error.{hyphenized}", failed)
