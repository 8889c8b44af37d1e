"""Lease leader election: acquisition, standby, expiry takeover, release on shutdown, loss."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from support.fake_apiserver import FakeApiServer

from reconciler.kube.api import LEASE, ApiError
from reconciler.kube.leader import LeaderElectionConfig, LeaderElector, LeadershipLost
from reconciler.kube.live import LiveKube
from reconciler.kube.memory import MemoryKube


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def elector(kube: object, identity: str, clock: Clock | None = None, **timing: float) -> LeaderElector:
    config = LeaderElectionConfig(namespace="karpenter", identity=identity, **timing)
    return LeaderElector(kube, config, clock=clock or Clock())  # type: ignore[arg-type]


async def test_standby_waits_for_expiry_measured_on_its_own_clock() -> None:
    kube, clock = MemoryKube(), Clock()
    a, b = elector(kube, "a", clock), elector(kube, "b", clock)
    assert await a.try_acquire_or_renew()
    lease = await kube.get(LEASE, "karpenter-leader-election", "karpenter")
    assert lease["spec"]["holderIdentity"] == "a"
    assert lease["spec"]["leaseDurationSeconds"] == 15
    assert lease["spec"]["renewTime"].endswith("Z") and "." in lease["spec"]["renewTime"]
    assert not await b.try_acquire_or_renew()
    for _ in range(10):  # a keeps renewing every 2 s: b never gets it
        clock.advance(2)
        assert await a.try_acquire_or_renew()
        assert not await b.try_acquire_or_renew()
    clock.advance(14)  # a stopped renewing; b last saw a change 14 s ago
    assert not await b.try_acquire_or_renew()
    clock.advance(1)
    assert await b.try_acquire_or_renew()
    taken = await kube.get(LEASE, "karpenter-leader-election", "karpenter")
    assert taken["spec"]["holderIdentity"] == "b"
    assert taken["spec"]["leaseTransitions"] == 1
    assert not await a.try_acquire_or_renew()
    assert a.observed_holder == "b" and not a.is_leader


async def test_racing_candidates_cannot_both_win() -> None:
    kube, clock = MemoryKube(), Clock()
    a, b, c = (elector(kube, name, clock) for name in "abc")
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew() and not await c.try_acquire_or_renew()
    clock.advance(16)
    results = await asyncio.gather(b.try_acquire_or_renew(), c.try_acquire_or_renew())
    assert sorted(results) == [False, True]


async def test_release_lets_a_standby_take_over_at_once() -> None:
    kube, clock = MemoryKube(), Clock()
    a, b = elector(kube, "a", clock), elector(kube, "b", clock)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    await a.release()
    assert "holderIdentity" not in (await kube.get(LEASE, "karpenter-leader-election", "karpenter"))["spec"]
    assert await b.try_acquire_or_renew()


async def test_renewal_failures_past_the_deadline_lose_leadership() -> None:
    kube, clock = MemoryKube(), Clock()

    async def sleep(seconds: float) -> None:
        clock.advance(seconds)
        await asyncio.sleep(0)

    config = LeaderElectionConfig(namespace="karpenter", identity="a")
    leader = LeaderElector(kube, config, clock=clock, sleep=sleep)
    cancelled = asyncio.Event()

    async def work() -> None:
        try:
            kube.inject_fault("replace", ApiError(500, "InternalError", "etcd down"), kind=LEASE, times=100)
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(LeadershipLost, match="within 10s"):
        await asyncio.wait_for(leader.run(work), 5)
    assert cancelled.is_set(), "the leader's work is cancelled when leadership is lost"
    assert not leader.is_leader


async def test_bad_timings_are_refused() -> None:
    with pytest.raises(ValueError, match="lease_duration > renew_deadline > retry_period"):
        LeaderElectionConfig(namespace="x", lease_duration=5, renew_deadline=10)
    config = LeaderElectionConfig.from_env({"SYSTEM_NAMESPACE": "adze", "POD_NAME": "adze-0"})
    assert (config.namespace, config.name) == ("adze", "karpenter-leader-election")
    assert config.identity.startswith("adze-0_")


async def test_two_replicas_over_http_handover_and_takeover(server: FakeApiServer) -> None:
    clients = [LiveKube.for_url(server.url) for _ in range(4)]
    leading: list[str] = []

    async def work(name: str, started: asyncio.Event) -> None:
        leading.append(name)
        started.set()
        await asyncio.Event().wait()

    def candidate(index: int, identity: str, **timing: float) -> LeaderElector:
        config = LeaderElectionConfig(namespace="karpenter", identity=identity, retry_period=0.05, **timing)
        return LeaderElector(clients[index], config)

    try:
        # Handover: a 30 s lease, so b can only get it this fast because a releases it on shutdown.
        a = candidate(0, "a", lease_duration=30, renew_deadline=20)
        b = candidate(1, "b", lease_duration=30, renew_deadline=20)
        a_started, b_started = asyncio.Event(), asyncio.Event()
        a_task = asyncio.create_task(a.run(lambda: work("a", a_started)))
        await asyncio.wait_for(a_started.wait(), 5)
        b_task = asyncio.create_task(b.run(lambda: work("b", b_started)))
        for _ in range(10):  # b keeps polling while a renews: it stays standby
            await asyncio.sleep(0.05)
        assert leading == ["a"] and not b.is_leader
        a_task.cancel()  # graceful shutdown
        await asyncio.gather(a_task, return_exceptions=True)
        await asyncio.wait_for(b_started.wait(), 5)
        assert leading == ["a", "b"]
        lease = await clients[1].get(LEASE, "karpenter-leader-election", "karpenter")
        assert (lease["spec"]["holderIdentity"], lease["spec"]["leaseTransitions"]) == ("b", 1)
        b_task.cancel()
        await asyncio.gather(b_task, return_exceptions=True)

        # Takeover after expiry: c holds a 1 s lease and "crashes" (its renewals just stop).
        c = LeaderElector(
            clients[2],
            LeaderElectionConfig(
                namespace="karpenter",
                name="crash",
                identity="c",
                lease_duration=1,
                renew_deadline=0.5,
                retry_period=0.05,
            ),
        )
        assert await c.try_acquire_or_renew()
        d = LeaderElector(
            clients[3],
            LeaderElectionConfig(
                namespace="karpenter",
                name="crash",
                identity="d",
                lease_duration=1,
                renew_deadline=0.5,
                retry_period=0.05,
            ),
        )
        d_started = asyncio.Event()
        loop = asyncio.get_running_loop()
        waiting_since = loop.time()
        d_task = asyncio.create_task(d.run(lambda: work("d", d_started)))
        await asyncio.wait_for(d_started.wait(), 5)
        assert loop.time() - waiting_since >= 1, "a crashed leader's lease is honoured until it expires"
        lease = await clients[3].get(LEASE, "crash", "karpenter")
        assert (lease["spec"]["holderIdentity"], lease["spec"]["leaseTransitions"]) == ("d", 1)
        d_task.cancel()
        await asyncio.gather(d_task, return_exceptions=True)
    finally:
        for client in clients:
            await client.close()
