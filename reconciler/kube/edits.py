"""List-valued fields (finalizers, taints, conditions) edited against the object as it is now.

A merge patch replaces a list whole, so a list computed from an older read drops whatever another writer
added in between: the node lifecycle controller's ``not-ready:NoExecute`` taint, a third-party
finalizer. These edits re-read the object, change the list, and write only the difference guarded by the
read ``resourceVersion`` (``retry.modify``); a 409 runs the read-edit-write again, as Karpenter's
optimistic locking does at the same places.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reconciler.kube.api import NODE, NODECLAIM, Kind, KubeAPI, Manifest, NotFoundError
from reconciler.kube.retry import modify

TaintEdit = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


async def add_finalizer(kube: KubeAPI, kind: Kind, name: str, finalizer: str, namespace: str | None = None) -> None:
    def edit(current: Manifest) -> Manifest | None:
        finalizers = list(current["metadata"].get("finalizers") or [])
        if finalizer in finalizers:
            return None
        current["metadata"]["finalizers"] = [*finalizers, finalizer]
        return current

    await modify(kube, kind, name, edit, namespace)


async def remove_finalizer(
    kube: KubeAPI, kind: Kind, name: str, finalizer: str, namespace: str | None = None
) -> bool:
    """Drop only our finalizer (others stay). False when there was nothing to drop: the object is gone
    or did not carry it."""
    removed = False

    def edit(current: Manifest) -> Manifest | None:
        nonlocal removed
        finalizers = list(current["metadata"].get("finalizers") or [])
        removed = finalizer in finalizers
        if not removed:
            return None
        current["metadata"]["finalizers"] = [f for f in finalizers if f != finalizer]
        return current

    try:
        await modify(kube, kind, name, edit, namespace)
    except NotFoundError:
        return False
    return removed


async def edit_node(kube: KubeAPI, name: str, edit: Callable[[Manifest], Manifest | None]) -> Manifest:
    """Any edit of a Node (taints, labels, finalizers together) against its current version."""
    return await modify(kube, NODE, name, edit)


async def edit_taints(kube: KubeAPI, name: str, edit: TaintEdit) -> None:
    """Replace the Node's taints with ``edit(current taints)``; no write when nothing changes."""
    def change(current: Manifest) -> Manifest | None:
        spec = current.setdefault("spec", {})
        before = [dict(t) for t in spec.get("taints") or []]
        after = edit([dict(t) for t in before])
        if after == before:
            return None
        spec["taints"] = after
        return current

    await modify(kube, NODE, name, change)


async def drop_condition(kube: KubeAPI, nodeclaim: str, condition_type: str) -> None:
    """Remove one condition from a NodeClaim's status (the others, whoever wrote them, stay)."""
    def edit(current: Manifest) -> Manifest | None:
        status = current.setdefault("status", {})
        conditions = status.get("conditions") or []
        kept = [c for c in conditions if c.get("type") != condition_type]
        if len(kept) == len(conditions):
            return None
        status["conditions"] = kept
        return current

    await modify(kube, NODECLAIM, nodeclaim, edit, subresource="status")
