"""Drift hashes on the live cluster: Karpenter's ``nodepool.hash`` and ``nodeclass.hash`` controllers.

Each NodePool and EC2NodeClass carries its current hash and hash version as annotations (so a later
controller, Karpenter's or Adze's, can tell which algorithm stamped what). A NodeClaim whose hash version is
not Adze's — one Karpenter created, adopted when Adze took over — is re-stamped with the current hash of its
NodePool / EC2NodeClass (``drift_hashes.restamp``; a claim already Drifted keeps its old hash and stays drifted).
From then on a change of its NodePool template drifts it like any claim Adze launched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.controllers.runtime.backoff import Retries
from reconciler.controllers.runtime.context import ControllerContext, ControllerLog, Wakeup, ref
from reconciler.controllers.runtime.workers import wait_time
from reconciler.kube.api import EC2NODECLASS, NODECLAIM, NODEPOOL, ApiError, Kind, Manifest, NotFoundError
from reconciler.kube.retry import modify
from reconciler.model import labels as wk
from reconciler.model.meta import ManifestError
from reconciler.provisioning.drift_hashes import (
    NODECLASS_HASH_ANNOTATION,
    NODECLASS_HASH_VERSION,
    NODECLASS_HASH_VERSION_ANNOTATION,
    NODEPOOL_HASH_VERSION,
    nodeclass_hash,
    nodepool_hash,
    restamp,
)
from reconciler.state.store import StateStore

log = ControllerLog("nodepool.hash")
RESYNC = 60.0


class HashStamper:
    def __init__(self, ctx: ControllerContext, store: StateStore) -> None:
        self.ctx = ctx
        self.store = store
        self.wake = Wakeup()
        self.retries = Retries(log, ctx.clock.monotonic)  # failed writes, per object
        store.subscribe(self._on_change)

    def _on_change(self, kind: str, manifest: dict[str, Any], deleted: bool) -> None:
        if kind in ("NodePool", "EC2NodeClass", "NodeClaim") and not deleted:
            self.wake.set()

    async def run(self) -> None:
        while True:
            async with self.ctx.reconciling():
                await self.reconcile_once()
            await self.wake.wait(wait_time(RESYNC, self.retries.next_due()))

    async def reconcile_once(self) -> list[str]:
        """Stamp pools and classes, re-stamp claims of other versions; returns the claims re-stamped."""
        for pool in self.store.manifests("NodePool"):
            model = self.store.state.nodepools.get(str(pool["metadata"]["name"]))  # parsed once, hash memoized
            await self._stamp(NODEPOOL, pool, wk.NODEPOOL_HASH, wk.NODEPOOL_HASH_VERSION, NODEPOOL_HASH_VERSION,
                              lambda manifest, model=model: nodepool_hash(model if model is not None else manifest))
        for nodeclass in self.store.manifests("EC2NodeClass"):
            await self._stamp(EC2NODECLASS, nodeclass, NODECLASS_HASH_ANNOTATION, NODECLASS_HASH_VERSION_ANNOTATION,
                              NODECLASS_HASH_VERSION, nodeclass_hash)
        restamped = []
        for claim in self.store.nodeclaims():
            if claim["metadata"].get("deletionTimestamp") or not self._update(claim):
                continue
            if not self.retries.ready(f"NodeClaim/{claim['metadata']['name']}"):
                continue
            if await self._restamp(claim):
                restamped.append(str(claim["metadata"]["name"]))
        return restamped

    def _update(self, claim: Mapping[str, Any]) -> dict[str, str]:
        metadata = claim.get("metadata") or {}
        name = str((metadata.get("labels") or {}).get(wk.NODEPOOL, ""))
        pool = self.store.state.nodepools.get(name) or self.store.get("NodePool", name)
        ref_name = str(((claim.get("spec") or {}).get("nodeClassRef") or {}).get("name", ""))
        nodeclass = self.store.get("EC2NodeClass", ref_name) if ref_name else None
        drifted = any(c.get("type") == "Drifted" for c in (claim.get("status") or {}).get("conditions") or [])
        try:
            return restamp(metadata.get("annotations") or {}, pool, nodeclass, drifted=drifted)
        except (ManifestError, ValueError):
            return {}  # an unreadable NodePool: its status says why; its claims wait

    async def _restamp(self, claim: Manifest) -> bool:
        name = str(claim["metadata"]["name"])
        applied: dict[str, str] = {}

        def edit(current: Manifest) -> Manifest | None:
            update = self._update(current)
            if not update:
                return None
            applied.update(update)
            current["metadata"]["annotations"] = {**(current["metadata"].get("annotations") or {}), **update}
            return current

        try:
            await modify(self.ctx.kube, NODECLAIM, name, edit, current=claim)
        except NotFoundError:
            return False
        except ApiError as err:
            self.retries.failure(f"NodeClaim/{name}", err, "re-stamping nodeclaim hashes failed; backing off",
                                 NodeClaim=ref(name))
            return False
        self.retries.forget(f"NodeClaim/{name}")
        if applied:
            log.info("re-stamped nodeclaim hashes of another version", NodeClaim=ref(name),
                     annotations=applied)
        return bool(applied)

    async def _stamp(self, kind: Kind, manifest: Mapping[str, Any], key: str, version_key: str, version: str,
                     compute: Any) -> None:
        metadata = manifest.get("metadata") or {}
        try:
            current = compute(manifest)
        except (ManifestError, ValueError):
            return
        annotations = metadata.get("annotations") or {}
        if annotations.get(key) == current and annotations.get(version_key) == version:
            return
        retry_key = f"{kind.kind}/{metadata.get('name')}"
        if not self.retries.ready(retry_key):
            return
        try:  # annotations are a map: a merge patch touches only these two keys
            await self.ctx.kube.patch(kind, str(metadata["name"]),
                                      {"metadata": {"annotations": {key: current, version_key: version}}})
        except NotFoundError:
            return
        except ApiError as err:
            self.retries.failure(retry_key, err, "stamping hash failed; backing off", kind=kind.kind,
                                 name=metadata.get("name"))
            return
        self.retries.forget(retry_key)
