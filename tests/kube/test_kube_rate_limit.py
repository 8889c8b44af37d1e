"""Gentle on the API server (issue 16, item 6): client-side QPS/burst and Retry-After, as client-go does.

The live client talks HTTP to the fake API server. Time is simulated: the token bucket's clock only moves
when the client sleeps, and every sleep is recorded, so the tests see exactly how long the client waited.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from support.fake_apiserver import FakeApiServer

from reconciler.kube.api import LEASE, NODE, ApiError, TooManyRequestsError
from reconciler.kube.live import DEFAULT_BURST, DEFAULT_QPS, LiveKube
from reconciler.kube.ratelimit import MAX_RETRY_AFTER_ATTEMPTS, MAX_RETRY_AFTER_SECONDS, TokenBucket
from reconciler.settings import Settings, SettingsError


class Time:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 6))
        self.now += seconds


@pytest.fixture
def time() -> Time:
    return Time()


@pytest.fixture
async def limited(server: FakeApiServer, time: Time) -> AsyncIterator[LiveKube]:
    """A client allowed 2 calls at once, then 10 per second."""
    bucket = TokenBucket(10, 2, clock=time.clock, sleep=time.sleep)
    async with LiveKube.for_url(server.url, limiter=bucket, sleep=time.sleep) as client:
        yield client


def node(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


async def test_a_burst_goes_at_once_then_calls_are_paced_at_the_qps(limited: LiveKube, server: FakeApiServer,
                                                                    time: Time) -> None:
    await server.kube.create(node("n1"))
    for _ in range(5):
        await limited.get(NODE, "n1")
    assert time.sleeps == [0.1, 0.1, 0.1], "two within the burst, then one every 1/10 s"
    time.now += 10  # idle: the bucket refills up to the burst, not beyond
    for _ in range(3):
        await limited.get(NODE, "n1")
    assert time.sleeps == [0.1, 0.1, 0.1, 0.1]


async def test_lease_calls_skip_the_bucket_so_a_busy_controller_never_delays_a_renewal(
    limited: LiveKube, server: FakeApiServer, time: Time
) -> None:
    await server.kube.create(node("n1"))
    for _ in range(2):
        await limited.get(NODE, "n1")  # the bucket is empty now
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "adze", "namespace": "kube-system"}, "spec": {"holderIdentity": "a"}}
    created = await limited.create(lease)
    await limited.replace(created)
    await limited.get(LEASE, "adze", "kube-system")
    assert time.sleeps == []


async def test_a_throttled_call_is_retried_after_the_servers_retry_after(limited: LiveKube, server: FakeApiServer,
                                                                         time: Time) -> None:
    await server.kube.create(node("n1"))
    server.script("PATCH", "/nodes/n1", 429, reason="TooManyRequests", retry_after=3, times=2)
    patched = await limited.patch(NODE, "n1", {"metadata": {"labels": {"a": "b"}}})
    assert patched["metadata"]["labels"] == {"a": "b"}
    assert time.sleeps == [3, 3] and limited.retried_after == 2
    server.script("GET", "/nodes/n1", 503, reason="ServiceUnavailable", retry_after=1)
    assert (await limited.get(NODE, "n1"))["metadata"]["name"] == "n1"
    assert time.sleeps[-1] == 1 and limited.retried_after == 3


async def test_long_retry_afters_are_capped_and_retries_are_bounded(limited: LiveKube, server: FakeApiServer,
                                                                    time: Time) -> None:
    await server.kube.create(node("n1"))
    server.script("GET", "/nodes/n1", 429, reason="TooManyRequests", retry_after=600, times=100)
    with pytest.raises(TooManyRequestsError):
        await limited.get(NODE, "n1")
    retries = [s for s in time.sleeps if s >= 1]
    assert retries == [MAX_RETRY_AFTER_SECONDS] * MAX_RETRY_AFTER_ATTEMPTS


async def test_errors_without_retry_after_and_eviction_429s_are_not_retried(limited: LiveKube,
                                                                           server: FakeApiServer,
                                                                           time: Time) -> None:
    await server.kube.create(node("n1"))
    server.script("GET", "/nodes/n1", 503, reason="ServiceUnavailable")
    with pytest.raises(ApiError) as failed:
        await limited.get(NODE, "n1")
    assert failed.value.status == 503
    # A PodDisruptionBudget's "not now" goes straight back to the terminator, which backs off by itself.
    server.script("POST", "/pods/web-0/eviction", 429, reason="TooManyRequests", retry_after=10)
    with pytest.raises(TooManyRequestsError):
        await limited.evict("web-0", "default")
    assert [s for s in time.sleeps if s >= 1] == [] and limited.retried_after == 0


def test_karpenters_environment_variables_size_the_bucket() -> None:
    assert (Settings().kube_client_qps, Settings().kube_client_burst) == (DEFAULT_QPS, DEFAULT_BURST) == (200, 300)
    settings = Settings.from_env({"KUBE_CLIENT_QPS": "50", "KUBE_CLIENT_BURST": "75"})
    assert (settings.kube_client_qps, settings.kube_client_burst) == (50, 75)
    for variable, value in (("KUBE_CLIENT_QPS", "0"), ("KUBE_CLIENT_QPS", "fast"), ("KUBE_CLIENT_BURST", "2.5")):
        with pytest.raises(SettingsError, match=variable):
            Settings.from_env({variable: value})
