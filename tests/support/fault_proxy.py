"""A fault-injecting proxy between one client and a Kubernetes API server (any server: the fake or a real one).

Two modes:

- ``mode="http"`` (default): an HTTP/1.1 proxy that sees each request (method, path, query) and can, for the
  requests a ``Match`` selects, hold them (``stall``: nothing is forwarded until the rule is removed), reset
  the client's connection (``reset``: TCP RST), answer an error ``Status`` itself (``answer``: 500, 429 with
  ``Retry-After``...), keep watch streams open but forward nothing (``silence_watches``: the bytes are held
  until the rule is removed), close open watch streams (``drop_watches``) and answer re-watches from a
  resourceVersion with ``410 Gone`` so the client must re-list (``gone_on_rewatch``). Upstream may be HTTP or
  HTTPS (``upstream_ssl``: an ``ssl.SSLContext`` trusting the server's CA, with ``load_cert_chain`` when the
  proxy itself must present a client certificate); the proxy may itself listen on TLS (``listen_ssl``).
  Bearer tokens pass through untouched (a ServiceAccount token keeps its RBAC identity).
- ``mode="tcp"``: a byte pipe that never parses anything (so it also carries TLS end to end); only the
  unselective faults exist there: ``stall()`` holds every byte in both directions, ``reset()`` resets every
  connection (and refuses new ones while the rule stands).

Every request is recorded (``requests``: method, path, query, when forwarded or answered on
``time.monotonic``, what was done to it) so a test can count them by verb and resource (``counts``).

Usage::

    async with FaultProxy(server_url) as proxy:
        client = LiveKube.for_url(proxy.url, token=...)
        rule = proxy.answer(500, Match(methods={"POST"}, path="/eviction"))
        ...
        proxy.remove(rule)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
import struct
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
              "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding", "content-encoding"}
WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")


def is_watch(query: dict[str, str]) -> bool:
    return query.get("watch", "").lower() in ("true", "1")


def verb_and_resource(method: str, path: str, query: dict[str, str]) -> tuple[str, str]:
    """The API server's audit verb and ``resource[/subresource]`` of a request (``("list", "pods")``,
    ``("create", "pods/eviction")``, ``("patch", "nodepools/status")``); ``("", path)`` for discovery."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 3:
        rest = parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        rest = parts[3:]
    else:
        return "", path
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    if not rest:
        return "", path
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    named = len(rest) > 1
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, "")
    if method == "GET":
        verb = "watch" if is_watch(query) else ("get" if named else "list")
    return verb, resource


@dataclass(slots=True, frozen=True)
class Match:
    """Which requests a rule applies to; every given field must hold (nothing given: every request)."""

    methods: frozenset[str] | set[str] | None = None
    path: str = ""  # a substring of the path
    watch: bool | None = None  # only watch requests (True), only others (False), any (None)
    where: Callable[[web.Request], bool] | None = None

    def __call__(self, request: web.Request) -> bool:
        if self.methods is not None and request.method not in self.methods:
            return False
        if self.path and self.path not in request.path:
            return False
        if self.watch is not None and is_watch(dict(request.query)) != self.watch:
            return False
        return self.where is None or self.where(request)

    @property
    def selective(self) -> bool:
        return bool(self.methods is not None or self.path or self.watch is not None or self.where)


ANY = Match()
LEASES = Match(path="/leases")
WATCHES = Match(watch=True)


@dataclass(eq=False)
class Rule:
    action: str  # stall | reset | answer | silence | gone
    match: Match
    status: int = 0
    retry_after: float | None = None
    times: int | None = None  # None: until removed
    hits: int = 0

    def take(self, request: web.Request) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        if not self.match(request):
            return False
        self.hits += 1
        return True


@dataclass(slots=True, frozen=True)
class ProxiedRequest:
    method: str
    path: str
    query: dict[str, str]
    at: float  # time.monotonic() when forwarded or answered
    outcome: str  # "forwarded", or the fault applied: "answer 500", "reset", ...
    status: int = 0  # the status the client got (0: none, the connection was reset or dropped)

    @property
    def writes(self) -> bool:
        return self.method in WRITE_METHODS

    @property
    def forwarded(self) -> bool:
        return self.outcome == "forwarded"

    @property
    def verb_resource(self) -> tuple[str, str]:
        return verb_and_resource(self.method, self.path, self.query)


@dataclass(eq=False)
class _Stream:
    request: web.Request
    match_info: tuple[str, str]
    dropped: bool = False


