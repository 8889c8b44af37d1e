"""``KubeAPI`` against a real API server, on the official ``kubernetes`` client's async API.

Why this shape: ``kubernetes.aio`` (kubernetes>=37) gives us kubeconfig/in-cluster loading,
exec-plugin and service-account token refresh, TLS and an aiohttp connection pool. Its typed
per-kind methods, however, turn objects into generated models (snake_case fields, unknown
fields dropped), while every boundary in the reconciler speaks plain manifests. So we use
the client's ``ApiClient`` only as an authenticated HTTP transport (``param_serialize`` +
``call_api``) and address every kind, built-in or custom, by its REST path; responses stay
exactly as the server sent them. The typed ``LeaseLock`` (broken in 37.0.x: ``pretty=True``
fails validation) is not used: leader election lives in ``reconciler.kube.leader`` over this
port.

Like client-go, every request first takes a token from a client-side bucket (KUBE_CLIENT_QPS /
KUBE_CLIENT_BURST, Karpenter's 200 / 300), and an answer that says "come back later" (429 or 5xx
with ``Retry-After``) is retried after that long, at most 10 times. A leader's write asks the leadership
gate again right before each attempt is sent (``leadership.check_at_send``), after the bucket and any
pause. Two exceptions: Lease calls skip the bucket (controller-runtime's leader election has a
client of its own, so a busy controller never delays a renewal), and an eviction's 429 is not
retried here: it is a PodDisruptionBudget's verdict, which the terminator's eviction backoff handles
without blocking its step.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import aiohttp
from kubernetes.aio import config as kube_config
from kubernetes.aio.client import ApiClient, Configuration

from reconciler.kube.api import (
    LEASE,
    POD,
    ApiError,
    ConflictError,
    GoneError,
    Kind,
    Manifest,
    NotFoundError,
    TooManyRequestsError,
    WatchEvent,
    kind_of,
)
from reconciler.kube.leadership import check_at_send
from reconciler.kube.ratelimit import MAX_RETRY_AFTER_ATTEMPTS, TokenBucket, retry_after_delay
from reconciler.kube.semantics import check_grace_period, collection_path, object_path

MERGE_PATCH = "application/merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
DEFAULT_FIELD_MANAGER = "karpenter"
LIST_PAGE_SIZE = 500
DEFAULT_QPS = 200.0  # Karpenter's KUBE_CLIENT_QPS
DEFAULT_BURST = 300  # Karpenter's KUBE_CLIENT_BURST


class ConfigError(RuntimeError):
    """No usable kubeconfig or in-cluster configuration; the message says what was tried."""


def error_from_response(status: int, body: bytes | str) -> ApiError:
    """Map an HTTP error and its ``Status`` body to the port's error types."""
    text = body.decode(errors="replace") if isinstance(body, bytes) else body
    try:
        parsed = json.loads(text) if text else {}
    except json.JSONDecodeError:
        parsed = {}
    if not isinstance(parsed, dict):
        parsed = {}
    message = str(parsed.get("message") or text or f"HTTP {status}")
    reason = str(parsed.get("reason") or "")
    if status == 404:
        return NotFoundError(message)
    if status == 409:
        return ConflictError(message, reason=reason or "Conflict")
    if status == 410:
        return GoneError(message)
    if status == 429:
        return TooManyRequestsError(message)
    return ApiError(status, reason or "Error", message)


