"""Garbage collection between the cloud and the cluster.

- Orphaned instances: owned by this cluster (the provider lists by ownership
  tag), older than ``gc_min_age`` (30 s: a launch may not have recorded its
  providerID yet), and referenced by no NodeClaim -> terminated, and a Node
  object registered for it is removed. Instances are listed *before* NodeClaims
  so a claim that records its instance in between is never missed. An instance
  whose NodeClaim exists but has not recorded it yet (a crash between launch and
  the status write) is left for that claim's next launch to adopt.
- NodeClaims whose instance vanished (terminated outside Adze) -> deleted, after
  a direct lookup confirms it is gone.

Runs every 10 s for the first 20 passes after becoming leader, then every 2 min
(Karpenter's schedule). NodeClaims and Nodes come from the informer cache (as Karpenter's
garbage collection reads them), not from full LISTs: a claim too new for the cache is younger
than ``gc_min_age``, and so is its instance, which is therefore not collected.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from reconciler.cloud.types import Instance, InstanceNotFoundError
from reconciler.controllers.runtime.context import ControllerContext, ControllerLog, ref
from reconciler.kube.api import NODE, NODECLAIM, ApiError, Manifest, NotFoundError
from reconciler.kube.edits import remove_finalizer
from reconciler.model import labels as wk
from reconciler.model.conditions import is_true
from reconciler.state.store import StateStore

log = ControllerLog("nodeclaim.garbagecollection")
_GONE_STATES = ("shutting-down", "terminated")
NODECLAIM_TAG = "karpenter.sh/nodeclaim"  # set on every instance at launch (the scoped IAM policy needs it)


@dataclass(slots=True)
class CollectionResult:
    instances: list[str] = field(default_factory=list)  # provider IDs terminated
    nodes: list[str] = field(default_factory=list)  # Node objects removed with them
    nodeclaims: list[str] = field(default_factory=list)  # NodeClaims deleted because their instance vanished


def orphaned(instances: list[Instance], nodeclaims: list[Manifest], now: datetime, min_age: float) -> list[Instance]:
    """Live owned instances older than ``min_age`` that no NodeClaim carries or is about to carry (pure).

    An instance tagged with the name of a live NodeClaim that has no providerID yet is that claim's
    launch, not recorded before a crash: the next launch attempt adopts it, so it is not collected.
    """
    referenced = {(c.get("status") or {}).get("providerID") for c in nodeclaims}
    adoptable = {
        c["metadata"]["name"]
        for c in nodeclaims
        if not (c.get("status") or {}).get("providerID") and not c["metadata"].get("deletionTimestamp")
    }
    found = []
    for instance in instances:
        if instance.provider_id in referenced or instance.state in _GONE_STATES:
            continue
        if (instance.nodeclaim or instance.tags.get(NODECLAIM_TAG, "")) in adoptable:
            continue
        if instance.launched_at is not None and now - instance.launched_at < timedelta(seconds=min_age):
            continue
        found.append(instance)
    return sorted(found, key=lambda i: i.provider_id)


class GarbageCollector:
    def __init__(self, ctx: ControllerContext, store: StateStore) -> None:
        self.ctx = ctx
        self.store = store
        self.passes = 0

    async def run(self) -> None:
        while True:
            async with self.ctx.reconciling():
                await self.collect_once()
            timings = self.ctx.timings
            fast = self.passes < timings.gc_fast_passes
            await asyncio.sleep(timings.gc_fast_interval if fast else timings.gc_slow_interval)

    async def collect_once(self) -> CollectionResult:
        self.passes += 1
        result = CollectionResult()
        instances = await self.ctx.cloud.list()
        nodeclaims = self.store.nodeclaims()  # read after the instances (see the module docstring)
        now = self.ctx.now()
        for instance in orphaned(instances, nodeclaims, now, self.ctx.timings.gc_min_age):
            await self._terminate_orphan(instance, result)
        live = {i.provider_id for i in instances if i.state not in _GONE_STATES}
        for claim in nodeclaims:
            provider_id = (claim.get("status") or {}).get("providerID")
            if not provider_id or provider_id in live or claim["metadata"].get("deletionTimestamp"):
                continue
            if not is_true(claim, "Launched"):
                continue
            await self._delete_if_gone(claim, provider_id, result)
        return result

    async def _terminate_orphan(self, instance: Instance, result: CollectionResult) -> None:
        try:
            await self.ctx.cloud.delete(instance.provider_id)
        except InstanceNotFoundError:
            return
        result.instances.append(instance.provider_id)
        log.info("garbage collecting orphaned instance", **{
            "provider-id": instance.provider_id, "instance-type": instance.instance_type,
            "nodeclaim-tag": instance.nodeclaim or instance.tags.get(NODECLAIM_TAG, ""),
        })
        for node in self.store.nodes():
            if (node.get("spec") or {}).get("providerID") != instance.provider_id:
                continue
            name = node["metadata"]["name"]
            await self.ctx.event(node, "Warning", "OrphanedInstance",
                                 f"instance {instance.provider_id} had no NodeClaim and was terminated")
            try:
                # Deleted first: if releasing our finalizer fails (a conflict that outlasts the retries), the
                # termination controller finalizes the deleting Node on its next pass.
                await self.ctx.kube.delete(NODE, name)
                await remove_finalizer(self.ctx.kube, NODE, name, wk.TERMINATION_FINALIZER, current=node)
            except NotFoundError:
                continue
            except ApiError as err:
                log.warning("releasing orphaned node failed; finalized later", Node=ref(name), error=str(err))
                continue
            result.nodes.append(name)
            log.info("deleted node", Node=ref(name), reason="orphaned instance")

    async def _delete_if_gone(self, claim: Manifest, provider_id: str, result: CollectionResult) -> None:
        try:
            instance = await self.ctx.cloud.get(provider_id)
            if instance.state not in _GONE_STATES:
                return
        except InstanceNotFoundError:
            pass
        name = claim["metadata"]["name"]
        try:
            await self.ctx.kube.delete(NODECLAIM, name)
        except NotFoundError:
            return
        except ApiError as err:
            log.warning("deleting nodeclaim failed; retrying next pass", NodeClaim=ref(name), error=str(err))
            return
        result.nodeclaims.append(name)
        labels = (claim.get("metadata") or {}).get("labels") or {}
        self.ctx.metrics.nodeclaims_disrupted.labels(reason="garbage_collected", nodepool=labels.get(wk.NODEPOOL, ""),
                                                     capacity_type=labels.get(wk.CAPACITY_TYPE, "")).inc()
        log.info("deleting nodeclaim, its instance no longer exists", NodeClaim=ref(name),
                 **{"provider-id": provider_id})
        await self.ctx.event(claim, "Warning", "InstanceTerminated",
                             f"instance {provider_id} no longer exists; deleting the NodeClaim")