class FaultProxy:
    def __init__(self, upstream: str, *, mode: str = "http", upstream_ssl: ssl.SSLContext | bool | None = None,
                 listen_ssl: ssl.SSLContext | None = None) -> None:
        if mode not in ("http", "tcp"):
            raise ValueError(f"FaultProxy mode {mode!r}: must be 'http' or 'tcp'")
        self.upstream = upstream.rstrip("/")
        self.mode = mode
        self.upstream_ssl = upstream_ssl
        self.listen_ssl = listen_ssl
        self.rules: list[Rule] = []
        self.requests: list[ProxiedRequest] = []
        self.url = ""
        self._changed = asyncio.Event()
        self._streams: set[_Stream] = set()
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._tcp_server: asyncio.Server | None = None
        self._pipes: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> str:
        scheme = "https" if self.listen_ssl is not None else "http"
        if self.mode == "tcp":
            self._tcp_server = await asyncio.start_server(self._pipe, "127.0.0.1", 0)
            port = self._tcp_server.sockets[0].getsockname()[1]
            scheme = urlsplit(self.upstream).scheme  # bytes pass through: the client speaks upstream's scheme
        else:
            connector = aiohttp.TCPConnector(ssl=self.upstream_ssl if self.upstream_ssl is not None else True,
                                             limit=0)
            self._session = aiohttp.ClientSession(connector=connector, auto_decompress=False,
                                                  timeout=aiohttp.ClientTimeout(total=None))
            app = web.Application(client_max_size=64 * 1024 * 1024)
            app.router.add_route("*", "/{tail:.*}", self._handle)
            self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.5)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.listen_ssl)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"{scheme}://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        self.rules.clear()
        self._notify()
        if self._runner is not None:
            for stream in list(self._streams):
                _reset(stream.request.transport)
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._tcp_server is not None:
            self._tcp_server.close()
            for pair in list(self._pipes):
                for writer in pair:
                    _reset(writer.transport)
            await self._tcp_server.wait_closed()
            self._tcp_server = None

    async def __aenter__(self) -> FaultProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- faults (scriptable while running) ------------------------------------------------------

    def stall(self, match: Match = ANY) -> Rule:
        """Hold matching requests (tcp mode: every byte) until the rule is removed; then they go on."""
        return self._add(Rule("stall", match))

    def reset(self, match: Match = ANY, *, times: int | None = None) -> Rule:
        """Reset the client's connection (TCP RST) on matching requests (tcp mode: every connection)."""
        rule = self._add(Rule("reset", match, times=times))
        if self.mode == "tcp":
            for pair in list(self._pipes):
                for writer in pair:
                    _reset(writer.transport)
        return rule

    def answer(self, status: int, match: Match = ANY, *, retry_after: float | None = None,
               times: int | None = None) -> Rule:
        """Answer matching requests with an error ``Status`` (and ``Retry-After``) without forwarding them;
        ``answer(200)`` is an empty answer (a watch that ends at once)."""
        return self._add(Rule("answer", match, status=status, retry_after=retry_after, times=times))

    def silence_watches(self, match: Match = WATCHES) -> Rule:
        """Watch streams (open and new) stay open but nothing reaches the client until the rule is removed."""
        return self._add(Rule("silence", _watches(match)))

    def gone_on_rewatch(self, match: Match = WATCHES, *, times: int | None = None) -> Rule:
        """A watch from a resourceVersion gets an in-stream ``ERROR 410 Expired``: the client must re-list."""
        return self._add(Rule("gone", _watches(match), status=410, times=times))

    def drop_watches(self, match: Match = WATCHES) -> int:
        """Close the matching watch streams open now (the connection is reset); returns how many."""
        self._http_only(match, "drop_watches")
        dropped = 0
        for stream in list(self._streams):
            if _watches(match)(stream.request):
                stream.dropped = True
                _reset(stream.request.transport)
                dropped += 1
        return dropped

    def remove(self, *rules: Rule) -> None:
        for rule in rules:
            with contextlib.suppress(ValueError):
                self.rules.remove(rule)
        self._notify()

    def clear(self) -> None:
        self.rules.clear()
        self._notify()

    def open_watches(self) -> int:
        return len(self._streams)

    # --- observation -------------------------------------------------------------------------

    def counts(self, since: float = 0.0, *, forwarded_only: bool = False) -> Counter[tuple[str, str]]:
        """Requests (from ``since``, monotonic) by (verb, resource): ``counts()[("get", "nodeclaims")]``."""
        return Counter(r.verb_resource for r in self.requests
                       if r.at >= since and (r.forwarded or not forwarded_only))

    def writes(self, since: float = 0.0) -> list[ProxiedRequest]:
        """Writes that reached the server (forwarded), from ``since``."""
        return [r for r in self.requests if r.writes and r.forwarded and r.at >= since]

    # --- internals ---------------------------------------------------------------------------

    def _add(self, rule: Rule) -> Rule:
        self._http_only(rule.match, rule.action)
        if self.mode == "tcp" and rule.action not in ("stall", "reset"):
            raise ValueError(f"FaultProxy: {rule.action} needs mode='http' (a TCP pipe cannot see requests)")
        self.rules.append(rule)
        self._notify()
        return rule

    def _http_only(self, match: Match, what: str) -> None:
        if self.mode == "tcp" and match.selective:
            raise ValueError(f"FaultProxy: a selective {what} needs mode='http' (a TCP pipe cannot see requests)")

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _first(self, action: str, request: web.Request) -> Rule | None:
        return next((rule for rule in self.rules if rule.action == action and rule.take(request)), None)

    def _holding(self, action: str, request: web.Request) -> bool:
        return any(rule.action == action and rule.match(request) for rule in self.rules)


    def _record(self, request: web.Request, outcome: str, status: int = 0) -> None:
        self.requests.append(ProxiedRequest(request.method, request.path, dict(request.query), time.monotonic(),
                                            outcome, status))

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        stalled = self._first("stall", request)  # counted in its ``hits`` (a test can wait for a held request)
        while stalled is not None and stalled in self.rules:
            await self._changed.wait()  # cancelled when the client gives up and closes the connection
        if self._first("reset", request) is not None:
            self._record(request, "reset")
            _reset(request.transport)
            return web.Response(status=500)  # never reaches the client: the connection is gone
        answered = self._first("answer", request)
        if answered is not None:
            self._record(request, f"answer {answered.status}", answered.status)
            return _status_response(answered.status, answered.retry_after)
        query = dict(request.query)
        if is_watch(query) and query.get("resourceVersion") not in (None, "", "0"):
            gone = self._first("gone", request)
            if gone is not None:
                self._record(request, "gone", 200)
                return await _expired_stream(request)
        return await self._forward(request, query)

    async def _forward(self, request: web.Request, query: dict[str, str]) -> web.StreamResponse:
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        body = await request.read() if request.can_read_body else None
        self._record(request, "forwarded")
        async with self._session.request(request.method, self.upstream + request.path_qs, headers=headers,
                                         data=body, allow_redirects=False) as upstream:
            reply_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP}
            if not is_watch(query) or upstream.status != 200:
                return web.Response(status=upstream.status, body=await upstream.read(), headers=reply_headers)
            return await self._stream(request, upstream, reply_headers)

    async def _stream(self, request: web.Request, upstream: aiohttp.ClientResponse,
                      headers: dict[str, str]) -> web.StreamResponse:
        response = web.StreamResponse(status=200, headers=headers)
        response.enable_chunked_encoding()
        await response.prepare(request)
        stream = _Stream(request, (request.method, request.path))
        self._streams.add(stream)
        try:
            async for line in upstream.content:
                while self._holding("silence", request) and not stream.dropped:
                    await self._changed.wait()
                if stream.dropped:
                    break
                await response.write(line)
            else:
                await response.write_eof()
        except (ConnectionResetError, aiohttp.ClientError):
            pass
        finally:
            self._streams.discard(stream)
        return response

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if any(rule.action == "reset" for rule in self.rules):
            _reset(writer.transport)
            return
        parsed = urlsplit(self.upstream)
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            up_reader, up_writer = await asyncio.open_connection(parsed.hostname, port)
        except OSError:
            _reset(writer.transport)
            return
        pair = (writer, up_writer)
        self._pipes.add(pair)
        try:
            await asyncio.gather(self._copy(reader, up_writer), self._copy(up_reader, writer))
        finally:
            self._pipes.discard(pair)
            for end in pair:
                end.close()

    async def _copy(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(65536):
                while any(rule.action == "stall" for rule in self.rules):
                    await self._changed.wait()
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                sink.write_eof()


def _watches(match: Match) -> Match:
    return Match(methods=match.methods, path=match.path, watch=True, where=match.where)


def _reset(transport: asyncio.BaseTransport | None) -> None:
    """Close with a TCP RST (SO_LINGER 0), not a graceful FIN: the peer sees "connection reset"."""
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()  # type: ignore[attr-defined]


def _status(status: int, message: str, reason: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": status}


REASONS = {410: "Expired", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
           504: "Timeout", 409: "Conflict"}


def _status_response(status: int, retry_after: float | None) -> web.Response:
    if status == 200:  # an empty answer: for a watch, a stream that ends at once without an event
        return web.Response(status=200, body=b"", content_type="application/json")
    reason = REASONS.get(status, "Unknown")
    body = _status(status, f"injected by the fault proxy: {reason}", reason)
    headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
    return web.Response(status=status, body=json.dumps(body).encode(), headers=headers,
                        content_type="application/json")


async def _expired_stream(request: web.Request) -> web.StreamResponse:
    """What the API server sends a watch from a compacted resourceVersion: 200, then one ERROR 410 event."""
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    await response.prepare(request)
    event = {"type": "ERROR", "object": _status(410, "too old resource version (injected)", "Expired")}
    await response.write(json.dumps(event).encode() + b"\n")
    await response.write_eof()
    return response


def summary(counts: Counter[tuple[str, str]], verbs: Iterable[str] = ("get", "list", "watch", "create", "update",
                                                                     "patch", "delete")) -> dict[str, int]:
    """Totals by verb (for messages and reports)."""
    return {verb: sum(n for (v, _), n in counts.items() if v == verb) for verb in verbs}
