"""``TerminationReads`` from the live controller's informer cache (``StateStore``), not the API server.

Karpenter's terminator reads pods, budgets and VolumeAttachments through controller-runtime's cache; so do we:
a terminating NodeClaim is stepped every second, and reading through the API would list the node's pods, all
PodDisruptionBudgets, every pod of their namespaces and all VolumeAttachments each time. A cache that lags
is harmless here: an eviction of a pod already gone answers 404, and a pod the cache has not seen yet is
drained on a later step (the drain lasts at least 5 s for that reason).
"""

from __future__ import annotations

from reconciler.kube.api import Manifest
from reconciler.state.store import StateStore


class StoreReads:
    def __init__(self, store: StateStore) -> None:
        self._store = store

    async def node_of(self, nodeclaim: Manifest) -> Manifest | None:
        return self._store.node_for(nodeclaim)

    async def pods_on(self, node_name: str) -> list[Manifest]:
        return self._store.pods_on(node_name)

    async def disruption_budgets(self) -> tuple[list[Manifest], list[Manifest]]:
        pdbs = self._store.manifests("PodDisruptionBudget")
        namespaces = {(p.get("metadata") or {}).get("namespace") for p in pdbs}
        pods = [p for p in self._store.manifests("Pod") if (p.get("metadata") or {}).get("namespace") in namespaces]
        return pdbs, pods

    async def volume_attachments_on(self, node_name: str) -> list[Manifest]:
        attachments = self._store.manifests("VolumeAttachment")
        return [a for a in attachments if (a.get("spec") or {}).get("nodeName") == node_name]

    async def volume_of_claim(self, namespace: str, claim: str) -> str | None:
        pvc = self._store.get("PersistentVolumeClaim", f"{namespace}/{claim}")
        return ((pvc or {}).get("spec") or {}).get("volumeName") or None
