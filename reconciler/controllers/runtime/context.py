"""What every controller shares: the clock, tunable timings, wake-ups, per-object locks and the context.

Controllers never read the wall clock directly: ``Clock.now()`` is injected so
tests can pin time, and every duration lives in ``Timings`` (Karpenter's
defaults) so the end-to-end tests can shrink them instead of sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import random
import string
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from reconciler.cloud.types import CloudProvider
from reconciler.kube.api import KubeAPI, Manifest
from reconciler.observability import EventRecorder, EventType, Metrics, get_logger, log_decision
from reconciler.provisioning.provisioner import nomination_window
from reconciler.settings import Settings

if TYPE_CHECKING:
    from reconciler.state.store import StateStore

# The controller a task works for (set by the manager for each loop, inherited by the tasks it starts):
# the ``controller`` label of controller-runtime's and the cloud provider's metrics.
CURRENT_CONTROLLER: contextvars.ContextVar[str] = contextvars.ContextVar("controller", default="")


class Clock(Protocol):
    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock tests move by hand (``advance``); ``monotonic`` follows it."""

    def __init__(self, start: datetime) -> None:
        self._now = start
        self._start = start

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return (self._now - self._start).total_seconds()

    def advance(self, seconds: float) -> datetime:
        self._now += timedelta(seconds=seconds)
        return self._now


@dataclass(slots=True, frozen=True)
class Timings:
    """Every period and timeout the controllers use, in seconds (Karpenter's values by default)."""

    launch_timeout: float = 5 * 60
    registration_timeout: float = 15 * 60
    lifecycle_resync: float = 10.0  # periodic pass that catches timeouts without any event
    termination_requeue: float = 1.0
    instance_termination_poll: float = 5.0  # how often a terminating instance is looked up again
    min_drain_time: float = 5.0  # a drain lasts at least this long (pods bound just before the taint go too)
    command_poll: float = 1.0  # how often an in-flight disruption command is advanced
    gc_fast_interval: float = 10.0
    gc_fast_passes: int = 20
    gc_slow_interval: float = 120.0
    gc_min_age: float = 30.0
    expiration_max_wait: float = 60.0
    status_interval: float = 10.0
    nodeclass_refresh: float = 60.0
    drift_check_interval: float = 5 * 60
    pod_event_dedupe: float = 10.0
    provisioner_recheck: float = 10.0  # re-plan while pods stay pending even without new events
    # Explanations repeated every pass go out once per period per (object, reason, message): Karpenter's
    # 2 min default, 5 min for FailedScheduling, 15 min for "no cheaper option" (its Unconsolidatable).
    event_dedupe: float = 120.0
    scheduling_event_dedupe: float = 300.0
    unconsolidatable_event_dedupe: float = 900.0
    # A deleting NodeClaim's drain waits for the provisioner to plan its pods' new home, at most this long.
    drain_hold: float = 30.0
    sync_poll: float = 0.1
    decision_timeout: float = 3 * 60  # bound on one disruption search (Karpenter: 1 min multi, 3 min single)
    state_sync_timeout: float = 120.0
    # How long nodes chosen for pending pods are shielded from disruption; None = Karpenter's
    # max(2 x BATCH_MAX_DURATION, 10 s).
    nomination: float | None = None

    def nomination_window(self, settings: Settings) -> timedelta:
        if self.nomination is not None:
            return timedelta(seconds=self.nomination)
        return nomination_window(settings)


