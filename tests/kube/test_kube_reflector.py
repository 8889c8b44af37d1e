"""Reflectors: list+watch with bookmarks, resume, and 410 re-list that synthesises missed deletes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from support.fake_apiserver import FakeApiServer
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
