"""List+watch reflectors: keep a local copy of one kind current and report every change.

A reflector lists the kind, reports each object through ``on_upsert``, then watches from the
list's resourceVersion (with bookmarks, so the version stays fresh while other kinds change).
As client-go's reflector:

- a watch stream the server ends (its ``timeoutSeconds``, a dropped connection) is resumed from the
  last version seen; one that ends at once without a single event counts as a failure (backed off),
  so a server that closes every watch cannot spin the loop;
- a watch that fails (410 Gone because the version was compacted away, any other error status, an
  ``ERROR`` event in the stream) is followed by a new list, never by a watch from the old version;
  only 429 "too many requests" re-watches (after the backoff). A re-list synthesises ``on_delete``
  for every object that vanished meanwhile, so consumers never keep ghosts;
- a watch that delivers nothing at all, no event and no bookmark, for ``progress_deadline`` seconds
  is presumed stuck (a connection that went silent without closing: HTTP/1.1 has no pings; client-go
  notices through HTTP/2 pings in about 45 s). The API server sends a bookmark about every minute,
  so the default deadline (``WATCH_PROGRESS_DEADLINE``, 2 min) is twice that: the stream is closed,
  the stall logged, and the kind re-listed.

Callbacks may be plain functions or coroutines; an exception in one is logged and does not stop the
reflector.

A ``transform`` runs on every object before it is stored or delivered (client-go's informer
``SetTransform``); the live controller passes ``drop_managed_fields``, as Karpenter's manager does.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.kube.api import (
    DAEMONSET,
    EC2NODECLASS,
    NODE,
    NODECLAIM,
    NODEPOOL,
    PDB,
    POD,
    PRIORITYCLASS,
    PV,
    PVC,
    RUNTIMECLASS,
    STORAGECLASS,
    GoneError,
    Kind,
    KubeAPI,
    Manifest,
    TooManyRequestsError,
)

log = logging.getLogger(__name__)

Callback = Callable[[Manifest], Awaitable[None] | None]
Transform = Callable[[Manifest], Manifest]
ObjectKey = tuple[str, str]
DEFAULT_PROGRESS_DEADLINE = 120.0  # twice the API server's bookmark interval (about a minute)
SHORT_WATCH = 1.0  # a watch that ends sooner, without any event, is a failure (client-go's "very short watch")


class WatchStalled(RuntimeError):
    """The watch delivered nothing (no event, no bookmark) within the progress deadline."""


class ShortWatch(RuntimeError):
    """The watch ended at once without a single event."""

# What ClusterState is built from (see reconciler/state/cluster.py).
CLUSTER_STATE_KINDS: tuple[Kind, ...] = (
    NODEPOOL,
    EC2NODECLASS,
    NODECLAIM,
    NODE,
    POD,
    DAEMONSET,
    PDB,
    PV,
    PVC,
    STORAGECLASS,
    PRIORITYCLASS,
    RUNTIMECLASS,
)


@dataclass(slots=True, frozen=True)
class Backoff:
    """Exponential backoff with full jitter between failed list/watch attempts."""

    initial: float = 0.5
    maximum: float = 30.0

    def delay(self, failures: int, rng: random.Random) -> float:
        return rng.uniform(0, min(self.maximum, self.initial * 2 ** max(0, failures - 1)))


def drop_managed_fields(manifest: Manifest) -> Manifest:
    """The object without ``metadata.managedFields``, removed in place (the object was just decoded and is ours).

    Server-side apply's field ownership: often the largest part of an object (kube-scheduler, kwok, the
    kubelet and controllers each add an entry per field set they own) and read by no decision. Writing back
    stays correct: every write built from a cached object is a merge patch of the difference between the
    object and its edited copy (``kube.retry.modify``), so a field absent from both is never in the patch; no
    cached object is sent whole (PUT or apply), where an omitted managedFields would still be kept by the
    server (``tests/controllers/test_ctrl_managed_fields.py``)."""
    metadata = manifest.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)
    return manifest


def object_key(manifest: Manifest) -> ObjectKey:
    metadata = manifest.get("metadata") or {}
    return (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))


class Reflector:
    """Mirror one kind (optionally one namespace / label selector) into ``store`` and callbacks."""

    def __init__(
        self,
        kube: KubeAPI,
        kind: Kind,
        *,
        on_upsert: Callback,
        on_delete: Callback,
        namespace: str | None = None,
        label_selector: str | None = None,
        backoff: Backoff | None = None,
        seed: int | None = None,
        progress_deadline: float | None = DEFAULT_PROGRESS_DEADLINE,
        transform: Transform | None = None,
    ) -> None:
        if progress_deadline is not None and progress_deadline <= 0:
            raise ValueError(f"watch progress deadline must be positive, got {progress_deadline}")
        self.kube = kube
        self.kind = kind
        self.namespace = namespace
        self.label_selector = label_selector
        self.store: dict[ObjectKey, Manifest] = {}
        self.resource_version = ""
        self.synced = asyncio.Event()
        self.relists = 0
        self.stalls = 0  # watches closed for making no progress
        self.progress_deadline = progress_deadline
        self._on_upsert = on_upsert
        self._on_delete = on_delete
        self._backoff = backoff or Backoff()
        self._rng = random.Random(seed)
        self._transform = transform

    async def run(self) -> None:
        """Run until cancelled."""
        failures = 0
        needs_list = True
        while True:
            try:
                if needs_list:
                    await self._list()
                    needs_list = False
                await self._watch()
                failures = 0  # a stream that ended normally: resume from the last version
            except GoneError:
                log.info("watch expired, re-listing", extra={"kind": self.kind.kind})
                needs_list = True
                self.relists += 1
            except WatchStalled:
                self.stalls += 1
                self.relists += 1
                needs_list = True
                log.warning("watch made no progress (no event, no bookmark) for %gs; closed it, re-listing",
                            self.progress_deadline, extra={"kind": self.kind.kind, "seconds": self.progress_deadline})
            except Exception as error:  # API errors, dropped connections, garbage on the wire, a very short watch
                failures += 1
                # A failed list or watch is followed by a list (client-go), except a 429: the server only asks
                # us to come back later, and the version we hold is still good.
                needs_list = needs_list or not isinstance(error, TooManyRequestsError)
                delay = self._backoff.delay(failures, self._rng)
                log.warning("list/watch failed: %r; %s in %.1fs", error, "re-listing" if needs_list else "re-watching",
                            delay, extra={"kind": self.kind.kind})
                if needs_list:
                    self.relists += 1
                await asyncio.sleep(delay)

    async def _list(self) -> None:
        if self.label_selector is not None:
            items, version = await self.kube.list(self.kind, self.namespace, self.label_selector)
        else:
            items, version = await self.kube.list(self.kind, self.namespace)
        if self._transform is not None:
            items = [self._transform(item) for item in items]
        listed = {object_key(item): item for item in items}
        for key in [key for key in self.store if key not in listed]:
            await self._deliver(self._on_delete, self.store.pop(key))  # deleted while we were not watching
        for key, item in listed.items():
            previous = self.store.get(key)
            self.store[key] = item
            if previous is None or _version(previous) != _version(item):
                await self._deliver(self._on_upsert, item)
        self.resource_version = version
        self.synced.set()

    async def _watch(self) -> None:
        options: dict[str, Any] = {}
        if self.label_selector is not None:
            options["label_selector"] = self.label_selector
        stream = self.kube.watch(self.kind, self.resource_version, self.namespace, **options)
        loop = asyncio.get_running_loop()
        started, events = loop.time(), 0
        deadline = self.progress_deadline
        try:
            async with asyncio.timeout_at(None if deadline is None else loop.time() + deadline) as progress:
                async for event in stream:
                    events += 1
                    if deadline is not None:
                        progress.reschedule(loop.time() + deadline)
                    await self._handle(event)
        except TimeoutError:
            if progress.expired():
                raise WatchStalled(f"no watch event or bookmark for {deadline:g}s") from None
            raise
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        if events == 0 and loop.time() - started < SHORT_WATCH:
            raise ShortWatch(f"the watch ended after {loop.time() - started:.2f}s without any event")

    async def _handle(self, event: Any) -> None:
        version = _version(event.object)
        if event.type == "BOOKMARK":
            self.resource_version = version or self.resource_version
            return
        obj = event.object if self._transform is None else self._transform(event.object)
        key = object_key(obj)
        if event.type == "DELETED":
            self.store.pop(key, None)
            await self._deliver(self._on_delete, obj)
        else:
            self.store[key] = obj
            await self._deliver(self._on_upsert, obj)
        if version:
            self.resource_version = version

    async def _deliver(self, callback: Callback, manifest: Manifest) -> None:
        try:
            result = callback(manifest)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("reflector callback failed", extra={"kind": self.kind.kind, "object": object_key(manifest)})


def _version(manifest: Manifest) -> str:
    return str((manifest.get("metadata") or {}).get("resourceVersion") or "")


class Reflectors:
    """Several reflectors sharing callbacks; ``async with`` starts them and stops them on exit."""

    def __init__(
        self,
        kube: KubeAPI,
        kinds: Iterable[Kind] = CLUSTER_STATE_KINDS,
        *,
        on_upsert: Callback,
        on_delete: Callback,
        backoff: Backoff | None = None,
        progress_deadline: float | None = DEFAULT_PROGRESS_DEADLINE,
        transform: Transform | None = None,
    ) -> None:
        self.reflectors: Sequence[Reflector] = [
            Reflector(kube, kind, on_upsert=on_upsert, on_delete=on_delete, backoff=backoff,
                      progress_deadline=progress_deadline, transform=transform)
            for kind in kinds
        ]
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [asyncio.create_task(r.run(), name=f"reflector-{r.kind.kind}") for r in self.reflectors]

    async def wait_synced(self, timeout: float | None = None) -> None:
        """Wait until every reflector has completed its first list (the cache is complete)."""
        async with asyncio.timeout(timeout):
            await asyncio.gather(*(r.synced.wait() for r in self.reflectors))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def __aenter__(self) -> Reflectors:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
