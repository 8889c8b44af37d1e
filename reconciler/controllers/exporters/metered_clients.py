"""The cloud provider and the Kubernetes client as Karpenter measures them.

- ``MeteredCloud``: Karpenter's cloud-provider decorator — every ``create``/``delete``/``get``/``list``/
  ``instance_types``/``is_drifted`` call timed and its errors counted by controller, method (``Create``,
  ``Delete``, ``Get``, ``List``, ``GetInstanceTypes``, ``IsDrifted``) and provider, errors by type
  (``InsufficientCapacityError``, ``NodeClaimNotFoundError``, ``NodeClassNotReadyError``, else "").
- ``MeteredKube``: client-go's request metrics — requests by HTTP status code and method, latency by
  verb (``GET``, ``LIST``, ``CREATE``, ``UPDATE``, ``PATCH``, ``DELETE``), group, version, resource and
  subresource, as operatorpkg's adapter reports them. Status codes of successful calls are those the API
  server answers (201 for a create or an eviction, 200 otherwise); failed ones carry the error's.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar

from reconciler.cloud.types import (
    CloudProvider,
    Instance,
    InstanceNotFoundError,
    InstanceType,
    InsufficientCapacityError,
    LaunchRequest,
    NodeClassNotReadyError,
)
from reconciler.controllers.runtime.context import CURRENT_CONTROLLER
from reconciler.kube.api import POD, ApiError, Kind, KubeAPI, Manifest, WatchEvent, kind_of
from reconciler.kube.semantics import plural
from reconciler.observability import Metrics
from reconciler.observability.runtime_metrics import RuntimeMetrics

T = TypeVar("T")


def cloud_error_type(error: BaseException) -> str:
    if isinstance(error, InsufficientCapacityError):
        return "InsufficientCapacityError"
    if isinstance(error, InstanceNotFoundError):
        return "NodeClaimNotFoundError"
    if isinstance(error, NodeClassNotReadyError):
        return "NodeClassNotReadyError"
    return ""


class MeteredCloud:
    """A ``CloudProvider`` whose calls are measured; everything else is the wrapped provider's."""

    def __init__(self, cloud: CloudProvider, metrics: Metrics) -> None:
        self.wrapped = cloud
        self.name = cloud.name
        self._metrics = metrics

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.wrapped, attribute)

    async def _measure(self, method: str, call: Awaitable[T]) -> T:
        labels = {"controller": CURRENT_CONTROLLER.get(), "method": method, "provider": self.name}
        started = time.perf_counter()
        try:
            return await call
        except Exception as err:
            self._metrics.cloudprovider_errors.labels(**labels, error=cloud_error_type(err)).inc()
            raise
        finally:
            self._metrics.cloudprovider_duration.labels(**labels).observe(time.perf_counter() - started)

    async def instance_types(self, nodeclass: Mapping[str, Any] | None) -> list[InstanceType]:
        return await self._measure("GetInstanceTypes", self.wrapped.instance_types(nodeclass))

    async def create(self, request: LaunchRequest, nodeclass: Mapping[str, Any] | None) -> Instance:
        return await self._measure("Create", self.wrapped.create(request, nodeclass))

    async def delete(self, provider_id: str) -> None:
        await self._measure("Delete", self.wrapped.delete(provider_id))

    async def get(self, provider_id: str) -> Instance:
        return await self._measure("Get", self.wrapped.get(provider_id))

    async def list(self) -> list[Instance]:
        return await self._measure("List", self.wrapped.list())

    async def is_drifted(self, instance: Instance, nodeclass: Mapping[str, Any] | None) -> str | None:
        return await self._measure("IsDrifted", self.wrapped.is_drifted(instance, nodeclass))


class MeteredKube:
    """A ``KubeAPI`` whose requests are counted and timed; any other attribute is the wrapped client's."""

    def __init__(self, kube: KubeAPI, metrics: RuntimeMetrics) -> None:
        self.wrapped = kube
        self._metrics = metrics

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.wrapped, attribute)

    async def _measure(self, method: str, verb: str, kind: Kind, subresource: str | None, ok: str,
                       call: Callable[[], Awaitable[T]]) -> T:
        started = time.perf_counter()
        code = ok
        try:
            return await call()
        except ApiError as err:
            code = str(err.status)
            raise
        except Exception:
            code = "<error>"  # client-go's code when no response came back
            raise
        finally:
            self._metrics.client_requests.labels(code=code, method=method).inc()
            self._metrics.client_request_duration.labels(
                verb=verb, group=kind.group, version=kind.api_version.rpartition("/")[2], kind=plural(kind),
                subresource=subresource or "").observe(time.perf_counter() - started)

    async def get(self, kind: Kind, name: str, namespace: str | None = None) -> Manifest:
        return await self._measure("GET", "GET", kind, None, "200", lambda: self.wrapped.get(kind, name, namespace))

    async def list(self, kind: Kind, namespace: str | None = None, label_selector: str | None = None,
                   field_selector: str | None = None) -> tuple[list[Manifest], str]:
        selectors = {"label_selector": label_selector, "field_selector": field_selector}
        return await self._measure("GET", "LIST", kind, None, "200", lambda: self.wrapped.list(
            kind, namespace, **{k: v for k, v in selectors.items() if v is not None}))

    async def watch(self, kind: Kind, resource_version: str, namespace: str | None = None, *,
                    label_selector: str | None = None, field_selector: str | None = None) -> AsyncIterator[WatchEvent]:
        self._metrics.client_requests.labels(code="200", method="GET").inc()
        events = self.wrapped.watch(kind, resource_version, namespace, label_selector=label_selector,
                                    field_selector=field_selector)
        try:
            async for event in events:
                yield event
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()

    async def create(self, manifest: Manifest) -> Manifest:
        return await self._measure("POST", "CREATE", kind_of(manifest), None, "201",
                                   lambda: self.wrapped.create(manifest))

    async def replace(self, manifest: Manifest, *, subresource: str | None = None) -> Manifest:
        return await self._measure("PUT", "UPDATE", kind_of(manifest), subresource, "200",
                                   lambda: self.wrapped.replace(manifest, subresource=subresource))

    async def patch(self, kind: Kind, name: str, patch: Mapping[str, Any], namespace: str | None = None,
                    subresource: str | None = None) -> Manifest:
        return await self._measure("PATCH", "PATCH", kind, subresource, "200", lambda: self.wrapped.patch(
            kind, name, patch, namespace, subresource))

    async def delete(self, kind: Kind, name: str, namespace: str | None = None, *, uid: str | None = None,
                     grace_period_seconds: int | None = None) -> None:
        await self._measure("DELETE", "DELETE", kind, None, "200", lambda: self.wrapped.delete(
            kind, name, namespace, uid=uid, grace_period_seconds=grace_period_seconds))

    async def evict(self, name: str, namespace: str) -> None:
        await self._measure("POST", "CREATE", POD, "eviction", "201", lambda: self.wrapped.evict(name, namespace))
