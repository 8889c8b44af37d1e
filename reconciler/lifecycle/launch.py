"""NodeClaim lifecycle, first half: launch, registration, initialization.

These are the async executors shared by the live controllers and the simulator:
they read and write through ``KubeAPI`` and ``CloudProvider`` only, and are
idempotent so any replica can resume them after a crash.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from reconciler.cloud.types import (
    CloudError,
    CloudProvider,
    Instance,
    InsufficientCapacityError,
    LaunchOutcomeUnknown,
    LaunchPendingError,
    LaunchRequest,
    NodeClassNotReadyError,
)
from reconciler.kube.api import EC2NODECLASS, NODE, NODECLAIM, KubeAPI, Manifest, NotFoundError
from reconciler.kube.edits import add_finalizer, edit_node, remove_finalizer
from reconciler.lifecycle.conditions import set_condition
from reconciler.model import labels as wk
from reconciler.model.conditions import condition, is_true
from reconciler.model.meta import format_time

# When the current launch attempt of a NodeClaim was made (ms since the epoch): the seed of its idempotency
# token (see ``_launch_attempt``).
LAUNCH_ATTEMPT_ANNOTATION = "adze.dev/launch-attempt"


@dataclass(slots=True)
class LaunchOutcome:
    nodeclaim: str
    instance: Instance | None = None
    error: str = ""
    unavailable_offerings: list[tuple[str, str, str]] = field(default_factory=list)
    # Why the claim was deleted instead of launched, as Karpenter's disruption metric names it.
    deleted_for: str = ""
    # The claim as stored after its launch was recorded (None when nothing was written).
    stored: Manifest | None = None


NodeClassLookup = Callable[[str], Manifest | None]


async def launch(
    kube: KubeAPI, cloud: CloudProvider, nodeclaim: Manifest, now: datetime, *,
    nodeclasses: NodeClassLookup | None = None, idempotent: bool = False,
) -> LaunchOutcome:
    """Launch the instance for a NodeClaim and record it in the claim's status.

    Insufficient capacity or a missing node class deletes the claim at once so
    that its pods are planned again in the next batch (Karpenter's behaviour).
    ``nodeclasses`` finds an EC2NodeClass by name (the live controller's informer cache); without it the
    class is read from the API server. ``idempotent`` (the live reconciler): record the attempt on the claim
    and send its idempotency token (``_launch_attempt``); the simulator, whose clouds cannot lose an answer and
    whose seeded uids repeat across runs, launches without.
    """
    name = nodeclaim["metadata"]["name"]
    status = nodeclaim.get("status") or {}
    if status.get("providerID"):
        return LaunchOutcome(name, instance=await cloud.get(status["providerID"]))
    if wk.TERMINATION_FINALIZER not in ((nodeclaim.get("metadata") or {}).get("finalizers") or []):
        # Own the claim before any instance exists, so deleting it can never leak one.
        await add_finalizer(kube, NODECLAIM, name, wk.TERMINATION_FINALIZER, current=nodeclaim)
    nodeclass = await _nodeclass(kube, nodeclaim, nodeclasses)
    token = ""
    if idempotent:
        nodeclaim, token = await _launch_attempt(kube, nodeclaim, now)
    request = replace(LaunchRequest.from_nodeclaim(nodeclaim), client_token=token)
    try:
        instance = await cloud.create(request, nodeclass)
    except (LaunchPendingError, LaunchOutcomeUnknown):
        raise  # an instance may exist: the next try reuses the token (and adopts it)
    except (InsufficientCapacityError, NodeClassNotReadyError) as err:
        await _delete_unlaunched(kube, nodeclaim)
        offerings = list(getattr(err, "offerings", []))
        deleted_for = "insufficient_capacity" if isinstance(err, InsufficientCapacityError) else "nodeclass_not_ready"
        return LaunchOutcome(name, error=str(err), unavailable_offerings=offerings, deleted_for=deleted_for)
    except CloudError:
        if not idempotent:
            raise
        # The cloud answered "no" and launched nothing: the next try is a new attempt with a new token (a
        # repeated token would only be answered with this failure again).
        with contextlib.suppress(NotFoundError):
            await kube.patch(NODECLAIM, name, {"metadata": {"annotations": {LAUNCH_ATTEMPT_ANNOTATION: None}}})
        raise
    labels = {
        wk.INSTANCE_TYPE: instance.instance_type,
        wk.ZONE: instance.zone,
        wk.CAPACITY_TYPE: instance.capacity_type,
    }
    for key in (wk.ARCH, wk.OS, wk.REGION, wk.ZONE_ID, wk.WINDOWS_BUILD, *wk.RESERVATION_LABELS):
        if key in instance.labels:
            labels[key] = instance.labels[key]
    labelled = await kube.patch(NODECLAIM, name, {"metadata": {"labels": labels}})
    stored = await set_condition(
        kube,
        name,
        condition("Launched", True, now),
        current=labelled,
        providerID=instance.provider_id,
        imageID=instance.image_id,
        capacity=instance.capacity.to_manifest(),
        allocatable=instance.allocatable.to_manifest(),
    )
    return LaunchOutcome(name, instance=instance, stored=stored)


async def _launch_attempt(kube: KubeAPI, nodeclaim: Manifest, now: datetime) -> tuple[Manifest, str]:
    """The launch attempt this try belongs to and its idempotency token.

    An attempt is recorded on the claim (``LAUNCH_ATTEMPT_ANNOTATION``) *before* its launch request goes out,
    so a replica that takes over after a crash, or a retry after a lost answer, sends the same token: EC2
    answers a repeated CreateFleet token with the instance it launched the first time (or, when the new request
    differs, ``IdempotentParameterMismatch``: wait for that instance), never with a second instance. This holds
    while new instances are still invisible to DescribeInstances' tag search (eventual consistency), which is
    why finding the instance by its NodeClaim tag alone is not enough."""
    metadata = nodeclaim.get("metadata") or {}
    attempt = str((metadata.get("annotations") or {}).get(LAUNCH_ATTEMPT_ANNOTATION) or "")
    if not attempt:
        attempt = str(int(now.timestamp() * 1000))
        nodeclaim = await kube.patch(NODECLAIM, str(metadata.get("name", "")),
                                     {"metadata": {"annotations": {LAUNCH_ATTEMPT_ANNOTATION: attempt}}})
    identity = str(metadata.get("uid") or metadata.get("name") or "")
    return nodeclaim, f"{identity}-{attempt}"[:64]


async def _nodeclass(kube: KubeAPI, nodeclaim: Manifest, lookup: NodeClassLookup | None) -> Manifest | None:
    ref = (nodeclaim.get("spec") or {}).get("nodeClassRef") or {}
    if not ref.get("name"):
        return None
    if lookup is not None:
        return lookup(str(ref["name"]))
    try:
        return await kube.get(EC2NODECLASS, ref["name"])
    except NotFoundError:
        return None


async def _delete_unlaunched(kube: KubeAPI, nodeclaim: Manifest) -> None:
    """Nothing was launched, so the termination finalizer has nothing to clean up."""
    name = str(nodeclaim["metadata"]["name"])
    # Others' finalizers stay; against the copy at hand (a stale one costs a 409 and a read).
    await remove_finalizer(kube, NODECLAIM, name, wk.TERMINATION_FINALIZER, current=nodeclaim)
    with contextlib.suppress(NotFoundError):
        await kube.delete(NODECLAIM, name)


def node_for_instance(nodeclaim: Manifest, instance: Instance, now: datetime) -> Manifest:
    """The Node a kubelet registers for a launched NodeClaim (used by the simulated kubelet).

    Like a real kubelet started by Karpenter's user data, it carries the claim's
    labels, taints and startup taints plus ``karpenter.sh/unregistered:NoExecute``.
    """
    spec = nodeclaim.get("spec") or {}
    name = nodeclaim["metadata"]["name"]
    labels = dict(instance.labels)
    labels.update((nodeclaim.get("metadata") or {}).get("labels") or {})
    labels[wk.HOSTNAME] = name
    taints = [dict(t) for t in spec.get("taints") or []] + [dict(t) for t in spec.get("startupTaints") or []]
    taints.append({"key": wk.UNREGISTERED_TAINT_KEY, "effect": "NoExecute"})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"providerID": instance.provider_id, "taints": taints},
        "status": {
            "capacity": instance.capacity.to_manifest(),
            "allocatable": instance.allocatable.to_manifest(),
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastTransitionTime": format_time(now)}
            ],
        },
    }


def owner_reference(nodeclaim: Manifest) -> dict[str, Any]:
    """The ownerReference a registered Node carries to its NodeClaim (Karpenter's, blocking owner deletion)."""
    metadata = nodeclaim.get("metadata") or {}
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": str(metadata.get("name", "")),
            "uid": str(metadata.get("uid", "")), "blockOwnerDeletion": True}


def registration_drift(nodeclaim: Manifest, node: Manifest) -> list[str]:
    """What a Registered claim's Node lacks of what registration gives it (empty: in sync). A Node deleted
    outside Karpenter (finalizer stripped) and registered again by its kubelet lacks all of it and carries
    ``karpenter.sh/unregistered:NoExecute`` again."""
    metadata = node.get("metadata") or {}
    missing = []
    if any(t.get("key") == wk.UNREGISTERED_TAINT_KEY for t in (node.get("spec") or {}).get("taints") or []):
        missing.append(f"taint {wk.UNREGISTERED_TAINT_KEY} is present")
    if (metadata.get("labels") or {}).get(wk.REGISTERED) != "true":
        missing.append(f"label {wk.REGISTERED} is missing")
    if wk.TERMINATION_FINALIZER not in (metadata.get("finalizers") or []):
        missing.append(f"finalizer {wk.TERMINATION_FINALIZER} is missing")
    uid = (nodeclaim.get("metadata") or {}).get("uid")
    if uid and not any(o.get("uid") == uid for o in metadata.get("ownerReferences") or []):
        missing.append("ownerReference to the NodeClaim is missing")
    return missing


async def register(kube: KubeAPI, nodeclaim: Manifest, node: Manifest, now: datetime) -> Manifest:
    """The Node for this claim appeared: sync labels/taints, drop the unregistered taint, own it (finalizer
    and ownerReference), as Karpenter's registration does. Idempotent: also what re-adopts a Node registered
    again under a claim already Registered.

    Taints, finalizers and ownerReferences are lists, so they are edited on the Node as it is at write time
    (guarded by its resourceVersion): an entry another controller added since ``node`` was read stays."""
    claim_meta = nodeclaim.get("metadata") or {}

    def edit(current: Manifest) -> Manifest:
        node_meta = current["metadata"]
        node_meta["labels"] = {**(node_meta.get("labels") or {}), **(claim_meta.get("labels") or {}),
                               wk.REGISTERED: "true"}
        if claim_meta.get("annotations"):
            node_meta["annotations"] = {**(node_meta.get("annotations") or {}), **claim_meta["annotations"]}
        spec = current.setdefault("spec", {})
        taints = [t for t in spec.get("taints") or [] if t.get("key") != wk.UNREGISTERED_TAINT_KEY]
        if node_meta["labels"].get(wk.DO_NOT_SYNC_TAINTS) != "true":
            present = {(t.get("key"), t.get("effect")) for t in taints}
            for taint in (nodeclaim.get("spec") or {}).get("taints") or []:
                if (taint.get("key"), taint.get("effect")) not in present:
                    taints.append(dict(taint))
        spec["taints"] = taints
        finalizers = list(node_meta.get("finalizers") or [])
        if wk.TERMINATION_FINALIZER not in finalizers:
            node_meta["finalizers"] = [*finalizers, wk.TERMINATION_FINALIZER]
        node_meta["ownerReferences"] = owned_by_nodeclaim(node_meta.get("ownerReferences") or [], claim_meta)
        return current

    node_meta = node.get("metadata") or {}
    await edit_node(kube, node_meta["name"], edit, current=node)
    labelled = await kube.patch(NODECLAIM, claim_meta["name"], {"metadata": {"labels": {wk.REGISTERED: "true"}}})
    return await set_condition(kube, claim_meta["name"], condition("Registered", True, now), current=labelled,
                               nodeName=node_meta["name"])


def owned_by_nodeclaim(owners: list[Manifest], claim_meta: Manifest) -> list[Manifest]:
    """The Node's ownerReferences with its NodeClaim's added (as Karpenter's registration does), so the garbage
    collector removes a Node whose NodeClaim is gone; a claim without a uid (not stored yet) adds nothing."""
    uid = claim_meta.get("uid")
    if not uid or any(o.get("kind") == "NodeClaim" and o.get("uid") == uid for o in owners):
        return owners
    owner = {"apiVersion": NODECLAIM.api_version, "kind": NODECLAIM.kind, "name": claim_meta["name"], "uid": uid,
             "blockOwnerDeletion": True}
    return [*owners, owner]


def initialization_blockers(nodeclaim: Manifest, node: Manifest) -> list[str]:
    """Why a registered node is not initialized yet (empty when it is)."""
    blockers = []
    if not is_true(node, "Ready"):
        blockers.append("node is not Ready")
    startup = {(t.get("key"), t.get("effect")) for t in (nodeclaim.get("spec") or {}).get("startupTaints") or []}
    for taint in (node.get("spec") or {}).get("taints") or []:
        key = taint.get("key", "")
        if (key, taint.get("effect")) in startup:
            blockers.append(f"startup taint {key} is still present")
        elif key in wk.EPHEMERAL_TAINT_KEYS or key.startswith(wk.EPHEMERAL_TAINT_PREFIX):
            blockers.append(f"taint {key} is still present")
    requested = ((nodeclaim.get("spec") or {}).get("resources") or {}).get("requests") or {}
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    for resource in requested:
        if "/" in resource and str(allocatable.get(resource, "0")) in ("0", "0m"):
            blockers.append(f"extended resource {resource} is not registered yet")
    return blockers


async def initialize(kube: KubeAPI, nodeclaim: Manifest, node: Manifest, now: datetime) -> Manifest | None:
    """Mark a registered claim and its Node initialized; the claim as stored, or None when it is not yet."""
    if initialization_blockers(nodeclaim, node):
        return None
    name = nodeclaim["metadata"]["name"]
    await kube.patch(NODE, node["metadata"]["name"], {"metadata": {"labels": {wk.INITIALIZED: "true"}}})
    labelled = await kube.patch(NODECLAIM, name, {"metadata": {"labels": {wk.INITIALIZED: "true"}}})
    return await set_condition(kube, name, condition("Initialized", True, now), current=labelled)
