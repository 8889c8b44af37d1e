"""NodeClaim termination: taint, drain through the Eviction API, delete the instance, release finalizers.

Pods whose own terminationGracePeriodSeconds would outlast the NodeClaim's
terminationGracePeriod deadline are deleted with ``gracePeriodSeconds`` = the time
left, so they are gone before the instance is.

``Terminator.step`` does as much as it can right now and returns; callers (the
live finalizer controller, the simulator) call it again later. Every step is
idempotent, so a crash at any point is resumed by the next leader.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from reconciler.cloud.types import CloudProvider, InstanceNotFoundError
from reconciler.disruption.pdb import PdbLimits
from reconciler.kube.api import (
    NODE,
    NODECLAIM,
    PDB,
    POD,
    KubeAPI,
    Manifest,
    NotFoundError,
    TooManyRequestsError,
)
from reconciler.kube.edits import edit_node, remove_finalizer
from reconciler.lifecycle.conditions import DRAINED, INSTANCE_TERMINATING, VOLUMES_DETACHED, mark_termination
from reconciler.lifecycle.drain import DrainPlan, plan_drain, termination_deadline
from reconciler.model import labels as wk

DISRUPTED_TAINT = {"key": wk.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}


@dataclass(slots=True)
class TerminationStep:
    nodeclaim: str
    evicted: list[str] = field(default_factory=list)
    force_deleted: list[str] = field(default_factory=list)
    grace_periods: dict[str, int] = field(default_factory=dict)  # force-deleted pod -> gracePeriodSeconds sent
    blocked: list[str] = field(default_factory=list)
    # Pods not drained (they tolerate the disrupted taint) that die with the Node, as pod GC would delete them.
    deleted_with_node: list[str] = field(default_factory=list)
    instance_deleted: bool = False
    drained: bool = False  # this step found the node drained
    finished: bool = False

    @property
    def progressed(self) -> bool:
        return bool(self.evicted or self.force_deleted or self.instance_deleted or self.finished)


class Terminator:
    def __init__(self, kube: KubeAPI, cloud: CloudProvider) -> None:
        self._kube = kube
        self._cloud = cloud

    async def step(self, nodeclaim: Manifest, now: datetime) -> TerminationStep:
        name = nodeclaim["metadata"]["name"]
        result = TerminationStep(name)
        node = await self._node_for(nodeclaim)
        if node is not None and await self._machine_is_gone(nodeclaim, node):
            # Nothing runs there any more: draining would wait on pods that are already dead (a PDB could
            # hold them "Running" forever). As Karpenter (and the node lifecycle controller): a NotReady
            # node whose instance the cloud no longer knows is released without a drain.
            pass
        elif node is not None:
            await self._taint(node)
            on_node, _ = await self._kube.list(POD, field_selector=f"spec.nodeName={node['metadata']['name']}")
            pdbs, _ = await self._kube.list(PDB)
            # A PDB without status counts the healthy pods of its namespace itself.
            namespaces = {(p.get("metadata") or {}).get("namespace") for p in pdbs}
            pods = [p for ns in sorted(n for n in namespaces if n) for p in (await self._kube.list(POD, ns))[0]]
            limits = PdbLimits.from_manifests(pdbs, pods)
            plan = plan_drain(on_node, limits, now, deadline=termination_deadline(nodeclaim))
            await self._execute_drain(plan, result)
            if not plan.complete:
                await mark_termination(self._kube, nodeclaim, DRAINED, "Unknown", now, "Draining", only_if_absent=True)
                return result
            await mark_termination(self._kube, nodeclaim, DRAINED, "True", now)
            result.drained = True
            # Volumes are detached here: nothing is waited on after the drain (Karpenter waits for VolumeAttachments).
            await mark_termination(self._kube, nodeclaim, VOLUMES_DETACHED, "True", now)
        await self._delete_instance(nodeclaim, result)
        if result.instance_deleted:
            await mark_termination(self._kube, nodeclaim, INSTANCE_TERMINATING, "True", now)
        if node is not None:
            result.deleted_with_node = await self._release_node(node)
        await self._release(NODECLAIM, name, None)
        result.finished = True
        return result

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

    async def _node_for(self, nodeclaim: Manifest) -> Manifest | None:
        status = nodeclaim.get("status") or {}
        if status.get("nodeName"):
            try:
                return await self._kube.get(NODE, status["nodeName"])
            except NotFoundError:
                return None
        provider_id = status.get("providerID")
        if not provider_id:
            return None
        nodes, _ = await self._kube.list(NODE)
        return next((n for n in nodes if (n.get("spec") or {}).get("providerID") == provider_id), None)

    async def _taint(self, node: Manifest) -> None:
        taints = (node.get("spec") or {}).get("taints") or []
        labels = (node.get("metadata") or {}).get("labels") or {}
        tainted = any(t.get("key") == wk.DISRUPTED_TAINT_KEY for t in taints)
        if tainted and labels.get(wk.EXCLUDE_FROM_LB) == "karpenter":
            return

        def edit(current: Manifest) -> Manifest:
            spec = current.setdefault("spec", {})
            if not any(t.get("key") == wk.DISRUPTED_TAINT_KEY for t in spec.get("taints") or []):
                spec["taints"] = [*(spec.get("taints") or []), dict(DISRUPTED_TAINT)]
            current["metadata"]["labels"] = {**(current["metadata"].get("labels") or {}),
                                             wk.EXCLUDE_FROM_LB: "karpenter"}
            return current

        with contextlib.suppress(NotFoundError):
            await edit_node(self._kube, node["metadata"]["name"], edit)

    async def _execute_drain(self, plan: DrainPlan, result: TerminationStep) -> None:
        for key in plan.evict:
            namespace, _, name = key.partition("/")
            try:
                await self._kube.evict(name, namespace)
                result.evicted.append(key)
            except TooManyRequestsError as err:
                result.blocked.append(f"eviction of {key} refused: {err.message}")
            except NotFoundError:
                continue
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

    async def _delete_instance(self, nodeclaim: Manifest, result: TerminationStep) -> None:
        provider_id = (nodeclaim.get("status") or {}).get("providerID")
        if not provider_id:
            return
        try:
            await self._cloud.delete(provider_id)
            result.instance_deleted = True
        except InstanceNotFoundError:
            pass  # already gone: deletion is idempotent

    async def _release_node(self, node: Manifest) -> list[str]:
        """The instance is gone: its pods die with it (returned), the Node object goes."""
        name = node["metadata"]["name"]
        pods, _ = await self._kube.list(POD, field_selector=f"spec.nodeName={name}")
        deleted = []
        for pod in pods:
            if (pod.get("spec") or {}).get("nodeName") == name:
                namespace = pod["metadata"].get("namespace") or "default"
                try:
                    await self._kube.delete(POD, pod["metadata"]["name"], namespace)
                except NotFoundError:
                    continue
                deleted.append(f"{namespace}/{pod['metadata']['name']}")
        await self._release(NODE, name, None)
        return deleted

    async def _release(self, kind: Any, name: str, namespace: str | None) -> None:
        """Remove our finalizer (others' stay) and make sure deletion was requested."""
        await remove_finalizer(self._kube, kind, name, wk.TERMINATION_FINALIZER, namespace)
        with contextlib.suppress(NotFoundError):
            await self._kube.delete(kind, name, namespace)


def _node_ready(node: Manifest) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return True  # no condition reported: treat as Ready (never skip a drain on missing data)


def deletion_requested(manifest: Mapping[str, Any]) -> bool:
    return bool((manifest.get("metadata") or {}).get("deletionTimestamp"))
