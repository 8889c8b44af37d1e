"""What the terminator reads about a node, from the API server or from an informer cache.

``Terminator.step`` runs every second for every terminating NodeClaim. Read through the API (``ApiReads``),
each step lists the node's pods, every PodDisruptionBudget, the pods of the budgets' namespaces and the
VolumeAttachments: fine for the in-memory cluster of the simulator and tests, too much for a real API server.
The live controller passes a cache-backed implementation
(``controllers.nodeclaim.termination_cache_reads.StoreReads``) instead, as Karpenter reads through its informer cache.
"""

from __future__ import annotations

from typing import Protocol

from reconciler.kube.api import (
    DEPLOYMENT,
    NODE,
    PDB,
    POD,
    PVC,
    REPLICASET,
    STATEFULSET,
    VOLUMEATTACHMENT,
    KubeAPI,
    Manifest,
    NotFoundError,
)
from reconciler.model.pdb_status import BudgetValueError, ControllerLookup, budget_status


class TerminationReads(Protocol):
    async def node_of(self, nodeclaim: Manifest) -> Manifest | None:
        """The claim's Node: by ``status.nodeName``, else by ``status.providerID``."""
        ...

    async def pods_on(self, node_name: str) -> list[Manifest]: ...

    async def disruption_budgets(self) -> tuple[list[Manifest], list[Manifest]]:
        """Every PodDisruptionBudget and the pods of the namespaces that have one (a budget without status
        counts its healthy pods itself)."""
        ...

    async def volume_attachments_on(self, node_name: str) -> list[Manifest]: ...

    async def volume_of_claim(self, namespace: str, claim: str) -> str | None:
        """The PersistentVolume a PersistentVolumeClaim is bound to (None: unknown or unbound)."""
        ...


class ApiReads:
    """``TerminationReads`` straight from the API server (the simulator's in-memory one, tests)."""

    def __init__(self, kube: KubeAPI) -> None:
        self._kube = kube

    async def node_of(self, nodeclaim: Manifest) -> Manifest | None:
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

    async def pods_on(self, node_name: str) -> list[Manifest]:
        pods, _ = await self._kube.list(POD, field_selector=f"spec.nodeName={node_name}")
        return pods

    async def disruption_budgets(self) -> tuple[list[Manifest], list[Manifest]]:
        """A budget no disruption controller keeps (the in-memory API server runs none) gets the status that
        controller would write now, from its namespace's pods and workload controllers."""
        pdbs, _ = await self._kube.list(PDB)
        namespaces = sorted({str(ns) for p in pdbs if (ns := (p.get("metadata") or {}).get("namespace"))})
        pods_by_namespace = {ns: (await self._kube.list(POD, ns))[0] for ns in namespaces}
        kept = []
        for pdb in pdbs:
            if "disruptionsAllowed" in (pdb.get("status") or {}):
                kept.append(pdb)
                continue
            namespace = str((pdb.get("metadata") or {}).get("namespace") or "default")
            try:
                status = budget_status(pdb, pods_by_namespace.get(namespace, []), await self._controllers(namespace))
            except BudgetValueError:
                kept.append(pdb)  # the drain reports it as unreadable
                continue
            kept.append({**pdb, "status": {**(pdb.get("status") or {}), **status.as_status()}})
        return kept, [pod for ns in namespaces for pod in pods_by_namespace[ns]]

    async def _controllers(self, namespace: str) -> ControllerLookup:
        stored = {}
        for kind in (DEPLOYMENT, REPLICASET, STATEFULSET):
            for item in (await self._kube.list(kind, namespace))[0]:
                stored[kind.kind, kind.group, str(item["metadata"]["name"])] = item

        def lookup(kind: str, group: str, _namespace: str, name: str) -> Manifest | None:
            return stored.get((kind, group, name))

        return lookup

    async def volume_attachments_on(self, node_name: str) -> list[Manifest]:
        attachments, _ = await self._kube.list(VOLUMEATTACHMENT)
        return [a for a in attachments if (a.get("spec") or {}).get("nodeName") == node_name]

    async def volume_of_claim(self, namespace: str, claim: str) -> str | None:
        try:
            pvc = await self._kube.get(PVC, claim, namespace)
        except NotFoundError:
            return None
        return (pvc.get("spec") or {}).get("volumeName") or None