class Wakeup:
    """A level-triggered nudge: ``set`` from event handlers, ``wait`` in a controller loop."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    async def wait(self, timeout: float | None) -> bool:
        """True when nudged, False on timeout; either way the nudge is consumed.

        Built on ``asyncio.wait`` rather than ``asyncio.wait_for``, which on Python 3.11 can swallow a
        cancellation that races with the wake-up and leave the controller running after shutdown.
        """
        if self._event.is_set():
            self._event.clear()
            return True
        waiter = asyncio.ensure_future(self._event.wait())
        try:
            done, _ = await asyncio.wait({waiter}, timeout=None if timeout is None else max(0.0, timeout))
        finally:
            waiter.cancel()
        self._event.clear()
        return bool(done)


class KeyedLocks:
    """Which objects some controller is acting on right now, so two never act on one at once.

    A *reservation* keeps everyone else off an object without acting on it (so it never disturbs a
    current holder): the provisioner reserves a deleting NodeClaim until it has planned a new home
    for its pods, and the drain waits. Reservations lapse at their deadline (``clock`` seconds) so a
    stuck reserver cannot block the others for ever.
    """

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        self.clock = clock
        self._held: set[str] = set()
        self._reserved: dict[str, float] = {}  # key -> deadline

    def busy(self, key: str) -> bool:
        return key in self._held or self.reserved(key)

    def reserved(self, key: str) -> bool:
        deadline = self._reserved.get(key)
        if deadline is None:
            return False
        if self.clock is not None and self.clock() >= deadline:
            del self._reserved[key]
            return False
        return True

    def try_hold(self, keys: Iterable[str]) -> bool:
        wanted = set(keys)
        if any(self.busy(key) for key in wanted):
            return False
        self._held |= wanted
        return True

    def release(self, keys: Iterable[str]) -> None:
        self._held -= set(keys)

    def reserve(self, key: str, until: float) -> None:
        """Keep others off ``key`` until ``until`` (on ``clock``) or ``unreserve``, whichever is first."""
        self._reserved[key] = max(until, self._reserved.get(key, until))

    def unreserve(self, keys: Iterable[str]) -> None:
        for key in keys:
            self._reserved.pop(key, None)

    @contextlib.asynccontextmanager
    async def holding(self, keys: Iterable[str]) -> AsyncIterator[bool]:
        """Yields False (and holds nothing) when any key is busy."""
        wanted = list(keys)
        acquired = self.try_hold(wanted)
        try:
            yield acquired
        finally:
            if acquired:
                self.release(wanted)


class NameGenerator:
    """``<nodepool>-<5 random lowercase letters/digits>``, never a name ``taken`` reports as used."""

    def __init__(self, taken: Callable[[str], bool], seed: int | None = None) -> None:
        self._taken = taken
        self._random = random.Random(seed)
        self._issued: set[str] = set()
        self._lock = threading.Lock()  # provisioning and disruption plan in worker threads, maybe at once

    def __call__(self, nodepool: str) -> str:
        with self._lock:
            while True:
                suffix = "".join(self._random.choices(string.ascii_lowercase + string.digits, k=5))
                name = f"{nodepool}-{suffix}"
                if name not in self._issued and not self._taken(name):
                    self._issued.add(name)
                    return name


@dataclass(slots=True)
class ControllerContext:
    """The ports and shared services one reconciler instance works with."""

    kube: KubeAPI
    cloud: CloudProvider
    settings: Settings
    clock: Clock = field(default_factory=SystemClock)
    timings: Timings = field(default_factory=Timings)
    metrics: Metrics = field(default_factory=Metrics)
    events: EventRecorder | None = None
    locks: KeyedLocks = field(default_factory=KeyedLocks)
    # The leader's informer cache, once its ``Reconciler`` exists: loops read from it instead of listing.
    cache: StateStore | None = None

    def __post_init__(self) -> None:
        if self.locks.clock is None:
            self.locks.clock = self.clock.monotonic
        if self.events is None:
            self.events = EventRecorder(self.kube, clock=self.clock.now)

    def now(self) -> datetime:
        return self.clock.now()

    @contextlib.asynccontextmanager
    async def reconciling(self) -> AsyncIterator[None]:
        """One reconciliation of the current controller, as controller-runtime counts and times them."""
        runtime = self.metrics.runtime
        controller = CURRENT_CONTROLLER.get()
        started = time.perf_counter()
        runtime.active_workers.labels(controller=controller).inc()
        try:
            yield
        except asyncio.CancelledError:
            raise
        except Exception:
            runtime.reconcile_total.labels(controller=controller, result="error").inc()
            runtime.reconcile_errors.labels(controller=controller).inc()
            raise
        else:
            runtime.reconcile_total.labels(controller=controller, result="success").inc()
        finally:
            runtime.active_workers.labels(controller=controller).dec()
            runtime.reconcile_time.labels(controller=controller).observe(time.perf_counter() - started)

    async def event(
        self,
        involved: Manifest | None,
        event_type: EventType,
        reason: str,
        message: str,
        *,
        dedupe: float | None = None,
        dedupe_key: str | None = None,
        limiter: Callable[[], bool] | None = None,
    ) -> None:
        """Record an event; with ``dedupe`` (seconds) a repeat within that period is not written again;
        ``limiter`` is a rate limit shared with other events of its kind (dropped when it refuses)."""
        if involved is None or self.events is None:
            return
        await self.events.record(involved, event_type, reason, message, dedupe=dedupe, dedupe_key=dedupe_key,
                                 limiter=limiter)


class ControllerLog:
    """A controller's structured logger: ``info(message, **facts)`` writes one JSON line."""

    def __init__(self, controller: str) -> None:
        self.controller = controller

    def _logger(self) -> Any:
        # Resolved per call: a logger bound at import time would miss the logging configuration.
        return get_logger(self.controller)

    def info(self, message: str, /, **facts: Any) -> None:
        log_decision(self._logger(), message, facts)

    def warning(self, message: str, /, **facts: Any) -> None:
        self._logger().warning(message, **facts)

    def error(self, message: str, /, **facts: Any) -> None:
        self._logger().error(message, **facts)


def ref(name: str) -> dict[str, str]:
    """Karpenter's log shape for an object reference, used as ``NodeClaim=ref(name)``."""
    return {"name": name}


def snake_case(text: str) -> str:
    """``InsufficientCapacity`` -> ``insufficient_capacity``, as Karpenter's metric label values are written."""
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(text))


def summarize(names: list[str], shown: int = 5) -> str:
    """``a, b, c, d, e and 7 other(s)`` as Karpenter prints long lists."""
    head = ", ".join(names[:shown])
    return head + (f" and {len(names) - shown} other(s)" if len(names) > shown else "")
