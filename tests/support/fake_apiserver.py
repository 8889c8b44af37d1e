"""An in-process fake Kubernetes API server speaking HTTP, fronting a ``MemoryKube``.

It gives the real ``kubernetes`` client (and our live adapter) the semantics they rely on:
discovery, list (label/field selectors, limit/continue; core list items without
apiVersion/kind, like the real server), get, create, replace, patch (merge, JSON, strategic
merge approximated as merge, server-side apply approximated as a merge that creates when
missing), delete with preconditions and ``gracePeriodSeconds`` (DeleteOptions body or query
parameter; pods then terminate gracefully), finalizers and deletionTimestamp, the status
subresource, the pods/eviction subresource (429 with a DisruptionBudget cause), watch with
``allowWatchBookmarks`` bookmarks, ``timeoutSeconds`` and in-stream 410 ``Expired`` errors,
and exact ``application/json`` Status bodies on errors.

Other clients can be played against the one under test: ``before_write`` lets a concurrent writer
change an object between a client's read and its write (the write then carries a stale
resourceVersion), and ``stall`` makes the server stop answering some clients (a hung connection).
Every request is recorded with its arrival time (``RecordedRequest.at``, ``time.monotonic``).

Every object written is schema-validated (``schema_validation.SchemaValidator``); a failure
is answered with 422 and recorded in ``violations`` so a test can assert none happened.

Usage::

    async with FakeApiServer() as server:
        kube = LiveKube.for_url(server.url)
        ...
    assert not server.violations
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import yaml
from aiohttp import web
from support.apiserver_wire import (
    JsonPatchError,
    ResourceRegistry,
    WireError,
    apply_json_patch,
    invalid,
    kind_qualifier,
    needs_resource_version,
    status_body,
    unsupported_field,
)
from support.schema_validation import SchemaValidator

from reconciler.kube.api import POD, ApiError, ConflictError, GoneError, Kind, Manifest, NotFoundError, kind_of
from reconciler.kube.memory import MemoryKube
from reconciler.kube.semantics import BadRequestError, clone, merge_patch

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
_SMP_DIRECTIVES = ("$patch", "$retainKeys", "$setElementOrder", "$deleteFromPrimitiveList")


@dataclass(slots=True, frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    content_type: str
    authorization: str = ""
    body: str = ""  # the request body as sent (empty for GET and body-less DELETE)
    at: float = 0.0  # time.monotonic() when the server took the request up (after any stall)

    @property
    def writes(self) -> bool:
        return self.method in ("POST", "PUT", "PATCH", "DELETE")


@dataclass(slots=True)
class _Scripted:
    method: str
    path_contains: str
    status: int
    reason: str
    message: str
    remaining: int
    retry_after: float | None = None


@dataclass(slots=True)
class _Interleaved:
    kind: Kind
    name: str
    namespace: str | None
    writer: Callable[[MemoryKube], Awaitable[None]]
    remaining: int
    skip: int
    subresource: str | None


@dataclass(slots=True)
class _Target:
    kind: Kind
    namespace: str | None
    name: str | None
    subresource: str | None


@dataclass(slots=True)
class FakeApiServer:
    kube: MemoryKube = field(default_factory=MemoryKube)
    validate: bool = True
    bookmark_interval: float = 0.5
    # How long "the kubelet" takes to stop a pod deleted gracefully: None = until its grace period ends (the
    # in-memory cluster's final delete at the deadline); 0 = at once, as kwok does with the real control plane.
    pod_shutdown_seconds: float | None = None
    registry: ResourceRegistry = field(default_factory=ResourceRegistry.default)
    violations: list[str] = field(default_factory=list)
    requests: list[RecordedRequest] = field(default_factory=list)
    url: str = ""
    _validator: SchemaValidator = field(default_factory=SchemaValidator)
    _scripted: list[_Scripted] = field(default_factory=list)
    _interleaved: list[_Interleaved] = field(default_factory=list)
    _stalls: list[Callable[[web.Request], bool]] = field(default_factory=list)
    interleaved_writes: int = 0  # concurrent writes played by ``before_write``
    _runner: web.AppRunner | None = None
    _kubelet_tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def start(self) -> str:
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # Cancel a watch handler when its client goes away, as the real server does.
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            self.kube.break_watches()
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeApiServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- scripting ---------------------------------------------------------------------------

    def script(
        self,
        method: str,
        path_contains: str,
        status: int,
        *,
        reason: str = "",
        message: str = "",
        times: int = 1,
        retry_after: float | None = None,
    ) -> None:
        """Answer the next ``times`` matching requests with an error Status (with a ``Retry-After`` header
        when ``retry_after`` is given, as the API server's priority-and-fairness 429s carry)."""
        self._scripted.append(
            _Scripted(
                method.upper(), path_contains, status, reason or "Scripted", message or "scripted", times,
                retry_after,
            )
        )

    def before_write(
        self,
        kind: Kind,
        name: str,
        writer: Callable[[MemoryKube], Awaitable[None]],
        *,
        namespace: str | None = None,
        times: int = 1,
        skip: int = 0,
        subresource: str | None = "*",
    ) -> None:
        """Another client writes ``kind/name`` just before the next ``times`` updates (PUT or PATCH, of the
        object or its status) of it arrive, after letting ``skip`` updates through: ``writer`` changes the
        store directly, so the incoming update was computed from an older read. A client that sends the
        resourceVersion it read gets 409 and must read again; one that does not overwrites the other
        writer's change. ``subresource``: only updates of the object (None) or of its ``"status"``; any by default."""
        self._interleaved.append(_Interleaved(kind, name, namespace, writer, times, skip, subresource))

    def stall(self, matches: Callable[[web.Request], bool]) -> None:
        """Requests for which ``matches(request)`` holds are never answered (from now on): the connection
        hangs until the client gives up. Such requests are not recorded and change nothing."""
        self._stalls.append(matches)

    def expire_watches(self) -> None:
        """Open watches get an in-stream 410 Expired and the history is compacted, so resuming
        from any earlier resourceVersion is refused too: clients must re-list."""
        self.kube.compact()
        self.kube.break_watches(gone=True)

    def close_watches(self) -> None:
        """End open watch streams cleanly (clients resume from their last resourceVersion)."""
        self.kube.break_watches()

    def kubeconfig(self, token: str = "fake-token") -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": token}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
            "current-context": "fake",
        }

    # --- HTTP dispatch -----------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if any(matches(request) for matches in self._stalls):
            await asyncio.Event().wait()  # cancelled when the client drops the connection
        query = dict(request.query)
        self.requests.append(
            RecordedRequest(
                request.method,
                request.path,
                query,
                request.content_type,
                request.headers.get("Authorization", ""),
                await request.text() if request.can_read_body else "",
                time.monotonic(),
            )
        )
        for scripted in self._scripted:
            if scripted.method == request.method and scripted.path_contains in request.path_qs:
                scripted.remaining -= 1
                if scripted.remaining <= 0:
                    self._scripted.remove(scripted)
                answer = _error(scripted.status, scripted.reason, scripted.message)
                if scripted.retry_after is not None:
                    answer.headers["Retry-After"] = f"{scripted.retry_after:g}"
                return answer
        discovery = self._discovery(request.path)
        if discovery is not None:
            return web.json_response(discovery)
        target = self._resolve(request.path)
        if target is None:
            return _error(
                404, "NotFound", f"the server could not find the requested resource ({request.path})"
            )
        try:
            return await self._dispatch(request, target, query)
        except WireError as error:
            if error.bare:
                return _error(error.status, error.reason, error.message, causes=error.causes)
            return _error(error.status, error.reason, error.message, kind=target.kind,
                          name=error.name if error.name is not None else target.name or "",
                          causes=error.causes, details_kind=error.details_kind)
        except ApiError as error:
            if error.status == 422 and not isinstance(error, JsonPatchError):  # a field error: its cause
                wired = invalid(target.kind, target.name or "", [error.message])
                return _error(422, wired.reason, wired.message, kind=target.kind, name=target.name or "",
                              causes=wired.causes, details_kind=wired.details_kind)
            return _error(error.status, error.reason, error.message, kind=target.kind, name=target.name or "")

    def _discovery(self, path: str) -> dict[str, Any] | None:
        path = path.rstrip("/")
        if path == "/version":
            return {"major": "1", "minor": "33", "gitVersion": "v1.33.0-fake", "platform": "linux/amd64"}
        if path == "/api":
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if path == "/apis":
            return self.registry.group_list()
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) == 2:
            return self.registry.resource_list(parts[1])
        if parts[0] == "apis" and len(parts) == 3:
            return self.registry.resource_list(f"{parts[1]}/{parts[2]}")
        return None

    def _resolve(self, path: str) -> _Target | None:
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 3:
            group_version, rest = parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 4:
            group_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            return None
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces" and self.registry.find(group_version, rest[2]):
            namespace, rest = rest[1], rest[2:]
        kind = self.registry.find(group_version, rest[0])
        if kind is None or len(rest) > 3 or (namespace and not kind.namespaced):
            return None
        return _Target(
            kind, namespace, rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None
        )

    async def _dispatch(
        self, request: web.Request, target: _Target, query: dict[str, str]
    ) -> web.StreamResponse:
        method = request.method
        if target.name is None:
            if method == "GET" and query.get("watch", "").lower() in ("true", "1"):
                return await self._watch(request, target, query)
            if method == "GET":
                return web.json_response(await self._list(target, query))
            if method == "POST":
                return web.json_response(await self._create(target, await _body(request)), status=201)
        elif target.subresource in (None, "status"):
            if method in ("PUT", "PATCH"):
                await self._interleave(target)
            if method == "GET":
                return web.json_response(await self.kube.get(target.kind, target.name, target.namespace))
            if method == "PUT":
                return web.json_response(await self._replace(target, await _body(request)))
            if method == "PATCH":
                return web.json_response(await self._patch(request, target, query))
            if method == "DELETE" and target.subresource is None:
                options = await _body(request, optional=True)
                return web.json_response(await self._delete(target, options, query))
        elif target.subresource == "eviction" and target.kind == POD and method == "POST":
            return web.json_response(await self._evict(target, await _body(request)), status=201)
        return _error(405, "MethodNotAllowed", f"{method} is not supported on {request.path}")

    async def _interleave(self, target: _Target) -> None:
        for planned in list(self._interleaved):
            if (planned.kind, planned.name, planned.namespace) != (target.kind, target.name, target.namespace):
                continue
            if planned.subresource != "*" and planned.subresource != target.subresource:
                continue
            if planned.skip > 0:
                planned.skip -= 1
                continue
            planned.remaining -= 1
            if planned.remaining <= 0:
                self._interleaved.remove(planned)
            self.interleaved_writes += 1
            await planned.writer(self.kube)

    # --- verbs -------------------------------------------------------------------------------

    async def _list(self, target: _Target, query: dict[str, str]) -> dict[str, Any]:
        _check_field_selector(target.kind, query.get("fieldSelector"))
        items, version = await self.kube.list(
            target.kind, target.namespace, query.get("labelSelector"), query.get("fieldSelector")
        )
        items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        offset = 0
        if query.get("continue"):
            token = json.loads(base64.b64decode(query["continue"]))
            offset, version = int(token["offset"]), str(token["rv"])
        limit = int(query.get("limit") or 0)
        metadata: dict[str, Any] = {"resourceVersion": version}
        if limit and offset + limit < len(items):
            next_token = {"offset": offset + limit, "rv": version}
            metadata["continue"] = base64.b64encode(json.dumps(next_token).encode()).decode()
            metadata["remainingItemCount"] = len(items) - offset - limit
        page = items[offset : offset + limit] if limit else items[offset:]
        if not target.kind.group:
            for item in page:  # built-in list items carry no apiVersion/kind on the wire
                item.pop("apiVersion", None)
                item.pop("kind", None)
        return {
            "apiVersion": target.kind.api_version,
            "kind": f"{target.kind.kind}List",
            "metadata": metadata,
            "items": page,
        }

    async def _create(self, target: _Target, body: Manifest) -> Manifest:
        obj = self._with_identity(target, body)
        name = obj["metadata"].get("name") or ""
        if not name and not obj["metadata"].get("generateName"):
            raise invalid(target.kind, "", ["metadata.name: Required value: name or generateName is required"])
        if name and target.kind.group not in _CUSTOM_GROUPS and not _DNS_SUBDOMAIN.fullmatch(name):
            raise invalid(target.kind, name, [f'metadata.name: Invalid value: "{name}": {_SUBDOMAIN_RULE}'])
        obj = self._validator.default(obj) if self.validate else obj
        self._check_schema(obj if name else _named(obj))
        try:
            return await self.kube.create(obj)
        except ConflictError as error:
            raise WireError(409, error.reason, error.message, name=name) from None

    async def _replace(self, target: _Target, body: Manifest) -> Manifest:
        obj = self._with_identity(target, body)
        if obj["metadata"].get("name") != target.name:
            raise BadRequestError("the name of the object does not match the name on the URL")
        if needs_resource_version(target.kind) and not obj["metadata"].get("resourceVersion"):
            await self.kube.get(target.kind, str(target.name), target.namespace)  # NotFound first
            raise invalid(target.kind, str(target.name), [
                "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"], resource_form=True)
        return await self._write(target, obj)

    async def _patch(self, request: web.Request, target: _Target, query: dict[str, str]) -> Manifest:
        """Every patch flavour computes the resulting object and stores it as a precondition-checked
        replace (the store has no awaits inside, so read-compute-write is atomic here)."""
        assert target.name is not None
        content_type = request.content_type
        raw = await request.text()
        current = self.kube.peek(target.kind, target.name, target.namespace)
        if content_type == APPLY_PATCH:
            return await self._apply(target, raw, query, current)
        if current is None:
            await self.kube.get(target.kind, target.name, target.namespace)  # raises NotFound
        assert current is not None
        body = json.loads(raw or "null")
        if content_type == JSON_PATCH:
            result = apply_json_patch(current, body)
        elif content_type in (MERGE_PATCH, STRATEGIC_MERGE_PATCH):
            if content_type == STRATEGIC_MERGE_PATCH and any(d in raw for d in _SMP_DIRECTIVES):
                raise BadRequestError(
                    "strategic merge patch directives are not supported by the fake API server"
                )
            if not isinstance(body, dict):
                raise BadRequestError("a merge patch must be a JSON object")
            result = merge_patch(current, body)
        else:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format: "
                f"accepted media types include: {MERGE_PATCH}, {JSON_PATCH}",
            )
        return await self._write(target, result, current)

    async def _apply(
        self, target: _Target, raw: str, query: dict[str, str], current: Manifest | None
    ) -> Manifest:
        """Server-side apply, approximated: create when missing, else merge the applied config
        (fields this manager applied before and now omits are kept, unlike real SSA)."""
        if not query.get("fieldManager"):
            raise BadRequestError(
                "PATCH, application/apply-patch+yaml: fieldManager is required for apply requests"
            )
        applied = yaml.safe_load(raw)
        if not isinstance(applied, dict) or not applied.get("apiVersion") or not applied.get("kind"):
            raise BadRequestError("an apply patch must be an object with apiVersion and kind")
        applied = self._with_identity(target, applied)
        if current is None:
            if target.subresource:
                await self.kube.get(target.kind, str(target.name), target.namespace)  # raises NotFound
            return await self._create(target, applied)
        return await self._write(target, merge_patch(current, applied), current)

    async def _write(self, target: _Target, obj: Manifest, current: Manifest | None = None) -> Manifest:
        """Default, validate (as the stored result would be) and replace."""
        if current is None:
            current = self.kube.peek(target.kind, str(target.name), target.namespace)
        if self.validate:
            obj = self._validator.default(obj)
            stored = obj
            if current is not None and target.subresource == "status":
                stored = dict(current, status=obj.get("status"))
            self._check_schema(stored, current)
        return await self.kube.replace(obj, subresource=target.subresource)

    async def _delete(self, target: _Target, options: Manifest | None, query: dict[str, str]) -> Manifest:
        """DeleteOptions come in the body or, without one, as query parameters (as the real server reads them).
        A pod without a stated period gets its own ``terminationGracePeriodSeconds``. The answer: the object
        while it remains (finalizers, a pod shutting down) and a deleted pod; otherwise a Success Status."""
        assert target.name is not None
        grace = _grace_period(options, query)
        current = await self.kube.get(target.kind, target.name, target.namespace)
        preconditions = (options or {}).get("preconditions") or {}
        for key, label, why in (("uid", "UID", "deleted and then recreated"),
                                ("resourceVersion", "ResourceVersion", "modified")):
            expected = preconditions.get(key)
            if expected and current["metadata"].get(key) != expected:
                message = (f'Operation cannot be fulfilled on {kind_qualifier(target.kind)} "{target.name}": '
                           f"the {label} in the precondition ({expected}) does not match the {label} in record "
                           f"({current['metadata'].get(key)}). The object might have been {why}")
                raise WireError(409, "Conflict", message, details_kind=target.kind.kind)
        if target.kind == POD and grace is None:
            grace = _pod_grace_period(current)
        await self.kube.delete(target.kind, target.name, target.namespace, grace_period_seconds=grace)
        remaining = self.kube.peek(target.kind, target.name, target.namespace)
        if target.kind == POD:
            self._kubelet_stops(remaining)
            return remaining if remaining is not None else current
        if remaining is not None:
            return remaining
        return _deleted_status(target.kind, target.name, current["metadata"].get("uid", ""))

    async def _evict(self, target: _Target, body: Manifest) -> dict[str, Any]:
        """The pod is deleted as a DELETE would (its own grace period unless the Eviction's deleteOptions give
        one), after the DisruptionTarget condition; a refusal has no name or kind in its details."""
        assert target.name is not None and target.namespace is not None
        self._check_schema(body)
        if (body.get("metadata") or {}).get("name") != target.name:
            raise BadRequestError("name in URL does not match name in Eviction object")
        pod = await self.kube.get(POD, target.name, target.namespace)
        grace = _grace_period(body.get("deleteOptions"), {})
        try:
            await self.kube.evict(target.name, target.namespace, mark_disruption_target=True,
                                  grace_period_seconds=_pod_grace_period(pod) if grace is None else grace)
        except NotFoundError:
            raise
        except ApiError as error:
            if error.status == 429:
                message, _, cause = error.message.partition(". ")
                raise WireError(429, error.reason, f"{message}.", bare=True,
                                causes=[{"reason": "DisruptionBudget", "message": cause}]) from None
            raise WireError(error.status, "", error.message, bare=True) from None
        self._kubelet_stops(self.kube.peek(POD, target.name, target.namespace))
        return status_body(201, "", "")

    def _kubelet_stops(self, pod: Manifest | None) -> None:
        """The kubelet's final delete of a pod shutting down, after ``pod_shutdown_seconds``."""
        if pod is None or self.pod_shutdown_seconds is None or not pod["metadata"].get("deletionGracePeriodSeconds"):
            return
        name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
        uid = pod["metadata"]["uid"]

        async def stop() -> None:
            await asyncio.sleep(self.pod_shutdown_seconds or 0)
            current = self.kube.peek(POD, name, namespace)
            if current is not None and current["metadata"]["uid"] == uid:
                await self.kube.delete(POD, name, namespace, grace_period_seconds=0)

        task = asyncio.get_running_loop().create_task(stop())
        self._kubelet_tasks.add(task)
        task.add_done_callback(self._kubelet_tasks.discard)

    async def _watch(
        self, request: web.Request, target: _Target, query: dict[str, str]
    ) -> web.StreamResponse:
        _check_field_selector(target.kind, query.get("fieldSelector"))
        bookmarks = query.get("allowWatchBookmarks", "").lower() == "true"  # the real server ignores case
        timeout = float(query.get("timeoutSeconds") or 1800)
        stream = self.kube.watch(
            target.kind,
            query.get("resourceVersion", ""),
            target.namespace,
            label_selector=query.get("labelSelector"),
            field_selector=query.get("fieldSelector"),
            bookmark_interval=self.bookmark_interval if bookmarks else None,
        )
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            async with asyncio.timeout(timeout):
                async for event in stream:
                    await _send(response, {"type": event.type, "object": event.object})
        except TimeoutError:
            pass
        except GoneError as error:
            await _send(response, {"type": "ERROR", "object": status_body(410, "Expired", error.message)})
        except ApiError as error:
            await _send(
                response, {"type": "ERROR", "object": status_body(error.status, error.reason, error.message)}
            )
        except ConnectionResetError:  # the client went away
            return response
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
        await response.write_eof()
        return response

    # --- helpers -----------------------------------------------------------------------------

    def _with_identity(self, target: _Target, body: Manifest) -> Manifest:
        """Fill apiVersion/kind/namespace from the URL (as the real server does) and reject mismatches."""
        if not isinstance(body, dict):
            raise BadRequestError("the request body must be a JSON object")
        obj = clone(body)
        kind = target.kind
        if (
            obj.setdefault("apiVersion", kind.api_version) != kind.api_version
            or obj.setdefault("kind", kind.kind) != kind.kind
        ):
            raise BadRequestError(
                f"the body is {obj['apiVersion']} {obj['kind']}, the URL is for {kind.kind}"
            )
        metadata = obj.setdefault("metadata", {})
        if kind.namespaced:
            if metadata.get("namespace") and target.namespace and metadata["namespace"] != target.namespace:
                raise BadRequestError(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            metadata["namespace"] = target.namespace or metadata.get("namespace")
        if target.name and not metadata.get("name"):
            metadata["name"] = target.name
        return obj

    def _check_schema(self, manifest: Manifest, old: Manifest | None = None) -> None:
        if not self.validate:
            return
        problems = self._validator.problems(manifest, old)
        if problems:
            name = (manifest.get("metadata") or {}).get("name", "?")
            self.violations.append(f"{manifest.get('kind', '')} {name}: {'; '.join(problems)}")
            raise invalid(kind_of(manifest), name, problems)

    @property
    def crd_validation_skipped(self) -> str:
        """Why CRD objects are not schema-checked (empty when they are)."""
        return self._validator.crd_schemas_missing_reason


def _grace_period(options: Manifest | None, query: dict[str, str]) -> int | None:
    """``gracePeriodSeconds`` of a DELETE; a negative value means 1 s, as the API server's pod strategy has it."""
    if options is not None:
        if not isinstance(options, dict) or options.get("kind", "DeleteOptions") != "DeleteOptions":
            raise BadRequestError("the body of a DELETE must be a DeleteOptions object")
        raw: Any = options.get("gracePeriodSeconds")
    else:
        raw = query.get("gracePeriodSeconds")
    if raw is None or raw == "":
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | str):
        raise BadRequestError(f"gracePeriodSeconds: {raw!r} is not an integer")
    try:
        seconds = int(raw)
    except ValueError:
        raise BadRequestError(f"gracePeriodSeconds: {raw!r} is not an integer") from None
    return 1 if seconds < 0 else seconds


