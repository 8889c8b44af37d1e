"""NodeClaim termination: taint, drain through the Eviction API, wait for volumes, delete the instance, release.

As Karpenter's termination controller: the drain evicts in tiers and lasts at least
``MIN_DRAIN_TIME`` (5 s, from when this terminator first saw the node tainted) so a pod bound just
before the taint landed is drained too; then the instance deletion waits until the VolumeAttachments
of drained pods are gone (their volumes can attach elsewhere) unless the terminationGracePeriod
deadline has passed. Pods whose own terminationGracePeriodSeconds would outlast that deadline are
deleted with ``gracePeriodSeconds`` = the time left, so they are gone before the instance is.

The NodeClaim (and its Node) keep their finalizers until the cloud reports the instance gone: after
the terminate request is accepted the instance is looked up again (``CloudProvider.get``), and while it
still exists (AWS: ``shutting-down``) the claim stays, its ``InstanceTerminating`` condition True, and the
next step asks again (``TerminationStep.awaiting_instance``). When the cloud no longer knows it, the step
reports how long that took since ``InstanceTerminating`` turned True (Karpenter's
``karpenter_nodeclaims_instance_termination_duration_seconds``) and releases the finalizers.

``Terminator.step`` does as much as it can right now and returns; callers (the live finalizer
controller, the simulator) call it again later (``TerminationStep.drain_ends_at`` says when the
minimum drain time is over). Every step is idempotent, so a crash at any point is resumed by the
next leader (which starts the minimum drain time anew: a longer drain, never a shorter one).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from reconciler.cloud.types import CloudProvider, InstanceNotFoundError
from reconciler.kube.api import (
    NODE,
    NODECLAIM,
    POD,
    ApiError,
    ConflictError,
    KubeAPI,
    Manifest,
    NotFoundError,
    TooManyRequestsError,
)
from reconciler.kube.edits import edit_node, remove_finalizer
from reconciler.kube.leadership import NotLeading
from reconciler.lifecycle.conditions import mark_termination
from reconciler.lifecycle.drain import (
    MIN_DRAIN_TIME,
    DrainPlan,
    blocking_volume_attachments,
    drain_finished,
    plan_drain,
    termination_deadline,
    undrained_claims,
    wait_for_volumes,
)
from reconciler.lifecycle.reads import ApiReads, TerminationReads
from reconciler.model import labels as wk
from reconciler.model.conditions import (
    DRAINED,
    INSTANCE_TERMINATING,
    VOLUMES_DETACHED,
    condition_of,
    is_true,
    transition_time,
)
from reconciler.model.pdb import PdbLimits

DISRUPTED_TAINT = {"key": wk.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}


@dataclass(slots=True)
class TerminationStep:
    nodeclaim: str
    evicted: list[str] = field(default_factory=list)
    force_deleted: list[str] = field(default_factory=list)
    grace_periods: dict[str, int] = field(default_factory=dict)  # force-deleted pod -> gracePeriodSeconds sent
    blocked: list[str] = field(default_factory=list)
    # Evictions the API server did not accept, pod -> HTTP status (429: a budget said no; 500: e.g. a pod under
    # two budgets; 503: no answer). The drain goes on with the other pods; these wait for the eviction backoff.
    eviction_errors: dict[str, int] = field(default_factory=dict)
    # Pods not drained (they tolerate the disrupted taint) that die with the Node, as pod GC would delete them.
    deleted_with_node: list[str] = field(default_factory=list)
    # Nothing left to evict, but the minimum drain time runs until then: come back at that time.
    drain_ends_at: datetime | None = None
    # VolumeAttachments of drained pods the instance deletion waits for (names).
    awaiting_volumes: list[str] = field(default_factory=list)
    # VolumeAttachments still there when the terminationGracePeriod deadline passed: not waited for.
    volumes_left_attached: list[str] = field(default_factory=list)
    instance_deleted: bool = False  # this step asked the cloud to terminate the instance
    # The instance was asked to terminate and the cloud still reports it (e.g. shutting-down): ask again later.
    awaiting_instance: bool = False
    # Set when the cloud reports the instance gone: seconds since InstanceTerminating turned True.
    instance_termination_seconds: float | None = None
    drained: bool = False  # this step found the node drained
    stored: Manifest | None = None  # the claim as this step last wrote it (None: not written)
    finished: bool = False

    @property
    def progressed(self) -> bool:
        return bool(self.evicted or self.force_deleted or self.instance_deleted or self.finished)


class Terminator:
    """``reads`` says where the node's pods, budgets and volume attachments come from: the API server by
    default, the informer cache in the live controller. ``min_drain`` is Karpenter's 5 s (tests shrink it)."""

    def __init__(
        self, kube: KubeAPI, cloud: CloudProvider, reads: TerminationReads | None = None, *,
        min_drain: timedelta = MIN_DRAIN_TIME,
    ) -> None:
        self._kube = kube
        self._cloud = cloud
        self._reads: TerminationReads = reads or ApiReads(kube)
        self.min_drain = min_drain
        self._drain_started: dict[str, datetime] = {}  # NodeClaim uid -> when its drain began

    async def step(self, nodeclaim: Manifest, now: datetime) -> TerminationStep:
        name = nodeclaim["metadata"]["name"]
        result = TerminationStep(name)
        node = await self._reads.node_of(nodeclaim)
        if is_true(nodeclaim, INSTANCE_TERMINATING):
            pass  # drained (or past its deadline) and told to terminate already: only the instance is awaited
        elif node is not None and await self._machine_is_gone(nodeclaim, node):
            # Nothing runs there any more: draining would wait on pods that are already dead (a PDB could
            # hold them "Running" forever). As Karpenter (and the node lifecycle controller): a NotReady
            # node whose instance the cloud no longer knows is released without a drain.
            pass
        elif node is not None:
            node = await self._taint(node)
            if not await self._drain(nodeclaim, node, now, result):
                result.stored = await mark_termination(self._kube, nodeclaim, DRAINED, "Unknown", now, "Draining",
                                                          only_if_absent=True)
                return result
            if (condition_of(nodeclaim, DRAINED) or {}).get("status") != "True":
                nodeclaim = await mark_termination(self._kube, nodeclaim, DRAINED, "True", now)
                result.drained = True  # counted once, when the condition turns True
            if not await self._volumes_detached(nodeclaim, node, now, result):
                result.stored = await mark_termination(self._kube, nodeclaim, VOLUMES_DETACHED, "Unknown", now,
                                                          "AwaitingVolumeDetachment")
                return result
            if result.volumes_left_attached:
                nodeclaim = await mark_termination(self._kube, nodeclaim, VOLUMES_DETACHED, "False", now,
                                                   "TerminationGracePeriodElapsed")
            else:
                nodeclaim = await mark_termination(self._kube, nodeclaim, VOLUMES_DETACHED, "True", now)
        gone, nodeclaim = await self._terminate_instance(nodeclaim, now, result)
        result.stored = nodeclaim
        if not gone:
            result.awaiting_instance = True
            return result
        if node is not None:
            result.deleted_with_node = await self._release_node(node)
        await self._release(NODECLAIM, name, None, current=nodeclaim)  # as just written (a stale copy: 409, read)
        self._drain_started.pop(_uid(nodeclaim), None)
        result.finished = True
        return result

    async def _drain(self, nodeclaim: Manifest, node: Manifest, now: datetime, result: TerminationStep) -> bool:
        """Evict what can go now; True once nothing is left to wait for and the minimum drain time is over."""
        started = self._drain_started.setdefault(_uid(nodeclaim), now)
        on_node = await self._reads.pods_on(node["metadata"]["name"])
        pdbs, pods = await self._reads.disruption_budgets()
        plan = plan_drain(on_node, PdbLimits.from_manifests(pdbs, pods), now, deadline=termination_deadline(nodeclaim))
        await self._execute_drain(plan, result)
        if not plan.complete:
            return False
        if not drain_finished(plan, started, now, self.min_drain):
            result.drain_ends_at = started + self.min_drain
            return False
        return True

    async def _volumes_detached(
        self, nodeclaim: Manifest, node: Manifest, now: datetime, result: TerminationStep
    ) -> bool:
        """True when no VolumeAttachment of a drained pod is left on the node, or the deadline has passed.

        Volumes of pods the drain leaves alone (they tolerate the disrupted taint, static pods...) never
        detach while the node runs, so they are not waited for; neither are attachments without a PV."""
        node_name = node["metadata"]["name"]
        attachments = await self._reads.volume_attachments_on(node_name)
        if not attachments:
            return True
        exempt = []
        for key in sorted(undrained_claims(await self._reads.pods_on(node_name), now)):
            namespace, _, claim = key.partition("/")
            volume = await self._reads.volume_of_claim(namespace, claim)
            if volume:
                exempt.append(volume)
        blocking = blocking_volume_attachments(attachments, exempt)
        if not blocking:
            return True
        if wait_for_volumes(termination_deadline(nodeclaim), now):
            result.awaiting_volumes = blocking
            return False
        result.volumes_left_attached = blocking
        return True

    async def _machine_is_gone(self, nodeclaim: Manifest, node: Manifest) -> bool:
        if _node_ready(node):
            return False  # a Ready kubelet still runs, whatever the cloud says
        provider_id = (nodeclaim.get("status") or {}).get("providerID")
        if not provider_id:
            return False
        try:
            await self._cloud.get(provider_id)
        except InstanceNotFoundError:
            return True
        return False

    async def _taint(self, node: Manifest) -> Manifest:
        """Taint disrupted and label exclude-from-load-balancers; returns the node as it now is."""
        taints = (node.get("spec") or {}).get("taints") or []
        labels = (node.get("metadata") or {}).get("labels") or {}
        tainted = any(t.get("key") == wk.DISRUPTED_TAINT_KEY for t in taints)
        if tainted and labels.get(wk.EXCLUDE_FROM_LB) == "karpenter":
            return node

        def edit(current: Manifest) -> Manifest:
            spec = current.setdefault("spec", {})
            if not any(t.get("key") == wk.DISRUPTED_TAINT_KEY for t in spec.get("taints") or []):
                spec["taints"] = [*(spec.get("taints") or []), dict(DISRUPTED_TAINT)]
            current["metadata"]["labels"] = {**(current["metadata"].get("labels") or {}),
                                             wk.EXCLUDE_FROM_LB: "karpenter"}
            return current

        try:
            return await edit_node(self._kube, node["metadata"]["name"], edit, current=node)
        except NotFoundError:
            return node

    async def _execute_drain(self, plan: DrainPlan, result: TerminationStep) -> None:
        for key in plan.evict:
            namespace, _, name = key.partition("/")
            try:
                await self._kube.evict(name, namespace)
                result.evicted.append(key)
            except (NotFoundError, ConflictError):
                continue  # gone, or a new pod of that name (Karpenter's 404 / 409: nothing left to evict)
            except NotLeading:
                raise
            except ApiError as err:  # as Karpenter's eviction queue: this pod waits, the others go on
                result.eviction_errors[key] = err.status
                verdict = "refused" if isinstance(err, TooManyRequestsError) else f"failed ({err.status})"
                result.blocked.append(f"eviction of {key} {verdict}: {err.message}")
        for forced in plan.force_delete:
            namespace, _, name = forced.pod.partition("/")
            try:
                # The pod's own grace period would outlast the node: give it only what is left.
                await self._kube.delete(POD, name, namespace, grace_period_seconds=forced.grace_seconds)
                result.force_deleted.append(forced.pod)
                result.grace_periods[forced.pod] = forced.grace_seconds
            except NotFoundError:
                continue
        result.blocked.extend(f"{pod}: {why}" for pod, why in plan.blocked.items())

    async def _terminate_instance(self, nodeclaim: Manifest, now: datetime,
                                  result: TerminationStep) -> tuple[bool, Manifest]:
        """Ask the cloud to terminate the claim's instance (idempotent) and look it up again: True once the
        cloud no longer knows it, with the claim as stored afterwards. ``InstanceTerminating`` turns True at the
        first request and keeps its time, so the duration reported when the instance is gone counts from then."""
        provider_id = (nodeclaim.get("status") or {}).get("providerID")
        if not provider_id:
            return True, nodeclaim  # never launched: nothing to wait for
        gone = False
        try:
            await self._cloud.delete(provider_id)
            result.instance_deleted = not is_true(nodeclaim, INSTANCE_TERMINATING)
        except InstanceNotFoundError:
            gone = True
        if not gone:
            try:
                await self._cloud.get(provider_id)  # re-checked, never assumed from an accepted request
            except InstanceNotFoundError:
                gone = True
        started = transition_time(nodeclaim, INSTANCE_TERMINATING) if is_true(
            nodeclaim, INSTANCE_TERMINATING) else None
        if started is None:
            nodeclaim = await mark_termination(self._kube, nodeclaim, INSTANCE_TERMINATING, "True", now)
            started = now
        if gone:
            result.instance_termination_seconds = max(0.0, (now - started).total_seconds())
        return gone, nodeclaim

    async def _release_node(self, node: Manifest) -> list[str]:
        """The instance is gone: its pods die with it (returned), the Node object goes."""
        name = node["metadata"]["name"]
        pods = await self._reads.pods_on(name)
        deleted = []
        for pod in pods:
            if (pod.get("spec") or {}).get("nodeName") == name:
                namespace = pod["metadata"].get("namespace") or "default"
                try:
                    await self._kube.delete(POD, pod["metadata"]["name"], namespace)
                except NotFoundError:
                    continue
                deleted.append(f"{namespace}/{pod['metadata']['name']}")
        await self._release(NODE, name, None, current=node)
        return deleted

    async def _release(self, kind: Any, name: str, namespace: str | None, *, current: Manifest | None) -> None:
        """Remove our finalizer (others' stay) and make sure deletion was requested."""
        await remove_finalizer(self._kube, kind, name, wk.TERMINATION_FINALIZER, namespace, current=current)
        with contextlib.suppress(NotFoundError):
            await self._kube.delete(kind, name, namespace)


def _node_ready(node: Manifest) -> bool:
    return is_true(node, "Ready", absent=True)  # none reported: Ready (never skip a drain on missing data)


def _uid(nodeclaim: Manifest) -> str:
    metadata = nodeclaim.get("metadata") or {}
    return str(metadata.get("uid") or metadata.get("name", ""))


def deletion_requested(manifest: Mapping[str, Any]) -> bool:
    return bool((manifest.get("metadata") or {}).get("deletionTimestamp"))
