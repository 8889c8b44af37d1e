"""The capacity-reservation controllers (ReservedCapacity gate), every minute on the leader:

* ``capacityreservation.expiration``: deletes NodeClaims in capacity blocks 40 minutes before the block ends
  (drain in order, ahead of EC2's reclaim 30 minutes before the end);
* ``capacityreservation.capacitytype``: relabels ``reserved`` NodeClaims and Nodes whose instance EC2 now
  reports as on-demand (the reservation ended or was cancelled) as ``on-demand``.

Decisions live in ``reconciler.lifecycle.capacityreservation``; this module lists, deletes and logs.
"""

from __future__ import annotations

from typing import Any

from reconciler.controllers.runtime.context import ControllerContext, ControllerLog, ref
from reconciler.controllers.runtime.periodic import PeriodicTask
from reconciler.kube.api import NODE, NODECLAIM, NotFoundError
from reconciler.lifecycle.capacityreservation import capacity_block_expirations, demote_ended_reservations
from reconciler.model import labels as wk

INTERVAL_SECONDS = 60.0
log = ControllerLog("capacityreservation.expiration")


async def expire_capacity_blocks(ctx: ControllerContext, cloud: Any) -> dict[str, Any]:
    claims, _ = await ctx.kube.list(NODECLAIM)
    by_name = {c["metadata"]["name"]: c for c in claims}
    deleted = 0
    for name in await capacity_block_expirations(claims, cloud, ctx.now()):
        claim = by_name[name]
        labels = claim["metadata"].get("labels") or {}
        try:
            await ctx.kube.delete(NODECLAIM, name)
        except NotFoundError:
            continue
        deleted += 1
        log.info("initiating delete for capacity block expiration", NodeClaim=ref(name),
                 **{"capacity-reservation-id": labels.get(wk.CAPACITY_RESERVATION_ID, "")})
        ctx.metrics.nodeclaims_disrupted.labels(
            reason="capacity_block_expiration", nodepool=labels.get(wk.NODEPOOL, ""),
            capacity_type=labels.get(wk.CAPACITY_TYPE, "")).inc()
        await ctx.event(claim, "Normal", "DisruptionTerminating",
                        "Disrupting NodeClaim: its capacity block ends within 40 minutes")
    return {"deleted": deleted}


async def sync_capacity_types(ctx: ControllerContext, cloud: Any) -> dict[str, Any]:
    claims, _ = await ctx.kube.list(NODECLAIM)
    if not any((c["metadata"].get("labels") or {}).get(wk.CAPACITY_TYPE) == wk.CAPACITY_TYPE_RESERVED
               for c in claims):
        return {"demoted": 0}
    nodes, _ = await ctx.kube.list(NODE)
    changed = await demote_ended_reservations(ctx.kube, cloud, claims, {n["metadata"]["name"]: n for n in nodes})
    if changed:
        ControllerLog("capacityreservation.capacitytype").info("updated capacity type for nodeclaims",
                                                               NodeClaims=sorted(changed))
    return {"demoted": len(changed)}


def capacity_reservation_loops(ctx: ControllerContext, cloud: Any) -> dict[str, PeriodicTask]:
    """Both controllers as periodic tasks (empty with the ReservedCapacity gate off)."""
    if not ctx.settings.gate("ReservedCapacity"):
        return {}
    return {
        "capacityreservation.expiration": PeriodicTask(
            "capacityreservation.expiration", INTERVAL_SECONDS, lambda: expire_capacity_blocks(ctx, cloud),
            message="checked capacity blocks for expiry"),
        "capacityreservation.capacitytype": PeriodicTask(
            "capacityreservation.capacitytype", INTERVAL_SECONDS, lambda: sync_capacity_types(ctx, cloud),
            message="synced capacity types of reserved nodeclaims"),
    }
