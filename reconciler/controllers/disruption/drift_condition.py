"""Provider drift marking: ask the cloud whether each instance still matches its node class.

Static drift (NodePool and EC2NodeClass hashes, requirements, instance type
gone) is computed by the pure disruption engine on every pass. What only the
cloud can tell (AMI, subnet, security groups of the running instance) is asked
here every ``drift_check_interval`` per NodeClaim and written as the
``Drifted`` condition, which the engine then reads.
"""

from __future__ import annotations

import asyncio
from typing import Any

from reconciler.cloud.types import InstanceNotFoundError
from reconciler.controllers.runtime.context import ControllerContext, ControllerLog, ref
from reconciler.kube.api import ApiError, NotFoundError
from reconciler.kube.edits import drop_condition
from reconciler.lifecycle.conditions import set_condition
from reconciler.model.conditions import condition, is_true
from reconciler.state.store import StateStore

log = ControllerLog("nodeclaim.disruption")


class DriftMarker:
    def __init__(self, ctx: ControllerContext, store: StateStore) -> None:
        self.ctx = ctx
        self.store = store
        self._checked: dict[str, float] = {}  # claim -> monotonic time of the last check

    async def run(self) -> None:
        while True:
            await self.reconcile_once()
            await asyncio.sleep(min(self.ctx.timings.drift_check_interval, 60.0))

    async def reconcile_once(self) -> list[str]:
        """Check claims that are due; returns the names whose Drifted condition changed."""
        changed = []
        now_mono = self.ctx.clock.monotonic()
        live = set()
        for claim in self.store.nodeclaims():
            name = claim["metadata"]["name"]
            live.add(name)
            if claim["metadata"].get("deletionTimestamp") or not is_true(claim, "Initialized"):
                continue
            last = self._checked.get(name)
            if last is not None and now_mono - last < self.ctx.timings.drift_check_interval:
                continue
            self._checked[name] = now_mono
            if await self._check(claim):
                changed.append(name)
        self._checked = {k: v for k, v in self._checked.items() if k in live}
        return changed

    async def _check(self, claim: dict[str, Any]) -> bool:
        name = claim["metadata"]["name"]
        provider_id = (claim.get("status") or {}).get("providerID")
        if not provider_id:
            return False
        ref_name = ((claim.get("spec") or {}).get("nodeClassRef") or {}).get("name", "")
        nodeclass = self.store.get("EC2NodeClass", str(ref_name))
        try:
            instance = await self.ctx.cloud.get(provider_id)
            reason = await self.ctx.cloud.is_drifted(instance, nodeclass)
        except InstanceNotFoundError:
            return False  # garbage collection deals with vanished instances
        except Exception as err:  # provider trouble: try again next interval
            log.warning("drift check failed", NodeClaim=ref(name), error=str(err))
            return False
        was_drifted = is_true(claim, "Drifted")
        try:
            if reason and not was_drifted:
                await set_condition(self.ctx.kube, name, condition("Drifted", True, self.ctx.now(), reason=reason,
                                                                   message=f"instance drifted: {reason}"),
                                    current=claim)
                log.info("marked nodeclaim as drifted", NodeClaim=ref(name), reason=reason)
                await self.ctx.event(claim, "Normal", "Drifted", f"instance drifted from its node class: {reason}")
                return True
            if not reason and was_drifted:
                await drop_condition(self.ctx.kube, name, "Drifted", current=claim)
                log.info("nodeclaim is no longer drifted", NodeClaim=ref(name))
                return True
        except (NotFoundError, ApiError) as err:
            log.warning("updating drift condition failed", NodeClaim=ref(name), error=str(err))
        return False
