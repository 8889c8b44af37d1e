"""NodeClaim ``Consolidatable``: Karpenter's condition, written for the API's readers (``kubectl``, dashboards).

The disruption engine does not read it: it derives the same answer from the claim and the time
(``disruption.policy``). This loop writes what ``policy.consolidatable`` says — set once ``consolidateAfter``
has passed since the last pod event (else since initialization), removed while it has not or when
consolidation is off — and wakes at the next moment an answer changes by time alone.
"""

from __future__ import annotations

import contextlib
from datetime import datetime

from reconciler.controllers.runtime.backoff import Retries
from reconciler.controllers.runtime.context import ControllerContext, ControllerLog, Wakeup, ref
from reconciler.disruption.policy import consolidatable
from reconciler.kube.api import ApiError, NotFoundError
from reconciler.kube.edits import drop_condition
from reconciler.lifecycle.conditions import set_condition
from reconciler.model.conditions import condition
from reconciler.state.store import StateStore

log = ControllerLog("nodeclaim.consolidation")
CONSOLIDATABLE = "Consolidatable"
RESYNC = 60.0


class ConsolidatableMarker:
    def __init__(self, ctx: ControllerContext, store: StateStore) -> None:
        self.ctx = ctx
        self.store = store
        self.wake = Wakeup()
        self.retries = Retries(log, ctx.clock.monotonic)  # failed writes, per claim
        store.subscribe(lambda kind, manifest, deleted: self.wake.set() if kind in ("NodeClaim", "NodePool") else None)

    async def run(self) -> None:
        while True:
            async with self.ctx.reconciling():
                due = await self.reconcile_once()
            wait = RESYNC if due is None else min(RESYNC, max(0.0, (due - self.ctx.now()).total_seconds()))
            await self.wake.wait(min(wait, self.retries.next_due() or wait))

    async def reconcile_once(self) -> datetime | None:
        """Bring every claim's condition up to date; returns when the next one changes by time alone."""
        now = self.ctx.now()
        state = self.store.state
        next_due: datetime | None = None
        for name, claim in list(state.nodeclaims.items()):
            pool = state.nodepools.get(claim.nodepool)
            if pool is None or claim.deletion_timestamp is not None:
                continue
            wanted, due = consolidatable(pool, claim, now)
            if due is not None and (next_due is None or due < next_due):
                next_due = due
            has = CONSOLIDATABLE in claim.conditions
            if wanted == has or not self.retries.ready(name):
                continue
            current = self.store.get("NodeClaim", name)
            with contextlib.suppress(NotFoundError):
                try:
                    if wanted:
                        await set_condition(self.ctx.kube, name, condition(CONSOLIDATABLE, True, now), current=current)
                        log.info("marked nodeclaim consolidatable", NodeClaim=ref(name))
                    else:
                        await drop_condition(self.ctx.kube, name, CONSOLIDATABLE, current=current)
                    self.retries.forget(name)
                except ApiError as err:
                    self.retries.failure(name, err, "updating Consolidatable failed; backing off", NodeClaim=ref(name))
        return next_due