class LiveKube:
    """``KubeAPI`` over HTTP. Build with ``await LiveKube.from_environment()`` or ``LiveKube.for_url``."""

    def __init__(
        self,
        api_client: ApiClient,
        *,
        watch_timeout: float = 290.0,
        request_timeout: float = 30.0,
        field_manager: str = DEFAULT_FIELD_MANAGER,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        limiter: TokenBucket | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._client = api_client
        self._watch_timeout = watch_timeout
        self._request_timeout = request_timeout
        self._field_manager = field_manager
        self._limiter = limiter or TokenBucket(qps, burst)
        self._sleep = sleep
        self.retried_after = 0  # requests answered "come back later" and sent again
        self._background: list[asyncio.Task[None]] = []

    # --- construction ------------------------------------------------------------------------

    @classmethod
    async def from_environment(
        cls, kubeconfig: str | None = None, context: str | None = None, **options: Any
    ) -> LiveKube:
        """In-cluster service account when running in a pod (and no kubeconfig is named),
        otherwise ``kubeconfig`` / ``$KUBECONFIG`` / ``~/.kube/config``."""
        configuration = Configuration()
        refresher = None
        explicit = kubeconfig or os.environ.get("KUBECONFIG")
        try:
            if not explicit and os.environ.get("KUBERNETES_SERVICE_HOST"):
                kube_config.load_incluster_config(client_configuration=configuration)
            else:
                path = os.path.expanduser((explicit or kube_config.KUBE_CONFIG_DEFAULT_LOCATION).split(os.pathsep)[0])
                if not os.path.exists(path):
                    raise ConfigError(
                        f"no Kubernetes configuration: kubeconfig {path} does not exist and "
                        "KUBERNETES_SERVICE_HOST is not set (not running in a pod)"
                    )
                loader = await kube_config.load_kube_config(
                    config_file=path, context=context, client_configuration=configuration, persist_config=False
                )
                if "exec" in (getattr(loader, "_user", None) or {}):
                    refresher = kube_config.refresh_token(loader, configuration)
        except kube_config.ConfigException as error:
            raise ConfigError(f"invalid Kubernetes configuration: {error}") from None
        live = cls(ApiClient(configuration), **options)
        if refresher is not None:
            live._background.append(asyncio.create_task(refresher))  # exec tokens (EKS) expire in 15 min
        return live

    @classmethod
    def for_url(cls, url: str, token: str | None = None, **options: Any) -> LiveKube:
        """A client for a plain-HTTP(S) server without kubeconfig (tests, local proxies)."""
        configuration = Configuration(host=url)
        if token:
            configuration.api_key["BearerToken"] = token
            configuration.api_key_prefix["BearerToken"] = "Bearer"
        return cls(ApiClient(configuration), **options)

    async def close(self) -> None:
        for task in self._background:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._client.close()

    async def __aenter__(self) -> LiveKube:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- transport ---------------------------------------------------------------------------

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: aiohttp.ClientTimeout | None = None,
        limited: bool = True,
        retry_after: bool = True,
    ) -> Any:
        for attempt in range(MAX_RETRY_AFTER_ATTEMPTS + 1):
            response = await self._open(method, path, query=query, body=body, content_type=content_type,
                                        timeout=timeout, limited=limited)
            data = await response.read()
            if 200 <= response.status < 300:
                return json.loads(data) if data else None
            delay = retry_after_delay(response.status, response.headers) if retry_after else None
            if delay is None or attempt == MAX_RETRY_AFTER_ATTEMPTS:
                raise error_from_response(response.status, data)
            self.retried_after += 1
            await self._sleep(delay)
        raise AssertionError("unreachable")

    async def _open(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: aiohttp.ClientTimeout | None = None,
        limited: bool = True,
    ) -> Any:
        if limited:
            await self._limiter.acquire()
        check_at_send(f"{method} {path}")  # a leader's write: still leading now, after the bucket and any pause?
        params = [(key, value) for key, value in (query or {}).items() if value not in (None, "")]
        method, url, headers, body, _ = await self._client.param_serialize(
            method,
            path,
            query_params=params,
            header_params={"Content-Type": content_type, "Accept": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            return await self._client.call_api(
                method,
                url,
                headers,
                body,
                _request_timeout=timeout or aiohttp.ClientTimeout(total=self._request_timeout),
            )
        except (aiohttp.ClientError, TimeoutError) as error:
            raise ApiError(503, "ServiceUnavailable", f"{method} {path}: {error!r}") from error

    # --- KubeAPI -----------------------------------------------------------------------------

    async def get(self, kind: Kind, name: str, namespace: str | None = None) -> Manifest:
        return _typed(kind, await self._send("GET", object_path(kind, name, namespace), limited=kind != LEASE))

    async def list(
        self,
        kind: Kind,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[Manifest], str]:
        """All pages of a list; restarts once from scratch if the continue token expires."""
        for attempt in range(2):
            items: list[Manifest] = []
            query: dict[str, Any] = {
                "labelSelector": label_selector,
                "fieldSelector": field_selector,
                "limit": LIST_PAGE_SIZE,
            }
            try:
                while True:
                    page = await self._send("GET", collection_path(kind, namespace), query=query)
                    items.extend(_typed(kind, item) for item in page.get("items") or [])
                    metadata = page.get("metadata") or {}
                    if not metadata.get("continue"):
                        return items, str(metadata.get("resourceVersion", ""))
                    query["continue"] = metadata["continue"]
            except GoneError:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    async def watch(
        self,
        kind: Kind,
        resource_version: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        bookmarks: bool = True,
    ) -> AsyncIterator[WatchEvent]:
        """One watch stream; ends when the server closes it (after ``watch_timeout``), raises
        ``GoneError`` on an expired resourceVersion (in-stream ERROR 410 or HTTP 410)."""
        query = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true" if bookmarks else None,
            "timeoutSeconds": int(self._watch_timeout),
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
        }
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self._request_timeout, sock_read=self._watch_timeout + 30
        )
        response = await self._open("GET", collection_path(kind, namespace), query=query, timeout=timeout)
        try:
            if not 200 <= response.status < 300:
                raise error_from_response(response.status, await response.read())
            async for line in response.response.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                event_type, obj = event.get("type"), event.get("object") or {}
                if event_type == "ERROR":
                    raise error_from_response(int(obj.get("code") or 500), json.dumps(obj))
                if event_type not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
                    raise ApiError(500, "InternalError", f"unexpected watch event type {event_type!r}")
                yield WatchEvent(event_type, _typed(kind, obj))
        except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError, TimeoutError):
            return  # a dropped stream ends the watch; the caller resumes from its last version
        finally:
            response.response.release()

    async def create(self, manifest: Manifest) -> Manifest:
        kind = kind_of(manifest)
        namespace = (manifest.get("metadata") or {}).get("namespace")
        return _typed(kind, await self._send("POST", collection_path(kind, namespace), body=manifest,
                                             limited=kind != LEASE))

    async def replace(self, manifest: Manifest, *, subresource: str | None = None) -> Manifest:
        kind = kind_of(manifest)
        metadata = manifest.get("metadata") or {}
        path = object_path(kind, str(metadata.get("name", "")), metadata.get("namespace"), subresource)
        return _typed(kind, await self._send("PUT", path, body=manifest, limited=kind != LEASE))

    async def patch(
        self,
        kind: Kind,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> Manifest:
        path = object_path(kind, name, namespace, subresource)
        return _typed(kind, await self._send("PATCH", path, body=dict(patch), content_type=MERGE_PATCH))

    async def apply(self, manifest: Manifest, *, force: bool = True, subresource: str | None = None) -> Manifest:
        """Server-side apply of ``manifest`` under this client's field manager."""
        kind = kind_of(manifest)
        metadata = manifest.get("metadata") or {}
        path = object_path(kind, str(metadata.get("name", "")), metadata.get("namespace"), subresource)
        query = {"fieldManager": self._field_manager, "force": "true" if force else None}
        return _typed(kind, await self._send("PATCH", path, query=query, body=manifest, content_type=APPLY_PATCH))

    async def delete(
        self,
        kind: Kind,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> None:
        """Request deletion; with ``uid``, only if the object is still that incarnation (409 otherwise)."""
        await self._send("DELETE", object_path(kind, name, namespace),
                         body=delete_options(uid=uid, grace_period_seconds=grace_period_seconds))

    async def evict(self, name: str, namespace: str) -> None:
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        # A 429 here is a disruption budget's "not now": the caller backs off (see the module docstring).
        await self._send("POST", object_path(POD, name, namespace, "eviction"), body=body,
                         retry_after=False)


def delete_options(*, uid: str | None = None, grace_period_seconds: int | None = None) -> Manifest | None:
    """The ``meta.k8s.io`` DeleteOptions body of a DELETE (``None``: send no body, server defaults apply)."""
    check_grace_period(grace_period_seconds)
    options: Manifest = {"apiVersion": "v1", "kind": "DeleteOptions"}
    if uid:
        options["preconditions"] = {"uid": uid}
    if grace_period_seconds is not None:
        options["gracePeriodSeconds"] = grace_period_seconds
    return options if len(options) > 2 else None


def _typed(kind: Kind, obj: Manifest) -> Manifest:
    """Built-in list items come without apiVersion/kind; every manifest we hand out has them."""
    if isinstance(obj, dict) and "metadata" in obj:
        obj.setdefault("apiVersion", kind.api_version)
        obj.setdefault("kind", kind.kind)
    return obj
