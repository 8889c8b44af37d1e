"""Provisioner: batch unschedulable pods, plan NodeClaims with the pure engine, create them, nominate.

Triggers (Karpenter's): a provisionable pod appears or changes, a NodeClaim
starts deleting or goes away (its pods need a home), a node gets the disrupted
taint. The batch closes ``BATCH_IDLE_DURATION`` after the last new pod or
``BATCH_MAX_DURATION`` after it opened. Before planning, the cache must be
synced and every NodeClaim launched, so a claim still in flight is counted as
capacity and never planned twice. While pods stay pending the pass is retried
every ``provisioner_recheck`` seconds even without new events (e.g. after a
launch failed for lack of capacity).

A NodeClaim that starts deleting is *reserved* (``KeyedLocks.reserve``) until a
pass has seen it deleting: the drain waits, so that pass plans one replacement
for all of its pods. Without it the drain can evict them first, and a pass that
runs while the ReplicaSet's new pods are only partly visible sizes a first
replacement for some of them, then a second one for the rest.

A pass creates its NodeClaims concurrently (at most ``CREATE_CONCURRENCY`` at once; Karpenter creates
them all in parallel), then tells each pod where it should schedule with a Nominated event, as Karpenter
does: at most once per pod per dedupe period, and all of them through one shared token bucket (5 per
second, bursts of 10), so a pass that places 500 pods writes a handful of events, not 500.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from reconciler.controllers.runtime.backoff import CONTROLLER_BACKOFF, Backoffs
from reconciler.controllers.runtime.context import (
    ControllerContext,
    ControllerLog,
    NameGenerator,
    Wakeup,
    ref,
    summarize,
)
from reconciler.kube.api import ApiError, ConflictError
from reconciler.kube.ratelimit import TokenBucket
from reconciler.lifecycle.nodepool_types import instance_types_by_nodepool
from reconciler.model import labels as wk
from reconciler.provisioning.batcher import Batcher
from reconciler.provisioning.provisioner import ProvisioningPlan, plan, pods_to_schedule
from reconciler.provisioning.zones import effective_zone
from reconciler.state.cluster import ClusterState
from reconciler.state.store import PodSchedulingTimes, StateStore

log = ControllerLog("provisioner")
CREATE_CONCURRENCY = 16
CREATES = "nodeclaim-creates"  # the one backoff key of failed provisioning passes
# Karpenter's PodNominationRateLimiter: flowcontrol.NewTokenBucketRateLimiter(5, 10), shared by every pod.
NOMINATION_QPS, NOMINATION_BURST = 5.0, 10


class Provisioner:
    def __init__(self, ctx: ControllerContext, store: StateStore, names: NameGenerator) -> None:
        self.ctx = ctx
        self.store = store
        self.names = names
        self.batcher = Batcher.from_settings(ctx.settings)
        self.wake = Wakeup()
        self.passes = 0
        self._first_seen: dict[str, float] = {}  # pod uid -> monotonic time it was first seen pending
        self._zones_reported: set[str] = set()  # zone label values of the last pass's pending-pod counts
        # Called with the pods a pass decided about (their provisioning metrics start counting then).
        self.on_decided: Callable[[list[str]], None] | None = None
        self._scheduling_id = ""
        self._reserved: set[str] = set()  # deleting NodeClaims whose drain waits for our next pass
        self._planned_deletions: set[str] = set()  # deleting NodeClaims (uid) some pass already saw
        self._nominations = TokenBucket(NOMINATION_QPS, NOMINATION_BURST, clock=ctx.clock.monotonic)
        # Rechecks after a pass whose NodeClaim creates failed wait out a backoff (no create storm).
        self._create_backoff = Backoffs(CONTROLLER_BACKOFF, ctx.clock.monotonic)
        store.subscribe(self._on_change)

    # -- triggers ------------------------------------------------------------------------------

    def _on_change(self, kind: str, manifest: dict[str, Any], deleted: bool) -> None:
        metadata = manifest.get("metadata") or {}
        uid = str(metadata.get("uid") or f"{kind}/{metadata.get('name')}")
        if kind == "Pod":
            key = f"{metadata.get('namespace') or 'default'}/{metadata.get('name')}"
            if deleted:
                self._first_seen.pop(uid, None)
                return
            pod = self.store.state.pods.get(key)
            if pod is not None and pod.is_provisionable():
                self._first_seen.setdefault(uid, self.ctx.clock.monotonic())
                if key not in self.store.pod_times:
                    self.store.pod_times[key] = PodSchedulingTimes(acked=self.ctx.now())
                self.trigger(uid)
        elif kind == "NodeClaim" and (deleted or metadata.get("deletionTimestamp")):
            if deleted:
                self._planned_deletions.discard(uid)
            else:
                self._hold_drain(uid, manifest)
            self.trigger(uid)
        elif kind == "Node" and any(
            t.get("key") == wk.DISRUPTED_TAINT_KEY for t in (manifest.get("spec") or {}).get("taints") or []
        ):
            self.trigger(uid)

    def _hold_drain(self, uid: str, claim: dict[str, Any]) -> None:
        """Keep the drain off a newly deleting claim with a node until a pass has planned for its pods."""
        if uid in self._planned_deletions or self.store.node_for(claim) is None:
            return
        name = str(claim["metadata"]["name"])
        self.ctx.locks.reserve(name, self.ctx.clock.monotonic() + self.ctx.timings.drain_hold)
        self._reserved.add(name)
        self._planned_deletions.add(uid)

    def trigger(self, uid: str) -> None:
        self.batcher.trigger(uid, self.ctx.now())
        self.wake.set()

    # -- loop ------------------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            await self.wake.wait(self._recheck_in() if self._has_work() else None)
            if not self.batcher.is_open:
                if not self._has_work():
                    continue
                self.trigger("recheck")
            await self._wait_for_batch()
            opened = self.batcher.opened_at
            self.batcher.close()
            if opened is not None:
                self.ctx.metrics.batch_window.observe(max(0.0, (self.ctx.now() - opened).total_seconds()))
            await self.wait_until_synced()
            async with self.ctx.reconciling():
                await self.provision_once()

    def _recheck_in(self) -> float:
        return max(self.ctx.timings.provisioner_recheck, self._create_backoff.next_due() or 0.0)

    def _has_work(self) -> bool:
        """Pending pods, or pods still on a node marked for deletion (a drain that cannot evict them yet):
        each recheck plans for them again, which renews the nomination of the node waiting to take them, so
        that node is not consolidated as empty while they are stuck (and then launched for again)."""
        state = self.store.state
        return bool(state.pending_pods()) or any(n.marked_for_deletion and n.pods for n in state.state_nodes())

    async def _wait_for_batch(self) -> None:
        while True:
            closes = self.batcher.closes_at()
            if closes is None:
                return
            remaining = (closes - self.ctx.now()).total_seconds()
            if remaining <= 0:
                return
            await self.wake.wait(remaining)

    async def wait_until_synced(self) -> None:
        """Until the cache is synced and no live NodeClaim is waiting for its instance (bounded)."""
        deadline = self.ctx.clock.monotonic() + self.ctx.timings.launch_timeout
        while self.ctx.clock.monotonic() < deadline:
            if self.store.synced and not self._unlaunched():
                return
            await asyncio.sleep(self.ctx.timings.sync_poll)
        log.warning("provisioning without a synced cluster state", unlaunched=self._unlaunched())

    def _unlaunched(self) -> list[str]:
        return [
            c["metadata"]["name"]
            for c in self.store.nodeclaims()
            if not (c.get("status") or {}).get("providerID") and not c["metadata"].get("deletionTimestamp")
        ]

    # -- one pass ----------------------------------------------------------------------------------

    async def provision_once(self) -> ProvisioningPlan:
        self.passes += 1
        now = self.ctx.now()
        self.store.forget_expired_nominations(now)
        covered = set(self._reserved)  # deleting claims this pass sees, taken with the snapshot
        state = self.store.snapshot()
        try:
            return await self._provision(state, now)
        finally:
            self._reserved -= covered
            self.ctx.locks.unreserve(covered)

    async def _provision(self, state: ClusterState, now: datetime) -> ProvisioningPlan:
        pending, moving = pods_to_schedule(state, now)
        if not pending and not moving:
            return ProvisioningPlan()
        types = await instance_types_by_nodepool(self.ctx.cloud, state, self.ctx.settings)
        result, duration = await self._solve(state, types, now, len(pending) + len(moving))
        self.ctx.metrics.batch_size.observe(len(pending) + len(moving))
        self._export_results(state, pending, result)
        keys = [p.key for p in pending] + [p.key for p in moving]
        log.info("found provisionable pod(s)", Pods=summarize(keys), pods=len(keys), duration=f"{duration:.3f}s")
        self._observe_decisions(pending)
        self._record_times(keys, result, self.ctx.now())
        nominations = self._nominate_existing(result, now)
        if result.nodeclaims:
            log.info(
                "computed new nodeclaim(s) to fit pod(s)",
                nodeclaims=len(result.nodeclaims),
                pods=sum(len(c.pods) for c in result.nodeclaims),
            )
        limit = asyncio.Semaphore(CREATE_CONCURRENCY)

        async def create(planned: Any) -> bool:
            async with limit:
                return await self._create(planned, now)

        created = await asyncio.gather(*(create(planned) for planned in result.nodeclaims))
        if all(created):
            self._create_backoff.forget(CREATES)
        else:
            failures, delay = self._create_backoff.failed(CREATES)
            log.info("nodeclaim creation failed; rechecking after a backoff", failures=failures,
                     retryIn=round(delay, 3))
        for planned, ok in zip(result.nodeclaims, created, strict=True):
            if ok:
                nominations.extend((key, f"nodeclaim/{planned.name}") for key in planned.pods)
        for key, target in nominations:
            await self.ctx.event(self._pod(key), "Normal", "Nominated", f"Pod should schedule on: {target}",
                                 dedupe=self.ctx.timings.event_dedupe, dedupe_key="Nominated",
                                 limiter=self._nominations.try_accept)
        await self._report_pending(result)
        return result

    async def _create(self, planned: Any, now: datetime) -> bool:
        """Create one planned NodeClaim; True when it exists now."""
        manifest = planned.manifest()
        try:
            created = await self.ctx.kube.create(manifest)
        except ConflictError:
            log.warning("nodeclaim name already taken; it is planned again next pass", NodeClaim=ref(planned.name))
            return False
        except ApiError as err:
            log.error("creating nodeclaim failed", NodeClaim=ref(planned.name), error=str(err))
            pool = self.store.get("NodePool", planned.nodepool)
            await self.ctx.event(pool, "Warning", "FailedCreatingNodeClaim", f"creating {planned.name}: {err.message}")
            return False
        self.store.write_through(created)
        until = now + self.ctx.timings.nomination_window(self.ctx.settings)
        self.store.nominate(planned.name, until)
        requests = ((manifest.get("spec") or {}).get("resources") or {}).get("requests") or {}
        log.info(
            "created nodeclaim",
            NodePool=ref(planned.nodepool),
            NodeClaim=ref(planned.name),
            requests=requests,
            pods=len(planned.pods),
            **{"instance-types": summarize(list(planned.instance_type_options))},
        )
        self.ctx.metrics.nodeclaims_created.labels(
            reason="provisioned", nodepool=planned.nodepool, min_values_relaxed=min_values_relaxed(manifest)).inc()
        await self.ctx.event(
            created, "Normal", "Created",
            f"created for {len(planned.pods)} pod(s); instance types {summarize(list(planned.instance_type_options))}",
        )
        return True

    def _nominate_existing(self, result: ProvisioningPlan, now: datetime) -> list[tuple[str, str]]:
        """Pods that fit existing or in-flight capacity: protect those nodes from disruption for a while.
        Returns the (pod, target) nominations to announce."""
        if not result.existing:
            return []
        until = now + self.ctx.timings.nomination_window(self.ctx.settings)
        targets = sorted(set(result.existing.values()))
        for target in targets:
            self.store.nominate(target, until)
        log.info(f"computed {len(targets)} unready node(s) will fit {len(result.existing)} pod(s)",
                 nodes=len(targets), pods=len(result.existing))
        refs = {target: self._target_ref(target) for target in targets}
        return [(key, refs[target]) for key, target in sorted(result.existing.items())]

    def _target_ref(self, name: str) -> str:
        """Karpenter's ``nodeclaim/<claim>, node/<node>`` for a node or a NodeClaim still in flight."""
        node = self.store.get("Node", name)
        if node is None:
            return f"nodeclaim/{name}"
        claim = self.store.nodeclaim_for_node(node)
        return f"nodeclaim/{claim['metadata']['name']}, node/{name}" if claim is not None else f"node/{name}"

    async def _report_pending(self, result: ProvisioningPlan) -> None:
        """The scheduler's concrete reason for every pod it could not place, once per reason and period."""
        dedupe = self.ctx.timings.scheduling_event_dedupe
        for key, reason in result.pending.items():
            log.info("could not schedule pod", Pod=ref(key), error=reason)
            await self.ctx.event(self._pod(key), "Warning", "FailedScheduling", f"Failed to schedule pod, {reason}",
                                 dedupe=dedupe)
        for event in result.events:
            kind, _, key = str(event.get("object", "")).partition("/")
            if kind != "Pod" or key in result.pending:
                continue
            await self.ctx.event(self._pod(key), "Warning", event.get("reason", "FailedScheduling"),
                                 event.get("message", ""), dedupe=dedupe)

    async def _solve(self, state: ClusterState, types: Mapping[str, Any], now: datetime,
                     queued: int) -> tuple[ProvisioningPlan, float]:
        """One scheduling simulation, with Karpenter's scheduler metrics (queue depth and unfinished work per
        ``scheduling_id``, duration)."""
        metrics = self.ctx.metrics
        if self._scheduling_id:  # the previous pass's series go, as Karpenter resets them per solve
            metrics.scheduling_queue_depth.remove("provisioner", self._scheduling_id)
        self._scheduling_id = scheduling_id = str(uuid.uuid4())
        metrics.scheduling_queue_depth.labels(controller="provisioner", scheduling_id=scheduling_id).set(queued)
        started = self.ctx.clock.monotonic()
        unfinished = metrics.scheduling_unfinished_work.labels(controller="provisioner", scheduling_id=scheduling_id)
        unfinished.set_function(lambda: self.ctx.clock.monotonic() - started)
        try:
            result = await asyncio.to_thread(plan, state, types, self.ctx.settings, now, self.names)
        finally:
            metrics.scheduling_unfinished_work.remove("provisioner", scheduling_id)
        duration = self.ctx.clock.monotonic() - started
        metrics.scheduling_duration.labels(controller="provisioner").observe(duration)
        metrics.scheduling_queue_depth.labels(controller="provisioner", scheduling_id=scheduling_id).set(0)
        return result, duration

    def _export_results(self, state: ClusterState, pending: list[Any], result: ProvisioningPlan) -> None:
        metrics = self.ctx.metrics
        metrics.unschedulable_pods.labels(controller="provisioner").set(len(result.unschedulable))
        metrics.ignored_pods.set(len(result.ignored))
        zones = Counter(effective_zone(pod, state) for pod in pending)
        for zone in self._zones_reported - set(zones):
            metrics.pending_pods_by_zone.remove("provisioner", zone)
        for zone, count in zones.items():
            metrics.pending_pods_by_zone.labels(controller="provisioner", zone=zone).set(count)
        self._zones_reported = set(zones)

    def _record_times(self, keys: list[str], result: ProvisioningPlan, now: datetime) -> None:
        """First decision and first home of each pod, for its startup and bind metrics."""
        placed = set(result.existing) | {key for claim in result.nodeclaims for key in claim.pods}
        for key in keys:
            times = self.store.pod_times.setdefault(key, PodSchedulingTimes(acked=now))
            if times.decided is None:
                times.decided = now
            if key in placed and times.scheduled is None:
                times.scheduled = now
        if self.on_decided is not None:
            self.on_decided(keys)

    def _observe_decisions(self, pods: list[Any]) -> None:
        now = self.ctx.clock.monotonic()
        for pod in pods:
            seen = self._first_seen.pop(pod.uid, None) if getattr(pod, "uid", "") else None
            if seen is not None:
                self.ctx.metrics.pods_scheduling_decision_duration.observe(max(0.0, now - seen))

    def _pod(self, key: str) -> dict[str, Any] | None:
        return self.store.get("Pod", key)



def min_values_relaxed(nodeclaim: Mapping[str, Any]) -> str:
    """The claim's ``karpenter.sh/nodeclaim-min-values-relaxed`` annotation, "false" when it has none."""
    return str(((nodeclaim.get("metadata") or {}).get("annotations") or {}).get(wk.MIN_VALUES_RELAXED, "false"))
