"""Pod deletion with ``gracePeriodSeconds``: the in-memory cluster, and the live client over HTTP."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp
import pytest
from support.fake_apiserver import FakeApiServer

from reconciler.kube.api import NODECLAIM, POD, WatchEvent
from reconciler.kube.live import LiveKube
from reconciler.kube.memory import MemoryKube

START = datetime(2026, 3, 1, 12, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def pod(name: str, node_name: str | None = "node-1", **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "apps", **metadata},
        "spec": {
            "nodeName": node_name,
            "terminationGracePeriodSeconds": 600,
            "containers": [{"name": "c", "image": "nginx"}],
        },
    }


def stamp(seconds_after_start: int) -> str:
    return (START + timedelta(seconds=seconds_after_start)).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def kube(clock: Clock) -> MemoryKube:
    return MemoryKube(clock=clock)


# --- the in-memory cluster ------------------------------------------------------------------


async def test_a_graceful_delete_marks_the_pod_until_its_grace_period_ends(kube: MemoryKube, clock: Clock) -> None:
    await kube.create(pod("web"))
    _, version = await kube.list(POD)
    await kube.delete(POD, "web", "apps", grace_period_seconds=120)

    terminating = await kube.get(POD, "web", "apps")
    assert terminating["metadata"]["deletionTimestamp"] == stamp(120)
    assert terminating["metadata"]["deletionGracePeriodSeconds"] == 120
    clock.advance(119)
    assert [p["metadata"]["name"] for p in (await kube.list(POD, "apps"))[0]] == ["web"]  # still shutting down
    clock.advance(1)
    assert (await kube.list(POD, "apps"))[0] == []  # the kubelet's final delete at the deadline

    events: list[WatchEvent] = []
    async for event in kube.watch(POD, version):
        events.append(event)
        if event.type == "DELETED":
            break
    assert [e.type for e in events] == ["MODIFIED", "DELETED"]


async def test_grace_zero_and_unbound_or_finished_pods_go_at_once(kube: MemoryKube) -> None:
    await kube.create(pod("now"))
    await kube.create(pod("unbound", node_name=None))
    await kube.create(pod("done"))
    await kube.patch(POD, "done", {"status": {"phase": "Succeeded"}}, "apps", subresource="status")

    await kube.delete(POD, "now", "apps", grace_period_seconds=0)
    await kube.delete(POD, "unbound", "apps", grace_period_seconds=300)  # nothing runs: nothing to wait for
    await kube.delete(POD, "done", "apps", grace_period_seconds=300)
    assert (await kube.list(POD, "apps"))[0] == []


async def test_a_pending_grace_period_can_only_be_shortened_counting_from_the_first_request(
    kube: MemoryKube, clock: Clock
) -> None:
    await kube.create(pod("web"))
    await kube.delete(POD, "web", "apps", grace_period_seconds=600)
    clock.advance(100)
    await kube.delete(POD, "web", "apps", grace_period_seconds=900)  # longer: ignored
    assert (await kube.get(POD, "web", "apps"))["metadata"]["deletionGracePeriodSeconds"] == 600
    await kube.delete(POD, "web", "apps", grace_period_seconds=150)
    shortened = (await kube.get(POD, "web", "apps"))["metadata"]
    assert (shortened["deletionTimestamp"], shortened["deletionGracePeriodSeconds"]) == (stamp(150), 150)
    clock.advance(50)
    with pytest.raises(Exception, match="not found"):
        await kube.get(POD, "web", "apps")


async def test_a_finalizer_holds_a_pod_past_its_grace_period_and_releasing_it_early_does_not_skip_it(
    kube: MemoryKube, clock: Clock
) -> None:
    await kube.create(pod("held", finalizers=["example.com/keep"]))
    await kube.delete(POD, "held", "apps", grace_period_seconds=60)
    await kube.patch(POD, "held", {"metadata": {"finalizers": None}}, "apps")
    assert (await kube.get(POD, "held", "apps"))["metadata"]["deletionGracePeriodSeconds"] == 60  # still running

    await kube.create(pod("kept", finalizers=["example.com/keep"]))
    await kube.delete(POD, "kept", "apps", grace_period_seconds=30)
    clock.advance(60)
    kept = await kube.get(POD, "kept", "apps")  # "held" is gone now, "kept" waits on its finalizer
    assert kept["metadata"]["deletionGracePeriodSeconds"] == 0
    assert [p["metadata"]["name"] for p in (await kube.list(POD, "apps"))[0]] == ["kept"]
    await kube.patch(POD, "kept", {"metadata": {"finalizers": None}}, "apps")
    assert (await kube.list(POD, "apps"))[0] == []


async def test_other_kinds_ignore_the_grace_period_and_bad_values_are_refused(kube: MemoryKube) -> None:
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "c", "finalizers": ["karpenter.sh/termination"]},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}},
    }
    await kube.create(claim)
    await kube.delete(NODECLAIM, "c", grace_period_seconds=300)
    deleting = (await kube.get(NODECLAIM, "c"))["metadata"]
    assert (deleting["deletionTimestamp"], deleting["deletionGracePeriodSeconds"]) == (stamp(0), 0)
    await kube.create(pod("web"))
    with pytest.raises(ValueError, match="gracePeriodSeconds: -5"):
        await kube.delete(POD, "web", "apps", grace_period_seconds=-5)


# --- over HTTP: the live client and the fake API server --------------------------------------


def deletes(server: FakeApiServer) -> list[dict[str, Any] | None]:
    return [json.loads(r.body) if r.body else None for r in server.requests if r.method == "DELETE"]


async def test_the_live_client_sends_delete_options_with_the_grace_period(live: LiveKube) -> None:
    server_clock = Clock()
    async with FakeApiServer(kube=MemoryKube(clock=server_clock)) as server:
        async with LiveKube.for_url(server.url, token="t") as client:
            await client.create(pod("web"))
            await client.delete(POD, "web", "apps", grace_period_seconds=120)
            terminating = await client.get(POD, "web", "apps")
            assert terminating["metadata"]["deletionGracePeriodSeconds"] == 120
            assert terminating["metadata"]["deletionTimestamp"] == stamp(120)

            api_uid = (await client.create(pod("api")))["metadata"]["uid"]
            await client.delete(POD, "api", "apps", uid=api_uid, grace_period_seconds=0)
            await client.create(pod("plain"))
            await client.delete(POD, "plain", "apps")  # no options: the pod's own terminationGracePeriodSeconds
            assert [p["metadata"]["name"] for p in (await client.list(POD, "apps"))[0]] == ["plain", "web"]
            plain = await client.get(POD, "plain", "apps")
            assert plain["metadata"]["deletionGracePeriodSeconds"] == 600
            assert plain["metadata"]["deletionTimestamp"] == stamp(600)
        assert deletes(server) == [
            {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 120},
            {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": api_uid}, "gracePeriodSeconds": 0},
            None,  # no options: the server's defaults
        ]
        assert not server.violations
    with pytest.raises(ValueError, match="gracePeriodSeconds"):
        await live.delete(POD, "web", "apps", grace_period_seconds=-1)


async def test_the_fake_server_reads_the_grace_period_from_the_query_without_a_body(
    live: LiveKube, server: FakeApiServer
) -> None:
    await live.create(pod("web"))
    await live.create(pod("api"))
    url = f"{server.url}/api/v1/namespaces/apps/pods"
    async with aiohttp.ClientSession() as session:
        async with session.delete(f"{url}/web", params={"gracePeriodSeconds": "30"}) as answer:
            assert answer.status == 200
        async with session.delete(f"{url}/api", params={"gracePeriodSeconds": "soon"}) as answer:
            assert answer.status == 400 and "gracePeriodSeconds" in (await answer.json())["message"]
        async with session.delete(f"{url}/api", json={"kind": "Eviction"}) as answer:
            assert answer.status == 400
    assert (await live.get(POD, "web", "apps"))["metadata"]["deletionGracePeriodSeconds"] == 30
    assert "deletionTimestamp" not in (await live.get(POD, "api", "apps"))["metadata"]
