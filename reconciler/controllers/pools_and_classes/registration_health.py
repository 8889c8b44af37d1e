"""NodePool ``NodeRegistrationHealthy``, as Karpenter tracks it (``nodepoolhealth``).

Per NodePool the outcomes of its last four NodeClaims (registered = healthy; deleted for not launching
or not registering in time = unhealthy). Half or more unhealthy sets the condition False — reason
``RegistrationFailed`` when the claim had launched, else its Launched condition's reason and message —
and a healthy majority sets it True. It goes back to Unknown (and the record is cleared) whenever the
NodePool or its EC2NodeClass changes (new generation), which the status controller checks each pass;
a restarted leader takes its starting point from the condition as stored.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from reconciler.controllers.runtime.context import ControllerContext, ControllerLog, ref
from reconciler.kube.api import NODEPOOL, ApiError, Manifest, NotFoundError
from reconciler.kube.retry import modify
from reconciler.model import labels as wk
from reconciler.model.conditions import condition_of, make
from reconciler.model.meta import format_time
from reconciler.state.store import StateStore

log = ControllerLog("nodepool.registrationhealth")
NODE_REGISTRATION_HEALTHY = "NodeRegistrationHealthy"
BUFFER_SIZE = 4
THRESHOLD_FALSE = 0.5


class RegistrationHealth:
    def __init__(self, ctx: ControllerContext, store: StateStore) -> None:
        self.ctx = ctx
        self.store = store
        self._results: dict[str, deque[bool]] = {}  # NodePool uid -> recent outcomes

    def status(self, uid: str) -> bool | None:
        """True healthy, False unhealthy, None unknown (no outcome recorded)."""
        results = self._results.get(uid)
        if not results:
            return None
        return sum(1 for r in results if not r) / BUFFER_SIZE < THRESHOLD_FALSE

    def reset(self, uid: str, stored: bool | None = None) -> None:
        """Forget the outcomes; ``stored`` seeds them as Karpenter does from the condition after a restart."""
        results: deque[bool] = deque(maxlen=BUFFER_SIZE)
        if stored is True:
            results.append(True)
        elif stored is False:
            results.extend([False] * int(BUFFER_SIZE * THRESHOLD_FALSE))
        self._results[uid] = results

    def hydrate(self, pool: Mapping[str, Any]) -> None:
        uid = _uid(pool)
        if uid in self._results:
            return
        found = condition_of(pool, NODE_REGISTRATION_HEALTHY)
        status = (found or {}).get("status")
        self.reset(uid, True if status == "True" else False if status == "False" else None)

    async def record(self, nodeclaim: Mapping[str, Any], healthy: bool) -> None:
        """One NodeClaim registered (``healthy``) or timed out; writes the pool's condition when it changes."""
        pool_name = ((nodeclaim.get("metadata") or {}).get("labels") or {}).get(wk.NODEPOOL)
        pool = self.store.get("NodePool", str(pool_name)) if pool_name else None
        if pool is None:
            return
        uid = _uid(pool)
        self.hydrate(pool)
        self._results[uid].append(healthy)
        verdict = self.status(uid)
        if verdict is None:
            return
        if verdict:
            desired = make(NODE_REGISTRATION_HEALTHY, "True", format_time(self.ctx.now()))
        else:
            launched = condition_of(nodeclaim, "Launched") or {}
            reason, message = ("RegistrationFailed", "Failed to register node") if launched.get("status") == "True" \
                else (str(launched.get("reason") or "LaunchFailed"), str(launched.get("message") or ""))
            desired = make(NODE_REGISTRATION_HEALTHY, "False", format_time(self.ctx.now()), reason, message)
        await self.write(str(pool["metadata"]["name"]), desired)

    async def write(self, pool_name: str, desired: dict[str, Any]) -> None:
        """Set the condition on the stored NodePool (resourceVersion-guarded) unless it already has that status."""
        def edit(current: Manifest) -> Manifest | None:
            found = condition_of(current, NODE_REGISTRATION_HEALTHY)
            if found is not None and found.get("status") == desired["status"]:
                return None
            status = current.setdefault("status", {})
            kept = [c for c in status.get("conditions") or [] if c.get("type") != NODE_REGISTRATION_HEALTHY]
            generation = int(current["metadata"].get("generation") or 0)
            status["conditions"] = [*kept, {**desired, "observedGeneration": generation}]
            return current

        try:
            self.store.write_through(await modify(self.ctx.kube, NODEPOOL, pool_name, edit, subresource="status",
                                                  current=self.store.get("NodePool", pool_name)))
        except NotFoundError:
            return
        except ApiError as err:
            log.warning("updating NodeRegistrationHealthy failed", NodePool=ref(pool_name), error=str(err))
            return
        log.info("nodepool registration health", NodePool=ref(pool_name), status=desired["status"],
                 reason=desired["reason"])


def _uid(pool: Mapping[str, Any]) -> str:
    metadata = pool.get("metadata") or {}
    return str(metadata.get("uid") or metadata.get("name") or "")
