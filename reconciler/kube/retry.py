"""Optimistic-concurrency helpers over any ``KubeAPI``: read-modify-write with 409 retries."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from reconciler.kube.api import ConflictError, Kind, KubeAPI, Manifest
from reconciler.kube.semantics import clone, merge_patch_diff

T = TypeVar("T")
Mutation = Callable[[Manifest], Manifest | None]


async def retry_on_conflict(
    operation: Callable[[], Awaitable[T]], *, attempts: int = 5, backoff: float = 0.02, seed: int | None = None
) -> T:
    """Run ``operation`` (which must re-read what it writes) again after each 409, up to ``attempts``."""
    rng: random.Random | None = None  # made on the first 409 only: seeding one per write cost more than most writes
    for attempt in range(1, attempts + 1):
        try:
            return await operation()
        except ConflictError:
            if attempt == attempts:
                raise
            if rng is None:
                rng = random.Random(seed)
            await asyncio.sleep(rng.uniform(0, backoff * 2**attempt))
    raise AssertionError("unreachable")


async def modify(
    kube: KubeAPI,
    kind: Kind,
    name: str,
    mutate: Mutation,
    namespace: str | None = None,
    *,
    subresource: str | None = None,
    attempts: int = 5,
    current: Manifest | None = None,
) -> Manifest:
    """Read the object, let ``mutate`` change a copy (return it, or ``None`` for "no change"), and
    write back only the difference as a merge patch guarded by the read resourceVersion; on a
    409 the whole read-mutate-write runs again. Returns the stored object.

    ``current`` is a copy the caller already holds (the informer's): the first attempt patches
    against it without a GET, as controller-runtime patches its cached object with optimistic
    locking; only a 409 (the copy was stale) makes it read the object from the API server. A copy
    without a resourceVersion cannot guard a write and is read again."""
    held = current if current is not None and (current.get("metadata") or {}).get("resourceVersion") else None

    async def once() -> Manifest:
        nonlocal held
        if held is not None:
            base, held = held, None
        else:
            base = await kube.get(kind, name, namespace)
        desired = mutate(clone(base))
        if desired is None or desired == base:
            return base
        patch = merge_patch_diff(base, desired)
        patch.setdefault("metadata", {})["resourceVersion"] = base["metadata"]["resourceVersion"]
        return await kube.patch(kind, name, patch, namespace, subresource)

    return await retry_on_conflict(once, attempts=attempts)
