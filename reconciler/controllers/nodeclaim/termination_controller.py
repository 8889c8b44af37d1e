"""Termination finalizers: a deleting NodeClaim is drained and its instance deleted before it goes.

NodeClaims: every NodeClaim with a deletionTimestamp and the
``karpenter.sh/termination`` finalizer is stepped through the shared
``Terminator`` (taint, tiered eviction through the Eviction API, forced
deletion at the terminationGracePeriod deadline, instance termination, a look
at the instance every 5 s until the cloud reports it gone, then finalizer
release) until it reports done. A drain held up by refused or failed evictions
(a PDB's 429, a 500 for a pod under two PDBs, a dropped connection) is stepped
again after Karpenter's eviction backoff (100 ms doubling to 10 s, with jitter);
a step that fails outright (any error of any write) after the controller
backoff (1 s doubling to 1 min, ``workers.Workers``). The claim is read from the
informer cache, as Karpenter's controllers read it.

Nodes: deleting a Node that belongs to a NodeClaim deletes the NodeClaim (its
finalizer then does the work); a Node with our finalizer and no NodeClaim just
loses the finalizer.
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta
from typing import Any

from reconciler.controllers.nodeclaim.termination_cache_reads import StoreReads
from reconciler.controllers.runtime.backoff import EVICTION_BACKOFF, Backoffs
from reconciler.controllers.runtime.context import ControllerContext, ControllerLog, Wakeup, ref
from reconciler.controllers.runtime.workers import Workers, wait_time
from reconciler.kube.api import NODE, NODECLAIM, ApiError, NotFoundError
from reconciler.kube.edits import remove_finalizer
from reconciler.lifecycle.termination import TerminationStep, Terminator
from reconciler.model import labels as wk
from reconciler.model.meta import parse_time
from reconciler.state.store import StateStore

log = ControllerLog("nodeclaim.termination")


def _finalizing(manifest: dict[str, Any]) -> bool:
    metadata = manifest.get("metadata") or {}
    return bool(metadata.get("deletionTimestamp")) and wk.TERMINATION_FINALIZER in (metadata.get("finalizers") or [])


class TerminationController:
    def __init__(self, ctx: ControllerContext, store: StateStore) -> None:
        self.ctx = ctx
        self.store = store
        self.terminator = Terminator(ctx.kube, ctx.cloud, StoreReads(store),
                                     min_drain=timedelta(seconds=ctx.timings.min_drain_time))
        self.wake = Wakeup()
        self.workers = Workers("nodeclaim.termination", on_done=self.wake.set, clock=ctx.clock.monotonic)
        self.drains = Backoffs(EVICTION_BACKOFF, ctx.clock.monotonic)  # drains held up by evictions
        self._node_failures = Backoffs(self.workers.backoffs.policy, ctx.clock.monotonic)
        store.subscribe(self._on_change)

    def _on_change(self, kind: str, manifest: dict[str, Any], deleted: bool) -> None:
        if kind in ("NodeClaim", "Node") and not deleted and _finalizing(manifest):
            self.wake.set()

    async def run(self) -> None:
        try:
            while True:
                async with self.ctx.reconciling():
                    busy = await self.reconcile_all()
                await self.wake.wait(wait_time(self.ctx.timings.termination_requeue if busy else None,
                                               self.workers.retry_in(), self.drains.next_due(),
                                               self._node_failures.next_due()))
        finally:
            await self.workers.cancel()

    async def reconcile_all(self) -> bool:
        """Start termination steps that are due; True while anything is still terminating."""
        active = False
        for node in self.store.nodes():
            if _finalizing(node):
                active = True
                name = node["metadata"]["name"]
                if not self._node_failures.ready(name):
                    continue
                try:
                    await self._node_deleted(node)
                    self._node_failures.forget(name)
                except ApiError as err:  # e.g. still conflicting after the retries: backed off, then again
                    attempt, delay = self._node_failures.failed(name)
                    log.warning("finalizing deleted node failed; backing off", Node=ref(name), error=str(err),
                                attempt=attempt, retryIn=round(delay, 3))
        for claim in self.store.nodeclaims():
            if not _finalizing(claim):
                continue
            active = True
            name = claim["metadata"]["name"]
            if not self.drains.ready(name):
                continue
            if not self.workers.busy(name) and not self.ctx.locks.busy(name):
                self.workers.start(name, lambda name=name: self.step(name))
        return active

    async def _node_deleted(self, node: dict[str, Any]) -> None:
        claim = self.store.nodeclaim_for_node(node)
        name = node["metadata"]["name"]
        if claim is not None:
            if not claim["metadata"].get("deletionTimestamp"):
                log.info("deleting nodeclaim of deleted node", Node=ref(name), NodeClaim=ref(claim["metadata"]["name"]))
                with contextlib.suppress(NotFoundError):
                    await self.ctx.kube.delete(NODECLAIM, claim["metadata"]["name"])
            return
        if await remove_finalizer(self.ctx.kube, NODE, name, wk.TERMINATION_FINALIZER, current=node):
            log.info("deleted node", Node=ref(name))

    async def step(self, name: str) -> TerminationStep | None:
        async with self.ctx.locks.holding([name]) as held:
            if not held:
                return None
            claim = self.store.get("NodeClaim", name)  # the informer's copy (writes are resourceVersion-guarded)
            if claim is None or not _finalizing(claim):
                return None
            now = self.ctx.now()
            node = self.store.node_for(claim)
            newly_tainted = node is not None and not any(
                t.get("key") == wk.DISRUPTED_TAINT_KEY for t in (node.get("spec") or {}).get("taints") or []
            )
            # Any error (a 409 that outlasted the conflict retries too) is the workers' to back off and log.
            result = await self.terminator.step(claim, now)
            if result.stored is not None and result.stored is not claim and not result.finished:
                self.store.write_through(result.stored)  # the next step starts from what this one wrote
            if newly_tainted and node is not None:
                log.info("tainted node", Node=ref(node["metadata"]["name"]), NodeClaim=ref(name),
                         taint=f"{wk.DISRUPTED_TAINT_KEY}:NoSchedule")
            await self._report(claim, node, result, now)
            return result

    async def _report(self, claim: dict[str, Any], node: dict[str, Any] | None, result: TerminationStep,
                      now: datetime) -> None:
        name = claim["metadata"]["name"]
        metrics = self.ctx.metrics
        drain_reason = disruption_reason(claim)
        for key in result.evicted:
            metrics.pods_eviction_requests.labels(code="200").inc()
            metrics.pods_drained.labels(reason=drain_reason).inc()
            log.info("evicted pod", Pod=ref(key), NodeClaim=ref(name))
            await self.ctx.event(self.store.get("Pod", key), "Normal", "Evicted", "Evicted pod")
        for key in result.force_deleted:
            log.info("deleted pod at the termination grace period deadline", Pod=ref(key), NodeClaim=ref(name),
                     gracePeriodSeconds=result.grace_periods.get(key))
            await self.ctx.event(self.store.get("Pod", key), "Warning", "Disrupted",
                                 "Deleting the pod: the node's terminationGracePeriod has elapsed")
        if result.awaiting_volumes:
            log.info("waiting on volume attachments", NodeClaim=ref(name), volumeattachments=result.awaiting_volumes)
            await self.ctx.event(node or claim, "Warning", "AwaitingVolumeDetachment",
                                 f"Awaiting deletion of {len(result.awaiting_volumes)} VolumeAttachments bound to node",
                                 dedupe=self.ctx.timings.event_dedupe)
        if result.volumes_left_attached:
            log.info("terminating with volumes attached: the termination grace period has elapsed",
                     NodeClaim=ref(name), volumeattachments=result.volumes_left_attached)
        for code in result.eviction_errors.values():
            metrics.pods_eviction_requests.labels(code=str(code)).inc()
        labels = (claim.get("metadata") or {}).get("labels") or {}
        pool = labels.get(wk.NODEPOOL, "")
        if result.drained and node is not None:
            metrics.nodes_drained.labels(nodepool=pool).inc()
        if result.instance_termination_seconds is not None:
            metrics.nodeclaims_instance_termination_duration.labels(nodepool=pool).observe(
                result.instance_termination_seconds)
        if result.finished:
            self._forget(name)
            metrics.nodeclaims_terminated.labels(
                nodepool=pool, capacity_type=labels.get(wk.CAPACITY_TYPE, ""), zone=labels.get(wk.ZONE, "")
            ).inc()
            deleted_at = _time(claim, "deletionTimestamp")
            if deleted_at is not None:
                metrics.nodeclaims_termination_duration.labels(nodepool=pool).observe(
                    max(0.0, (now - deleted_at).total_seconds())
                )
            if node is not None:
                self._record_node(node, pool, deleted_at, now)
                log.info("deleted node", Node=ref(node["metadata"]["name"]), NodeClaim=ref(name))
            log.info("deleted nodeclaim", NodeClaim=ref(name),
                     **{"provider-id": (claim.get("status") or {}).get("providerID", "")})
            await self.ctx.event(claim, "Normal", "Terminated", "instance deleted and finalizer released")
            return
        if result.blocked and not result.progressed:
            runs, delay = self.drains.failed(name)
            if runs == 1 or runs % 10 == 0:
                log.info("waiting on drain", NodeClaim=ref(name), blocked=result.blocked[:5], pods=len(result.blocked),
                         attempt=runs, retryIn=round(delay, 3))
                await self.ctx.event(node or claim, "Warning", "FailedDraining",
                                     f"Failed to drain node, {len(result.blocked)} pods are waiting to be evicted")
        elif result.awaiting_instance:
            # Terminate was asked for; the cloud still reports the instance: look again after a while (Karpenter: 5 s).
            self.drains.defer(name, self.ctx.timings.instance_termination_poll)
            if result.instance_deleted:
                log.info("terminating instance; waiting until it is gone", NodeClaim=ref(name),
                         **{"provider-id": (claim.get("status") or {}).get("providerID", "")})
        else:
            self.drains.forget(name)

    def _record_node(self, node: dict[str, Any], pool: str, claim_deleted: datetime | None, now: datetime) -> None:
        """The Node is gone: counted, and how long it took since its deletion was asked for (the NodeClaim's,
        when the Node itself was only deleted at the end) and how long it lived."""
        metrics = self.ctx.metrics
        node_labels = (node.get("metadata") or {}).get("labels") or {}
        metrics.nodes_terminated.labels(nodepool=pool, zone=node_labels.get(wk.ZONE, "")).inc()
        asked = _time(node, "deletionTimestamp") or claim_deleted
        if asked is not None:
            metrics.nodes_termination_duration.observe(max(0.0, (now - asked).total_seconds()), {"nodepool": pool})
        created = _time(node, "creationTimestamp")
        if created is not None:
            metrics.nodes_lifetime_duration.labels(nodepool=pool).observe(max(0.0, (now - created).total_seconds()))

    def _forget(self, name: str) -> None:
        self.drains.forget(name)


def _time(manifest: dict[str, Any], key: str) -> datetime | None:
    return parse_time((manifest.get("metadata") or {}).get(key), path=f"metadata.{key}")


def disruption_reason(nodeclaim: dict[str, Any]) -> str:
    """Why the claim's pods are drained (Karpenter's pods_drained_total reason): its DisruptionReason, else a
    forceful termination (a deletion no disruption method asked for)."""
    for condition in (nodeclaim.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "DisruptionReason" and condition.get("status") == "True":
            return str(condition.get("reason") or "")
    return "Forceful Termination"
