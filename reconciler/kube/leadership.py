"""The leadership gate: nothing is written to the API server or sent to the cloud once leadership may be lost.

Cancelling the leader's controllers when its lease cannot be renewed (``LeaderElector``) stops every
coroutine, but not what already runs elsewhere: a boto3 call in the AWS thread pool goes on with its
retries and paginator pages after the coroutine that awaited it is gone, and a task that survived
cancellation could still write. So every write (``GatedKube``) and every AWS request attempt (the AWS
provider's ``guard``: each call, each retry, each page) first asks the gate, which is open only until
the last successful renewal + the renew deadline. It reads the clock itself, so a stalled event loop (a
busy GIL) that has not yet noticed the deadline cannot let a call through after it.

Why that is enough. A standby takes the lease only after seeing no change for the lease duration,
measured from when it observed our last renewal, which was after we started that renewal (the time the
gate counts from). So the standby's first action comes at least ``lease_duration - renew_deadline``
after our last possible start (5 s with the defaults 15 s / 10 s; 2 s with the end-to-end tests' 6 s /
4 s). A call started before the deadline has that margin to take effect: AWS and the API server act on
a request when it arrives, which is within the connection time of its start (an AWS connection is made
or given up within the client's connect timeout, ``ClientOptions.connect_timeout``, 5 s). A response
that comes back later changes nothing the new leader could see before acting: Adze's writes are
idempotent and every launch is tagged with its NodeClaim, so a late instance is adopted or collected.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from reconciler.kube.api import ApiError, Kind, KubeAPI, Manifest, WatchEvent


class NotLeading(ApiError):
    """Refused before it was sent: this replica may no longer act as the leader."""

    def __init__(self, message: str) -> None:
        super().__init__(503, "NotLeader", message)


class LeadershipGate:
    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock
        self._until: datetime | None = None  # replaced whole (one reference), so threads read it safely

    def renewed(self, at: datetime, renew_deadline: float) -> None:
        """A renewal that started at ``at`` succeeded: leading until ``at`` + the renew deadline."""
        self._until = at + timedelta(seconds=renew_deadline)

    def close(self) -> None:
        self._until = None

    @property
    def open_until(self) -> datetime | None:
        return self._until

    def is_open(self) -> bool:
        until = self._until
        return until is not None and self._clock() < until

    def check(self, what: str = "call") -> None:
        """Raise ``NotLeading`` unless this replica still leads (call right before starting ``what``)."""
        if not self.is_open():
            raise NotLeading(f"not sending {what}: leadership is lost or past its renew deadline")


class GatedKube:
    """A ``KubeAPI`` whose writes go through the gate; reads (and watches) are never refused."""

    def __init__(self, kube: KubeAPI, gate: LeadershipGate) -> None:
        self._kube = kube
        self._gate = gate

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
        self._gate.check(f"create {manifest.get('kind')}")
        return await self._kube.create(manifest)

    async def replace(self, manifest: Manifest, *, subresource: str | None = None) -> Manifest:
        self._gate.check(f"update {manifest.get('kind')}")
        return await self._kube.replace(manifest, subresource=subresource)

    async def patch(
        self, kind: Kind, name: str, patch: Mapping[str, Any], namespace: str | None = None,
        subresource: str | None = None,
    ) -> Manifest:
        self._gate.check(f"patch {kind.kind}/{name}")
        return await self._kube.patch(kind, name, patch, namespace, subresource)

    async def delete(
        self, kind: Kind, name: str, namespace: str | None = None, *, uid: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> None:
        self._gate.check(f"delete {kind.kind}/{name}")
        await self._kube.delete(kind, name, namespace, uid=uid, grace_period_seconds=grace_period_seconds)

    async def evict(self, name: str, namespace: str) -> None:
        self._gate.check(f"evict {namespace}/{name}")
        await self._kube.evict(name, namespace)

    def __getattr__(self, attribute: str) -> Any:
        """Anything else the wrapped client offers (``apply``, ``close``...), writes gated by name."""
        found = getattr(self._kube, attribute)
        if attribute == "apply" and callable(found):
            async def apply(*args: Any, **kwargs: Any) -> Any:
                self._gate.check("apply")
                return await found(*args, **kwargs)
            return apply
        return found
