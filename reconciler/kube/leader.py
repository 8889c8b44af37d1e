"""Lease-based leader election over the ``KubeAPI`` port (client-go's algorithm).

Written against the port rather than ``kubernetes.aio.leaderelection`` (whose LeaseLock
fails on first acquisition in 37.0.x) so the same code runs on the in-memory cluster, the
fake server and a real API server. Timings default to controller-runtime's: lease 15 s,
renew deadline 10 s, retry every 2 s.

Expiry is judged from when *this* candidate last saw the lease record change, on its own
monotonic clock, never from the holder's timestamps, so clock skew between replicas cannot cause
two leaders; and every deadline (expiry, the renew deadline, the gate) is measured on
``time.monotonic``, as client-go's (Go's ``time.Now`` carries a monotonic reading), so stepping the
wall clock (NTP, a VM resumed) changes none of them. The wall clock only stamps the Lease record.
Updates carry the read ``resourceVersion``: two candidates racing for an expired lease cannot both
win. On shutdown the leader releases the lease (empty holder) so a standby takes over at once
instead of waiting for expiry.

``gate`` (``reconciler.kube.leadership``) is open from the start of each successful renewal request
until its renew deadline: the leader's writes and cloud calls check it when they are sent, so none is
sent once a standby may be about to take over (see that module for why the lease duration's margin
covers a call already on its way).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from reconciler.kube.api import LEASE, ApiError, ConflictError, KubeAPI, Manifest, NotFoundError
from reconciler.kube.leadership import LeadershipGate
from reconciler.kube.semantics import format_micro_time

log = logging.getLogger(__name__)
Clock = Callable[[], datetime]
Monotonic = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


class LeadershipLost(RuntimeError):
    """The lease could not be renewed within the renew deadline; stop acting as leader."""


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(slots=True, frozen=True)
class LeaderElectionConfig:
    namespace: str
    name: str = "karpenter-leader-election"
    identity: str = field(default_factory=default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise ValueError(
                "leader election: need lease_duration > renew_deadline > retry_period > 0, got "
                f"{self.lease_duration}/{self.renew_deadline}/{self.retry_period}"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> LeaderElectionConfig:
        """Karpenter's variables: LEADER_ELECTION_NAME / LEADER_ELECTION_NAMESPACE, falling back to
        SYSTEM_NAMESPACE (downward API) and then ``kube-system``; identity from POD_NAME/HOSTNAME."""
        namespace = env.get("LEADER_ELECTION_NAMESPACE") or env.get("SYSTEM_NAMESPACE") or "kube-system"
        host = env.get("POD_NAME") or env.get("HOSTNAME") or socket.gethostname()
        return cls(
            namespace=namespace,
            name=env.get("LEADER_ELECTION_NAME") or "karpenter-leader-election",
            identity=f"{host}_{uuid.uuid4()}",
        )


def _utc_now() -> datetime:
    return datetime.now(UTC)


class LeaderElector:
    """Acquire the lease, run the leader's work while renewing it, release it on the way out."""

    def __init__(
        self, kube: KubeAPI, config: LeaderElectionConfig, *, clock: Clock = _utc_now,
        monotonic: Monotonic = time.monotonic, sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.kube = kube
        self.config = config
        self._clock = clock  # stamps the Lease record only
        self._monotonic = monotonic  # every deadline
        self._sleep = sleep
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at: float | None = None  # monotonic: when this candidate saw the record change
        self._last_renewal: float | None = None  # monotonic: start of the last successful renewal request
        self.is_leader = False
        self.observed_holder = ""
        self.gate = LeadershipGate(monotonic)

    async def run(self, lead: Callable[[], Awaitable[None]]) -> None:
        """Block until elected, then run ``lead()`` while renewing.

        Returns when ``lead()`` returns; raises ``LeadershipLost`` (after cancelling ``lead``)
        when renewal fails. The lease is released on return, error and cancellation.
        """
        try:
            await self.acquire()
            work = asyncio.create_task(lead(), name="leader-work")
            renewer = asyncio.create_task(self._keep_renewing(), name="leader-renew")
            try:
                done, _ = await asyncio.wait({work, renewer}, return_when=asyncio.FIRST_COMPLETED)
                if renewer in done:
                    work.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await work
                    renewer.result()  # raises LeadershipLost
                await work
            finally:
                self.gate.close()
                for task in (work, renewer):
                    task.cancel()
                await asyncio.gather(work, renewer, return_exceptions=True)
        finally:
            await self.release()

    async def acquire(self) -> None:
        """Try every retry period until this candidate holds the lease."""
        while not await self.try_acquire_or_renew():
            await self._sleep(self.config.retry_period)
        log.info("acquired leader lease", extra={"lease": self.config.name, "identity": self.config.identity})

    async def _keep_renewing(self) -> None:
        deadline = self.config.renew_deadline
        while True:
            await self._sleep(self.config.retry_period)
            assert self._last_renewal is not None
            # Each attempt is bounded by the time left before the renew deadline (client-go bounds the renew
            # loop the same way): a call that hangs must not keep us leading after a standby may take over.
            # (asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation that arrives as the
            # call completes, and the renewer would then outlive the leader.)
            left = self._last_renewal + deadline - self._monotonic()
            renewed = False
            if left > 0:
                try:
                    async with asyncio.timeout(left):
                        renewed = await self.try_acquire_or_renew()
                except TimeoutError:
                    renewed = False
            if renewed:
                continue
            taken = self.observed_holder not in ("", self.config.identity)
            if taken or self._monotonic() - self._last_renewal >= deadline:
                self.is_leader = False
                self.gate.close()
                raise LeadershipLost(
                    f"lease {self.config.namespace}/{self.config.name} is held by {self.observed_holder}"
                    if taken
                    else f"could not renew lease {self.config.namespace}/{self.config.name} "
                    f"within {self.config.renew_deadline:g}s"
                )

    async def try_acquire_or_renew(self) -> bool:
        """One attempt (client-go's tryAcquireOrRenew); True when we hold the lease afterwards.

        A success counts from the moment this attempt started (before its first request), as client-go's."""
        now, started = self._clock(), self._monotonic()
        try:
            lease = await self.kube.get(LEASE, self.config.name, self.config.namespace)
        except NotFoundError:
            return await self._create(now, started)
        except ApiError as error:
            log.warning("reading leader lease failed: %s", error)
            return False
        spec = lease.get("spec") or {}
        self._observe(spec, started)
        holder = spec.get("holderIdentity") or ""
        mine = holder == self.config.identity
        if holder and not mine and not self._expired(spec, started):
            self.is_leader = False
            self.gate.close()
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        updated = dict(lease)
        updated["spec"] = {
            "holderIdentity": self.config.identity,
            "leaseDurationSeconds": max(1, round(self.config.lease_duration)),
            "acquireTime": spec.get("acquireTime") if mine else format_micro_time(now),
            "renewTime": format_micro_time(now),
            "leaseTransitions": transitions if mine else transitions + 1,
        }
        try:
            stored = await self.kube.replace(updated)  # carries the read resourceVersion
        except ConflictError:
            return False  # somebody else wrote first; look again next round
        except ApiError as error:
            log.warning("updating leader lease failed: %s", error)
            return False
        return self._won(stored, started)

    async def release(self) -> None:
        """Give the lease up (empty holder) if we hold it, so a standby need not wait for expiry.

        Bounded by the renew deadline: when the API server does not answer, the lease expires by itself."""
        self.gate.close()
        if not self.is_leader:
            return
        self.is_leader = False
        try:
            async with asyncio.timeout(self.config.renew_deadline):
                await self._release()
        except TimeoutError:
            log.warning("releasing leader lease timed out; it expires after %gs", self.config.lease_duration)

    async def _release(self) -> None:
        try:
            lease = await self.kube.get(LEASE, self.config.name, self.config.namespace)
            if (lease.get("spec") or {}).get("holderIdentity") != self.config.identity:
                return
            now = format_micro_time(self._clock())
            lease["spec"] = {
                **(lease.get("spec") or {}),
                "holderIdentity": None,
                "leaseDurationSeconds": 1,
                "acquireTime": now,
                "renewTime": now,
            }
            lease["spec"] = {k: v for k, v in lease["spec"].items() if v is not None}
            await self.kube.replace(lease)
            log.info("released leader lease", extra={"lease": self.config.name})
        except ApiError as error:
            log.warning("releasing leader lease failed: %s", error)

    async def _create(self, now: datetime, started: float) -> bool:
        lease = {
            "apiVersion": LEASE.api_version,
            "kind": LEASE.kind,
            "metadata": {"name": self.config.name, "namespace": self.config.namespace},
            "spec": {
                "holderIdentity": self.config.identity,
                "leaseDurationSeconds": max(1, round(self.config.lease_duration)),
                "acquireTime": format_micro_time(now),
                "renewTime": format_micro_time(now),
                "leaseTransitions": 0,
            },
        }
        try:
            stored = await self.kube.create(lease)
        except ApiError as error:  # 409: another candidate created it first
            if not isinstance(error, ConflictError):
                log.warning("creating leader lease failed: %s", error)
            return False
        return self._won(stored, started)

    def _won(self, stored: Manifest, started: float) -> bool:
        self._observe(stored.get("spec") or {}, started)
        self._last_renewal = started
        self.is_leader = True
        self.gate.renewed(started, self.config.renew_deadline)
        return True

    def _observe(self, spec: Mapping[str, Any], at: float) -> None:
        self.observed_holder = str(spec.get("holderIdentity") or "")
        if spec != self._observed_spec:
            self._observed_spec = dict(spec)
            self._observed_at = at

    def _expired(self, spec: Mapping[str, Any], at: float) -> bool:
        assert self._observed_at is not None
        duration = float(spec.get("leaseDurationSeconds") or self.config.lease_duration)
        return at >= self._observed_at + duration
