"""List+watch reflectors: keep a local copy of one kind current and report every change.

A reflector lists the kind, reports each object through ``on_upsert``, then watches from the
list's resourceVersion (with bookmarks, so the version stays fresh while other kinds change).
When a watch stream ends it resumes from the last version seen; when the server answers 410
(the version was compacted away) it lists again and synthesises ``on_delete`` for every object
that vanished meanwhile, so consumers never keep ghosts. Callbacks may be plain functions or
coroutines; an exception in one is logged and does not stop the reflector.
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
    ApiError,
    GoneError,
    Kind,
    KubeAPI,
    Manifest,
)

log = logging.getLogger(__name__)

Callback = Callable[[Manifest], Awaitable[None] | None]
ObjectKey = tuple[str, str]

# What ClusterState is built from (see reconciler/state.py).
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
    ) -> None:
        self.kube = kube
        self.kind = kind
        self.namespace = namespace
        self.label_selector = label_selector
        self.store: dict[ObjectKey, Manifest] = {}
        self.resource_version = ""
        self.synced = asyncio.Event()
        self.relists = 0
        self._on_upsert = on_upsert
        self._on_delete = on_delete
        self._backoff = backoff or Backoff()
        self._rng = random.Random(seed)

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
            except Exception as error:  # API errors, dropped connections, garbage on the wire
                failures += 1
                needs_list = needs_list or not isinstance(error, ApiError)
                delay = self._backoff.delay(failures, self._rng)
                log.warning("list/watch failed: %r; retrying in %.1fs", error, delay, extra={"kind": self.kind.kind})
                await asyncio.sleep(delay)

    async def _list(self) -> None:
        if self.label_selector is not None:
            items, version = await self.kube.list(self.kind, self.namespace, self.label_selector)
        else:
            items, version = await self.kube.list(self.kind, self.namespace)
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
        try:
            async for event in stream:
                version = _version(event.object)
                if event.type == "BOOKMARK":
                    self.resource_version = version or self.resource_version
                    continue
                key = object_key(event.object)
                if event.type == "DELETED":
                    self.store.pop(key, None)
                    await self._deliver(self._on_delete, event.object)
                else:
                    self.store[key] = event.object
                    await self._deliver(self._on_upsert, event.object)
                if version:
                    self.resource_version = version
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

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
    ) -> None:
        self.reflectors: Sequence[Reflector] = [
            Reflector(kube, kind, on_upsert=on_upsert, on_delete=on_delete, backoff=backoff) for kind in kinds
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
