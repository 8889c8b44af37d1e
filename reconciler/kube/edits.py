"""List-valued fields (finalizers, taints, conditions) edited against the object as it is now.

A merge patch replaces a list whole, so a list computed from an older read drops whatever another writer
added in between: the node lifecycle controller's ``not-ready:NoExecute`` taint, a third-party
finalizer. These edits change the list on a copy of the object and write only the difference guarded by
that copy's ``resourceVersion`` (``retry.modify``); a 409 re-reads and runs the edit again, as Karpenter's
optimistic locking does at the same places.

Every edit takes an optional ``current``: the copy the caller already holds (the informer's). The first
attempt then writes against it without a GET; a stale copy costs one 409 and one read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reconciler.kube.api import NODE, NODECLAIM, Kind, KubeAPI, Manifest, NotFoundError
from reconciler.kube.retry import modify

TaintEdit = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


async def add_finalizer(
    kube: KubeAPI, kind: Kind, name: str, finalizer: str, namespace: str | None = None, *,
    current: Manifest | None = None,
) -> None:
    def edit(obj: Manifest) -> Manifest | None:
        finalizers = list(obj["metadata"].get("finalizers") or [])
        if finalizer in finalizers:
            return None
        obj["metadata"]["finalizers"] = [*finalizers, finalizer]
        return obj

    await modify(kube, kind, name, edit, namespace, current=current)


async def remove_finalizer(
    kube: KubeAPI, kind: Kind, name: str, finalizer: str, namespace: str | None = None, *,
    current: Manifest | None = None,
) -> bool:
    """Drop only our finalizer (others stay). False when there was nothing to drop: the object is gone
    or did not carry it."""
    removed = False

    def edit(obj: Manifest) -> Manifest | None:
        nonlocal removed
        finalizers = list(obj["metadata"].get("finalizers") or [])
        removed = finalizer in finalizers
        if not removed:
            return None
        obj["metadata"]["finalizers"] = [f for f in finalizers if f != finalizer]
        return obj

    try:
        await modify(kube, kind, name, edit, namespace, current=current)
    except NotFoundError:
        return False
    return removed


async def edit_node(
    kube: KubeAPI, name: str, edit: Callable[[Manifest], Manifest | None], *, current: Manifest | None = None
) -> Manifest:
    """Any edit of a Node (taints, labels, finalizers together) against its current version."""
    return await modify(kube, NODE, name, edit, current=current)


async def edit_taints(kube: KubeAPI, name: str, edit: TaintEdit, *, current: Manifest | None = None) -> None:
    """Replace the Node's taints with ``edit(current taints)``; no write when nothing changes."""
    def change(obj: Manifest) -> Manifest | None:
        spec = obj.setdefault("spec", {})
        before = [dict(t) for t in spec.get("taints") or []]
        after = edit([dict(t) for t in before])
        if after == before:
            return None
        spec["taints"] = after
        return obj

    await modify(kube, NODE, name, change, current=current)


async def drop_condition(
    kube: KubeAPI, nodeclaim: str, condition_type: str, *, current: Manifest | None = None
) -> None:
    """Remove one condition from a NodeClaim's status (the others, whoever wrote them, stay)."""
    def edit(obj: Manifest) -> Manifest | None:
        status = obj.setdefault("status", {})
        conditions = status.get("conditions") or []
        kept = [c for c in conditions if c.get("type") != condition_type]
        if len(kept) == len(conditions):
            return None
        status["conditions"] = kept
        return obj

    await modify(kube, NODECLAIM, nodeclaim, edit, subresource="status", current=current)