_CUSTOM_GROUPS = frozenset({"karpenter.sh", "karpenter.k8s.aws"})
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SUBDOMAIN_RULE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
DEFAULT_POD_GRACE_SECONDS = 30


def _pod_grace_period(pod: Manifest) -> int:
    """A pod's own ``terminationGracePeriodSeconds`` (30 when the spec leaves it out, the API default)."""
    value = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 \
        else DEFAULT_POD_GRACE_SECONDS


def _check_field_selector(kind: Kind, selector: str | None) -> None:
    field = unsupported_field(kind, selector)
    if field:
        raise BadRequestError(f"field label not supported: {field}")


def _deleted_status(kind: Kind, name: str, uid: str) -> dict[str, Any]:
    """What the server answers a DELETE that removed an object at once (no ``code``: it is omitted when 0)."""
    body = status_body(200, "", "", kind=kind, name=name, uid=uid)
    body.pop("code")
    return body


def _named(obj: Manifest) -> Manifest:
    named = clone(obj)
    named["metadata"]["name"] = named["metadata"]["generateName"] + "xxxxx"
    return named


async def _body(request: web.Request, *, optional: bool = False) -> Any:
    raw = await request.text()
    if not raw and optional:
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as error:
        raise BadRequestError(f"the request body is not valid JSON: {error}") from None


async def _send(response: web.StreamResponse, event: dict[str, Any]) -> None:
    await response.write(json.dumps(event).encode() + b"\n")


def _error(status: int, reason: str, message: str, **details: Any) -> web.Response:
    # The Content-Type must be exactly application/json: some clients only parse Status bodies then.
    body = status_body(status, reason, message, **details)
    return web.Response(status=status, body=json.dumps(body).encode(), content_type="application/json")
