"""Expiration: delete NodeClaims that outlived ``spec.expireAfter`` (no budget, PDB or do-not-disrupt check).

The decision is the pure ``reconciler.lifecycle.expiration.expired``; deleting
the claim starts the termination finalizer, which still drains respecting PDBs
until the terminationGracePeriod, while the provisioner re-homes the pods.
"""

from __future__ import annotations

from reconciler.controllers.runtime.backoff import Retries
from reconciler.controllers.runtime.context import ControllerContext, ControllerLog, Wakeup, ref
from reconciler.kube.api import NODECLAIM, ApiError, NotFoundError
from reconciler.lifecycle.expiration import Expiration, expired, next_expiration
from reconciler.model import labels as wk
from reconciler.model.meta import format_time
from reconciler.state.store import StateStore

log = ControllerLog("nodeclaim.expiration")


class ExpirationController:
    def __init__(self, ctx: ControllerContext, store: StateStore) -> None:
        self.ctx = ctx
        self.store = store
        self.wake = Wakeup()
        self.retries = Retries(log, ctx.clock.monotonic)  # failed deletions, per claim
        store.subscribe(self._on_change)

    def _on_change(self, kind: str, manifest: dict[str, object], deleted: bool) -> None:
        if kind == "NodeClaim" and not deleted:
            self.wake.set()

    async def run(self) -> None:
        while True:
            async with self.ctx.reconciling():
                await self.reconcile_once()
            now = self.ctx.now()
            upcoming = next_expiration(self.store.nodeclaims(), now)
            wait = self.ctx.timings.expiration_max_wait
            if upcoming is not None:
                wait = min(wait, max(0.0, (upcoming - now).total_seconds()))
            await self.wake.wait(min(wait, self.retries.next_due() or wait))

    async def reconcile_once(self) -> list[Expiration]:
        now = self.ctx.now()
        done = []
        for item in expired(self.store.nodeclaims(), now):
            claim = self.store.get("NodeClaim", item.nodeclaim)
            if not self.retries.ready(item.nodeclaim):
                continue
            try:
                await self.ctx.kube.delete(NODECLAIM, item.nodeclaim)
            except NotFoundError:
                continue
            except ApiError as err:
                self.retries.failure(item.nodeclaim, err, "deleting expired nodeclaim failed; backing off",
                                     NodeClaim=ref(item.nodeclaim))
                continue
            self.retries.forget(item.nodeclaim)
            log.info(
                "disrupting nodeclaim(s) via delete, terminating 1 nodes; for Expired",
                NodeClaim=ref(item.nodeclaim), NodePool=ref(item.nodepool), Node=ref(item.node),
                reason="Expired", **{"expired-at": item.expired_at},
            )
            labels = ((claim or {}).get("metadata") or {}).get("labels") or {}
            self.ctx.metrics.nodeclaims_disrupted.labels(
                reason="expired", nodepool=item.nodepool, capacity_type=labels.get(wk.CAPACITY_TYPE, "")).inc()
            at = format_time(item.expired_at)
            await self.ctx.event(claim, "Normal", "DisruptionTerminating",
                                 f"Disrupting NodeClaim: Expired (expireAfter elapsed at {at})")
            done.append(item)
        return done
