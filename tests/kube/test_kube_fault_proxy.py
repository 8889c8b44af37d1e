"""The fault proxy itself (tests/support/fault_proxy.py): each fault does what it says, through ``LiveKube``."""

from __future__ import annotations

import asyncio
import time

import pytest
from support.fake_apiserver import FakeApiServer
from support.fault_proxy import LEASES, FaultProxy, Match, verb_and_resource

from reconciler.kube.api import NODE, POD, ApiError, GoneError, NotFoundError
from reconciler.kube.live import LiveKube


def node(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


async def test_requests_pass_through_and_are_counted_by_verb_and_resource(server: FakeApiServer) -> None:
    async with FaultProxy(server.url) as proxy, LiveKube.for_url(proxy.url, token="t") as kube:
        await kube.create(node("a"))
        assert (await kube.get(NODE, "a"))["metadata"]["name"] == "a"
        items, _ = await kube.list(NODE)
        await kube.patch(NODE, "a", {"metadata": {"labels": {"x": "y"}}})
        with pytest.raises(NotFoundError):
            await kube.get(NODE, "missing")
    counts = proxy.counts()
    assert [i["metadata"]["name"] for i in items] == ["a"]
    assert counts[("create", "nodes")] == 1 and counts[("get", "nodes")] == 2
    assert counts[("list", "nodes")] == 1 and counts[("patch", "nodes")] == 1
    assert server.requests[-1].authorization == "Bearer t", "the token passes through"


def test_verb_and_resource_names_subresources() -> None:
    assert verb_and_resource("POST", "/api/v1/namespaces/d/pods/p/eviction", {}) == ("create", "pods/eviction")
    assert verb_and_resource("PATCH", "/apis/karpenter.sh/v1/nodepools/x/status", {}) == ("patch", "nodepools/status")
    assert verb_and_resource("GET", "/api/v1/pods", {"watch": "true"}) == ("watch", "pods")
    assert verb_and_resource("GET", "/apis", {}) == ("", "/apis")


async def test_an_answered_error_carries_retry_after_and_is_not_forwarded(server: FakeApiServer) -> None:
    async with FaultProxy(server.url) as proxy, LiveKube.for_url(proxy.url, token="t") as kube:
        proxy.answer(429, Match(methods={"POST"}), retry_after=0, times=2)
        await kube.create(node("a"))  # two 429s with Retry-After 0, then through
        rule = proxy.answer(500, Match(path="/nodes/a"))
        with pytest.raises(ApiError) as raised:
            await kube.get(NODE, "a")
        assert raised.value.status == 500
        proxy.remove(rule)
        await kube.get(NODE, "a")
    outcomes = [r.outcome for r in proxy.requests]
    assert outcomes == ["answer 429", "answer 429", "forwarded", "answer 500", "forwarded"]
    assert kube.retried_after == 2
    assert len([r for r in server.requests if r.method == "POST"]) == 1


async def test_reset_breaks_the_connection(server: FakeApiServer) -> None:
    async with FaultProxy(server.url) as proxy, LiveKube.for_url(proxy.url, token="t") as kube:
        rule = proxy.reset(Match(methods={"GET"}))  # aiohttp resends an idempotent request once on a reset
        with pytest.raises(ApiError) as raised:
            await kube.get(NODE, "a")
        assert raised.value.status == 503 and raised.value.reason == "ServiceUnavailable"
        assert [r.outcome for r in proxy.requests] == ["reset", "reset"]
        proxy.remove(rule)
        with pytest.raises(NotFoundError):
            await kube.get(NODE, "a")  # the next one goes through


async def test_a_stalled_request_goes_on_when_the_rule_is_removed(server: FakeApiServer) -> None:
    async with FaultProxy(server.url) as proxy, LiveKube.for_url(proxy.url, token="t") as kube:
        rule = proxy.stall(LEASES)
        await kube.create(node("a"))  # not a Lease: not held
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": "l", "namespace": "kube-system"}, "spec": {}}
        held = asyncio.create_task(kube.create(lease))
        await asyncio.sleep(0.3)
        assert not held.done() and server.kube.objects(lease_kind()) == []
        proxy.remove(rule)
        await asyncio.wait_for(held, 10)
        assert len(server.kube.objects(lease_kind())) == 1


def lease_kind():  # type: ignore[no-untyped-def]
    from reconciler.kube.api import LEASE

    return LEASE


async def _next(stream, timeout: float = 5.0):  # type: ignore[no-untyped-def]
    return await asyncio.wait_for(stream.__anext__(), timeout)


async def test_a_silenced_watch_stays_open_and_delivers_nothing_until_released(server: FakeApiServer) -> None:
    async with FaultProxy(server.url) as proxy, LiveKube.for_url(proxy.url, token="t") as kube:
        _, version = await kube.list(POD, "default")
        stream = kube.watch(POD, version, "default", bookmarks=False)
        pending = asyncio.ensure_future(_next(stream, 10))
        await asyncio.sleep(0.3)
        rule = proxy.silence_watches()
        await server.kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}})
        await asyncio.sleep(0.5)
        assert not pending.done() and proxy.open_watches() == 1
        proxy.remove(rule)
        event = await pending
        assert event.type == "ADDED" and event.object["metadata"]["name"] == "p"
        await stream.aclose()


async def test_dropped_watches_end_and_a_rewatch_is_answered_gone(server: FakeApiServer) -> None:
    async with FaultProxy(server.url) as proxy, LiveKube.for_url(proxy.url, token="t") as kube:
        await kube.create(node("a"))
        _, version = await kube.list(NODE)
        stream = kube.watch(NODE, version, bookmarks=False)
        pending = asyncio.ensure_future(_next(stream))
        while proxy.open_watches() == 0:
            await asyncio.sleep(0.02)
        assert proxy.drop_watches() == 1
        with pytest.raises(StopAsyncIteration):
            await pending  # a dropped stream ends the watch (the caller decides what next)
        proxy.gone_on_rewatch(times=1)
        with pytest.raises(GoneError):
            async for _ in kube.watch(NODE, version, bookmarks=False):
                pass
        assert [r.outcome for r in proxy.requests if r.query.get("watch")][-1] == "gone"


async def test_tcp_mode_pipes_bytes_and_can_stall_and_reset_everything(server: FakeApiServer) -> None:
    async with FaultProxy(server.url, mode="tcp") as proxy, LiveKube.for_url(proxy.url, token="t") as kube, \
            LiveKube.for_url(proxy.url, token="t", request_timeout=1.0) as impatient:
        await kube.create(node("a"))
        rule = proxy.stall()
        started = time.monotonic()
        with pytest.raises(ApiError):
            await impatient.get(NODE, "a")  # held bytes: the client's timeout ends it
        assert time.monotonic() - started >= 0.9
        proxy.remove(rule)
        proxy.reset()
        with pytest.raises(ApiError):
            await kube.get(NODE, "a")
        proxy.clear()
        assert (await kube.get(NODE, "a"))["metadata"]["name"] == "a"
        with pytest.raises(ValueError, match="needs mode='http'"):
            proxy.answer(500, Match(methods={"GET"}))
