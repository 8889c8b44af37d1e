"""Reflectors: list+watch with bookmarks, resume, and 410 re-list that synthesises missed deletes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from support.fake_apiserver import FakeApiServer
from support.fault_proxy import FaultProxy, Match
from support.timescale import scaled

from reconciler.kube.api import NODE, POD, ApiError, Manifest
from reconciler.kube.live import LiveKube
from reconciler.kube.memory import MemoryKube
from reconciler.kube.reflector import Backoff, Reflector, Reflectors

FAST = Backoff(initial=0.01, maximum=0.05)


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


class Recorder:
    """Mirrors what a ClusterState would hold, from the callbacks alone."""

    def __init__(self) -> None:
        self.objects: dict[str, Manifest] = {}
        self.log: list[tuple[str, str]] = []

    def upsert(self, manifest: Manifest) -> None:
        self.objects[manifest["metadata"]["name"]] = manifest
        self.log.append(("upsert", manifest["metadata"]["name"]))

    async def delete(self, manifest: Manifest) -> None:
        self.objects.pop(manifest["metadata"]["name"], None)
        self.log.append(("delete", manifest["metadata"]["name"]))


async def eventually(condition: Callable[[], bool], timeout: float = 5) -> None:
    async with asyncio.timeout(scaled(timeout)):
        while not condition():
            await asyncio.sleep(0.01)


async def test_reflector_lists_then_follows_the_watch() -> None:
    kube = MemoryKube()
    await kube.create(node("a"))
    seen = Recorder()
    reflector = Reflector(kube, NODE, on_upsert=seen.upsert, on_delete=seen.delete, backoff=FAST)
    task = asyncio.create_task(reflector.run())
    try:
        await asyncio.wait_for(reflector.synced.wait(), scaled(2))
        assert set(seen.objects) == {"a"}
        await kube.create(node("b"))
        await kube.patch(NODE, "a", {"metadata": {"labels": {"x": "y"}}})
        await kube.delete(NODE, "b")
        await eventually(lambda: ("delete", "b") in seen.log)
        assert seen.objects["a"]["metadata"]["labels"] == {"x": "y"}
        assert set(reflector.store) == {("", "a")}
    finally:
        task.cancel()


async def test_gone_relists_and_synthesises_missed_deletes() -> None:
    kube = MemoryKube()
    for name in ("a", "b", "c"):
        await kube.create(node(name))
    seen = Recorder()
    reflector = Reflector(kube, NODE, on_upsert=seen.upsert, on_delete=seen.delete, backoff=FAST)
    task = asyncio.create_task(reflector.run())
    try:
        await asyncio.wait_for(reflector.synced.wait(), scaled(2))
        # Simulate a partition: the watch is dead while b is deleted and d created, and the
        # history is compacted so the reflector cannot resume.
        kube.inject_fault("watch", ApiError(503, "ServiceUnavailable", "down"), times=1000)
        kube.break_watches()
        await asyncio.sleep(0.05)
        await kube.delete(NODE, "b")
        await kube.create(node("d"))
        kube.compact()
        kube.clear_faults()
        await eventually(lambda: set(seen.objects) == {"a", "c", "d"})
        assert ("delete", "b") in seen.log
        assert reflector.relists >= 1
        assert seen.log.count(("upsert", "a")) == 1, "unchanged objects are not re-reported after a re-list"
    finally:
        task.cancel()


async def test_callback_failures_do_not_stop_the_reflector() -> None:
    kube = MemoryKube()
    seen = Recorder()

    def flaky(manifest: Manifest) -> None:
        if manifest["metadata"]["name"] == "bad":
            raise ValueError("boom")
        seen.upsert(manifest)

    reflector = Reflector(kube, NODE, on_upsert=flaky, on_delete=seen.delete, backoff=FAST)
    task = asyncio.create_task(reflector.run())
    try:
        await asyncio.wait_for(reflector.synced.wait(), scaled(2))
        await kube.create(node("bad"))
        await kube.create(node("good"))
        await eventually(lambda: "good" in seen.objects)
    finally:
        task.cancel()


async def test_reflectors_over_http_with_bookmarks_and_scripted_410(
    server: FakeApiServer, live: LiveKube
) -> None:
    await live.create(node("a"))
    await live.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "apps"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        }
    )
    seen = Recorder()
    async with Reflectors(
        live, [NODE, POD], on_upsert=seen.upsert, on_delete=seen.delete, backoff=FAST
    ) as group:
        await group.wait_synced(5)
        assert set(seen.objects) == {"a", "p"}
        node_reflector = group.reflectors[0]
        listed_at = int(node_reflector.resource_version)
        await live.patch(POD, "p", {"metadata": {"labels": {"moved": "on"}}}, "apps")
        # Only a Pod changed; a bookmark moves the Node reflector's version past it anyway.
        await eventually(lambda: int(node_reflector.resource_version) > listed_at)
        server.close_watches()  # clean stream end: resume without re-listing
        await live.create(node("b"))
        await eventually(lambda: "b" in seen.objects)
        assert node_reflector.relists == 0
        server.expire_watches()
        await live.delete(NODE, "a")
        await eventually(lambda: "a" not in seen.objects)
        await eventually(lambda: node_reflector.relists >= 1)
    lists = [r for r in server.requests if r.path == "/api/v1/nodes" and r.query.get("watch") != "true"]
    assert len(lists) >= 2, "the 410 forced a fresh list"


async def _reflect(live: LiveKube, deadline: float | None = 5.0) -> tuple[Reflector, Recorder, asyncio.Task[None]]:
    await live.create(node("first"))
    seen = Recorder()
    reflector = Reflector(live, NODE, on_upsert=seen.upsert, on_delete=seen.delete, backoff=FAST,
                          progress_deadline=deadline)
    task = asyncio.create_task(reflector.run())
    await asyncio.wait_for(reflector.synced.wait(), 10)
    return reflector, seen, task


def _lists(proxy: FaultProxy, since: float) -> int:
    return proxy.counts(since, forwarded_only=True)[("list", "nodes")]


async def test_a_silent_watch_is_closed_at_the_progress_deadline_and_the_kind_relisted(server: FakeApiServer) -> None:
    """Issue 24: watch streams open but silent (no event, no bookmark) were never noticed."""
    async with FaultProxy(server.url) as proxy, LiveKube.for_url(proxy.url, token="t") as live:
        reflector, seen, task = await _reflect(live, deadline=0.5)
        try:
            proxy.silence_watches()
            cut = time.monotonic()
            await server.kube.create(node("born-while-silent"))
            await eventually(lambda: "born-while-silent" in seen.objects, timeout=10)
            assert reflector.stalls >= 1 and _lists(proxy, cut) >= 1
            assert time.monotonic() - cut >= 0.5, "noticed at the deadline, not before"
        finally:
            task.cancel()


async def test_bookmarks_keep_a_quiet_watch_alive(server: FakeApiServer) -> None:
    """The fake server bookmarks every 50 ms: a quiet kind is not mistaken for a stuck watch."""
    async with FaultProxy(server.url) as proxy, LiveKube.for_url(proxy.url, token="t") as live:
        reflector, _, task = await _reflect(live, deadline=0.5)
        try:
            cut = time.monotonic()
            await asyncio.sleep(1.5)
            assert reflector.stalls == 0 and _lists(proxy, cut) == 0
        finally:
            task.cancel()


async def test_any_watch_error_is_followed_by_a_relist_but_429_only_by_a_rewatch(server: FakeApiServer) -> None:
    """Issue 24: after a watch-only outage (500s) the reflector re-watched from its old version without re-listing."""
    async with FaultProxy(server.url) as proxy, LiveKube.for_url(proxy.url, token="t") as live:
        reflector, _, task = await _reflect(live)

        async def settled() -> float:
            """A watch is open and has had bookmarks (so closing it is not a "very short watch")."""
            await eventually(lambda: proxy.open_watches() == 1)
            await asyncio.sleep(0.3)
            return time.monotonic()

        try:
            cut = await settled()
            throttled = proxy.answer(429, Match(watch=True), times=2)
            proxy.drop_watches()
            await eventually(lambda: throttled.hits == 2)
            await settled()
            assert _lists(proxy, cut) == 0, "429: come back later; the version held is still good"
            cut = time.monotonic()
            outage = proxy.answer(500, Match(watch=True), times=3)
            proxy.drop_watches()
            await eventually(lambda: outage.hits == 3)
            await eventually(lambda: _lists(proxy, cut) >= 1)  # a failed watch is followed by a list
            cut = await settled()
            gone = proxy.gone_on_rewatch(times=1)
            proxy.drop_watches()
            await eventually(lambda: gone.hits == 1 and _lists(proxy, cut) >= 1)  # 410 Gone: a list
            assert reflector.relists >= 2
        finally:
            task.cancel()


async def test_a_server_that_ends_every_watch_at_once_does_not_spin_the_loop(server: FakeApiServer) -> None:
    """A watch that ends at once without an event is a failure (client-go's "very short watch"), backed off."""
    async with FaultProxy(server.url) as proxy, LiveKube.for_url(proxy.url, token="t") as live:
        seen = Recorder()
        reflector = Reflector(live, NODE, on_upsert=seen.upsert, on_delete=seen.delete,
                              backoff=Backoff(initial=0.2, maximum=0.4), progress_deadline=None)
        task = asyncio.create_task(reflector.run())
        try:
            await asyncio.wait_for(reflector.synced.wait(), 10)
            cut = time.monotonic()
            proxy.answer(200, Match(watch=True))  # an empty 200: the stream ends at once
            proxy.drop_watches()
            await asyncio.sleep(2.0)
            watches = proxy.counts(cut)[("watch", "nodes")]
            assert 2 <= watches <= 20, f"{watches} watches in 2 s"
        finally:
            task.cancel()
