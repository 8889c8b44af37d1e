"""The leadership gate: nothing is written to the API server or sent to the cloud once leadership may be lost.

Cancelling the leader's controllers when its lease cannot be renewed (``LeaderElector``) stops every
coroutine, but not what already runs elsewhere: a boto3 call in the AWS thread pool goes on with its
retries and paginator pages after the coroutine that awaited it is gone, and a task that survived
cancellation could still write. So every write and every AWS request attempt asks the gate *at the moment it
is sent*, which is open only until the start of the last successful renewal request + the renew deadline:

- API writes: ``GatedKube`` asks before handing a write to the client, and the client (``LiveKube``) asks
  again right before each HTTP attempt goes on the wire (``check_at_send``), that is after waiting for the
  client-side rate limiter and after each Retry-After pause (up to 10 x 10 s), which would otherwise let a
  write checked in time be sent long after;
- AWS: the provider's ``guard`` asks before each call, each retry and each page (botocore's ``before-send``).

The gate reads the clock itself, so a stalled event loop (a busy GIL) that has not yet noticed the deadline
cannot let a call through after it. Every deadline is on ``time.monotonic`` (as client-go's: Go's
``time.Now`` carries a monotonic reading): stepping the wall clock back (NTP, a resumed VM) does not keep a
leader's gate open, and stepping it forward does not close a healthy one.

Why that is enough. A standby takes the lease only after seeing no change for the lease duration, measured on
its own monotonic clock from when it observed our last renewal, which was after we started that renewal (the
moment the gate counts from). So the standby's first action comes at least ``lease_duration -
renew_deadline`` after our last possible send (5 s with the defaults 15 s / 10 s; 2 s with the end-to-end
tests' 6 s / 4 s), whatever either wall clock says. Only the *rates* of the two monotonic clocks matter, and
they agree to far better than the margin. A request sent before the deadline has that margin to take effect:
AWS and the API server act on a request when it arrives, within the connection time of its send (an AWS
connection is made or given up within the client's connect timeout, ``ClientOptions.connect_timeout``, 5 s). A
response that comes back later changes nothing the new leader could see before acting: Adze's writes are
idempotent and every launch is tagged with its NodeClaim, so a late instance is adopted or collected.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from reconciler.kube.api import ApiError, Kind, KubeAPI, Manifest, WatchEvent


class NotLeading(ApiError):
    """Refused before it was sent: this replica may no longer act as the leader."""

    def __init__(self, message: str) -> None:
        super().__init__(503, "NotLeader", message)


# The check a write's HTTP attempts must pass when they are sent (set by ``GatedKube`` around each write,
# read by the client right before each attempt goes on the wire).
SEND_CHECK: ContextVar[Callable[[str], None] | None] = ContextVar("leadership_send_check", default=None)


def check_at_send(what: str) -> None:
    """Called by the API client right before it sends a request: refuses it when the write it belongs to may
    no longer be sent (``NotLeading``); a request outside any gated write passes."""
    check = SEND_CHECK.get()
    if check is not None:
        check(what)


class LeadershipGate:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock  # monotonic seconds
        self._until: float | None = None  # replaced whole (one reference), so threads read it safely

    def renewed(self, at: float, renew_deadline: float) -> None:
        """A renewal whose request started at ``at`` (monotonic) succeeded: leading until then + the deadline."""
        self._until = at + renew_deadline

    def close(self) -> None:
        self._until = None

    @property
    def open_until(self) -> float | None:
        return self._until

    def is_open(self) -> bool:
        until = self._until
        return until is not None and self._clock() < until

    def check(self, what: str = "call") -> None:
        """Raise ``NotLeading`` unless this replica still leads (call right before starting ``what``)."""
        if not self.is_open():
            raise NotLeading(f"not sending {what}: leadership is lost or past its renew deadline")


class GatedKube:
    """A ``KubeAPI`` whose writes go through the gate, when asked and again when each HTTP attempt is sent;
    reads (and watches) are never refused."""

    def __init__(self, kube: KubeAPI, gate: LeadershipGate) -> None:
        self._kube = kube
        self._gate = gate

    @contextlib.contextmanager
    def _gated(self, what: str) -> Iterator[None]:
        self._gate.check(what)
        token = SEND_CHECK.set(self._gate.check)
        try:
            yield
        finally:
            SEND_CHECK.reset(token)

    async def get(self, kind: Kind, name: str, namespace: str | None = None) -> Manifest:
        return await self._kube.get(kind, name, namespace)

    async def list(
        self, kind: Kind, namespace: str | None = None, label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[Manifest], str]:
        return await self._kube.list(kind, namespace, label_selector=label_selector, field_selector=field_selector)

    def watch(
        self, kind: Kind, resource_version: str, namespace: str | None = None, *,
        label_selector: str | None = None, field_selector: str | None = None,
    ) -> AsyncIterator[WatchEvent]:
        return self._kube.watch(kind, resource_version, namespace, label_selector=label_selector,
                                field_selector=field_selector)

    async def create(self, manifest: Manifest) -> Manifest:
        with self._gated(f"create {manifest.get('kind')}"):
            return await self._kube.create(manifest)

    async def replace(self, manifest: Manifest, *, subresource: str | None = None) -> Manifest:
        with self._gated(f"update {manifest.get('kind')}"):
            return await self._kube.replace(manifest, subresource=subresource)

    async def patch(
        self, kind: Kind, name: str, patch: Mapping[str, Any], namespace: str | None = None,
        subresource: str | None = None,
    ) -> Manifest:
        with self._gated(f"patch {kind.kind}/{name}"):
            return await self._kube.patch(kind, name, patch, namespace, subresource)

    async def delete(
        self, kind: Kind, name: str, namespace: str | None = None, *, uid: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> None:
        with self._gated(f"delete {kind.kind}/{name}"):
            await self._kube.delete(kind, name, namespace, uid=uid, grace_period_seconds=grace_period_seconds)

    async def evict(self, name: str, namespace: str) -> None:
        with self._gated(f"evict {namespace}/{name}"):
            await self._kube.evict(name, namespace)

    def __getattr__(self, attribute: str) -> Any:
        """Anything else the wrapped client offers (``apply``, ``close``...), writes gated by name."""
        found = getattr(self._kube, attribute)
        if attribute == "apply" and callable(found):
            async def apply(*args: Any, **kwargs: Any) -> Any:
                with self._gated("apply"):
                    return await found(*args, **kwargs)
            return apply
        return found
