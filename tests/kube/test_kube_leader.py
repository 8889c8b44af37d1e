"""Lease leader election: acquisition, standby, expiry takeover, release on shutdown, loss."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from support.fake_apiserver import FakeApiServer
from support.timescale import scaled

from reconciler.kube.api import LEASE, NODE, ApiError
from reconciler.kube.leader import LeaderElectionConfig, LeaderElector, LeadershipLost
from reconciler.kube.live import LiveKube
from reconciler.kube.memory import MemoryKube


class Clock:
    """A wall clock (``__call__``) and a monotonic one that tests move together (``advance``) or apart
    (``step_wall``: NTP stepping the wall clock, which leaves the monotonic clock alone)."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)
        self.elapsed = 0.0

    def __call__(self) -> datetime:
        return self.now

    def monotonic(self) -> float:
        return self.elapsed

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
        self.elapsed += seconds

    def step_wall(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def elector(kube: object, identity: str, clock: Clock | None = None, **timing: float) -> LeaderElector:
    config = LeaderElectionConfig(namespace="karpenter", identity=identity, **timing)
    clock = clock or Clock()
    return LeaderElector(kube, config, clock=clock, monotonic=clock.monotonic)  # type: ignore[arg-type]


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
    leader = LeaderElector(kube, config, clock=clock, monotonic=clock.monotonic, sleep=sleep)
    cancelled = asyncio.Event()

    async def work() -> None:
        try:
            kube.inject_fault("replace", ApiError(500, "InternalError", "etcd down"), kind=LEASE, times=100)
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(LeadershipLost, match="within 10s"):
        await asyncio.wait_for(leader.run(work), scaled(5))
    assert cancelled.is_set(), "the leader's work is cancelled when leadership is lost"
    assert not leader.is_leader


async def test_a_hanging_renewal_loses_leadership_at_the_renew_deadline() -> None:
    """API calls that hang (not fail) must not stretch leadership past the renew deadline: each renewal is
    bounded by the time left, as client-go's renew loop is, so a standby taking over after the lease
    duration never overlaps with a leader whose controllers still run (issue 16: two leaders for ~14 s)."""
    kube = MemoryKube()
    config = LeaderElectionConfig(namespace="karpenter", identity="a", lease_duration=1.5, renew_deadline=1.0,
                                  retry_period=0.2)
    leader = LeaderElector(kube, config)
    hanging = asyncio.Event()
    stopped_at: list[float] = []
    loop = asyncio.get_running_loop()

    original_get = kube.get

    async def get(*args: object, **kwargs: object) -> object:
        if hanging.is_set():
            await asyncio.sleep(20)  # a stuck connection: no answer until the client's own timeout
            raise ApiError(504, "Timeout", "the client gave up")
        return await original_get(*args, **kwargs)  # type: ignore[arg-type]

    kube.get = get  # type: ignore[method-assign]

    async def work() -> None:
        try:
            await asyncio.sleep(0.3)
            hanging.set()
            await asyncio.Event().wait()
        finally:
            stopped_at.append(loop.time())

    started = loop.time()
    running = asyncio.create_task(leader.run(work))
    # Not wait_for: a leader that never gives up would also hang in wait_for's cancellation.
    done, _ = await asyncio.wait({running}, timeout=scaled(10))
    if not done:
        running.cancel()
        pytest.fail("the leader kept leading with a hanging API server far past the 1 s renew deadline")
    with pytest.raises(LeadershipLost, match="within 1s"):
        running.result()
    # Last renewal at most ~0.3 s in; the work must stop by then + the 1 s deadline (+ one retry period),
    # well before a standby could take the 1.5 s lease.
    assert stopped_at and stopped_at[0] - started < 0.3 + 1.0 + 0.2 + 0.3


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
        await asyncio.wait_for(a_started.wait(), scaled(5))
        b_task = asyncio.create_task(b.run(lambda: work("b", b_started)))
        for _ in range(10):  # b keeps polling while a renews: it stays standby
            await asyncio.sleep(0.05)
        assert leading == ["a"] and not b.is_leader
        a_task.cancel()  # graceful shutdown
        await asyncio.gather(a_task, return_exceptions=True)
        await asyncio.wait_for(b_started.wait(), scaled(5))
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
        await asyncio.wait_for(d_started.wait(), scaled(5))
        assert loop.time() - waiting_since >= 1, "a crashed leader's lease is honoured until it expires"
        lease = await clients[3].get(LEASE, "crash", "karpenter")
        assert (lease["spec"]["holderIdentity"], lease["spec"]["leaseTransitions"]) == ("d", 1)
        d_task.cancel()
        await asyncio.gather(d_task, return_exceptions=True)
    finally:
        for client in clients:
            await client.close()


async def test_the_gate_is_open_from_each_renewal_until_its_renew_deadline_by_the_clock() -> None:
    """Issue 16: the gate reads the clock itself, so a stalled event loop whose renewer has not yet noticed the
    deadline cannot let a write through after it; losing or releasing the lease closes it at once."""
    from reconciler.kube.leadership import GatedKube, NotLeading

    kube, clock = MemoryKube(), Clock()
    a = elector(kube, "a", clock)
    gated = GatedKube(kube, a.gate)
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
    assert not a.gate.is_open()
    with pytest.raises(NotLeading):
        await gated.create(node)
    assert await a.try_acquire_or_renew()
    await gated.create(node)
    clock.advance(9.9)
    await gated.patch(NODE, "n1", {"metadata": {"labels": {"a": "b"}}})
    clock.advance(0.1)  # the renew deadline (10 s) since the last successful renewal: closed, nothing renewed it
    for write in (gated.patch(NODE, "n1", {"metadata": {"labels": {"c": "d"}}}), gated.delete(NODE, "n1"),
                  gated.evict("p", "default")):
        with pytest.raises(NotLeading):
            await write
    assert (await gated.get(NODE, "n1"))["metadata"]["labels"] == {"a": "b"}, "reads still work"
    assert await a.try_acquire_or_renew()  # a late renewal still won (nobody took over): open again
    await gated.patch(NODE, "n1", {"metadata": {"labels": {"c": "d"}}})
    await a.release()
    assert not a.gate.is_open()


async def test_deadlines_run_on_the_monotonic_clock_whatever_the_wall_clock_does() -> None:
    """Issue 24: the wall clock stepped back 30 s kept the old leader's gate open 30 s longer (and stepped
    forward it would close a healthy leader's). Expiry, the renew deadline and the gate are monotonic."""
    from reconciler.kube.leadership import GatedKube, NotLeading

    kube, clock_a, clock_b = MemoryKube(), Clock(), Clock()
    a, b = elector(kube, "a", clock_a), elector(kube, "b", clock_b)
    gated = GatedKube(kube, a.gate)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    clock_a.step_wall(-30)  # a's wall clock steps back
    clock_b.step_wall(+3600)  # b's jumps an hour ahead: a's lease must not look expired to it
    assert not await b.try_acquire_or_renew()
    clock_a.advance(9.9)
    await gated.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    clock_a.advance(0.1)  # 10 s of monotonic time since the renewal started: closed, whatever the wall says
    with pytest.raises(NotLeading):
        await gated.delete(NODE, "n1")
    clock_b.advance(14.9)
    assert not await b.try_acquire_or_renew(), "15 s lease: not expired after 14.9 s on b's monotonic clock"
    clock_b.advance(0.1)
    assert await b.try_acquire_or_renew()


async def test_the_renewal_counts_from_when_its_request_started() -> None:
    """client-go counts the renew deadline from the start of the successful renewal, not its answer: a renewal
    whose answer took 4 s leaves the gate open 10 - 4 = 6 s more, not 10."""
    kube, clock = MemoryKube(), Clock()
    a = elector(kube, "a", clock)
    original = kube.replace

    async def slow_replace(*args: object, **kwargs: object) -> object:
        clock.advance(4)
        return await original(*args, **kwargs)  # type: ignore[arg-type]

    assert await a.try_acquire_or_renew()
    kube.replace = slow_replace  # type: ignore[method-assign]
    assert await a.try_acquire_or_renew()
    assert a.gate.open_until == pytest.approx(10.0)
    clock.advance(5.9)
    assert a.gate.is_open()
    clock.advance(0.1)
    assert not a.gate.is_open()
