"""The leadership gate is asked again when each HTTP attempt of a write is sent, not only when it is asked for.

Issue 24: the gate was checked before the client-side rate limiter and before the Retry-After retries (up to
10 x 10 s) in ``LiveKube._send``, and not again, so a write checked in time could be sent long after the
renew deadline, when a standby may already lead.
"""

from __future__ import annotations

import pytest
from support.fake_apiserver import FakeApiServer

from reconciler.kube.api import NODE
from reconciler.kube.leadership import GatedKube, LeadershipGate, NotLeading
from reconciler.kube.live import LiveKube
from reconciler.kube.ratelimit import TokenBucket


class Monotonic:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def node(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def posts(server: FakeApiServer) -> int:
    return sum(1 for r in server.requests if r.method == "POST" and r.path == "/api/v1/nodes")


async def test_a_write_paused_by_retry_after_past_the_deadline_is_not_sent_again(server: FakeApiServer) -> None:
    clock = Monotonic()
    gate = LeadershipGate(clock)
    gate.renewed(clock.now, renew_deadline=10)

    async def pause(seconds: float) -> None:  # the Retry-After pause outlasts the renew deadline
        clock.now += seconds

    server.script("POST", "/api/v1/nodes", 429, retry_after=8, times=2)
    async with LiveKube.for_url(server.url, token="t", sleep=pause) as live:
        gated = GatedKube(live, gate)
        with pytest.raises(NotLeading):
            await gated.create(node("n1"))
        assert posts(server) == 2, "sent at 100 s and 108 s (open until 110 s), never at 116 s"
        await live.create(node("n2"))  # the same client outside a gated write is not refused


async def test_a_write_queued_in_the_rate_limiter_past_the_deadline_is_not_sent(server: FakeApiServer) -> None:
    clock = Monotonic()
    gate = LeadershipGate(clock)
    gate.renewed(clock.now, renew_deadline=10)

    async def wait(seconds: float) -> None:  # waiting for a token takes the client past the deadline
        clock.now += 30

    bucket = TokenBucket(qps=1, burst=1, clock=clock, sleep=wait)
    async with LiveKube.for_url(server.url, token="t", limiter=bucket) as live:
        gated = GatedKube(live, gate)
        await gated.create(node("n1"))  # the burst token
        with pytest.raises(NotLeading):
            await gated.create(node("n2"))  # checked at 100 s (open), its token only at 130 s
        assert posts(server) == 1
        assert [n["metadata"]["name"] for n in server.kube.objects(NODE)] == ["n1"]
