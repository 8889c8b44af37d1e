"""Adopting NodeClaims stamped by another hash algorithm (Karpenter's), as a snapshot is loaded (pure).

A snapshot of a Karpenter cluster holds NodeClaims with Karpenter's ``karpenter.sh/nodepool-hash-version``
(``v3``) and ``karpenter.k8s.aws/ec2nodeclass-hash-version``. Adze re-stamps them with its own hashes of
the snapshot's NodePools and EC2NodeClasses (``hashes.restamp``), exactly as its live controller does on
taking over the cluster, so a proposed template change then shows as drift in ``plan``.
"""

from __future__ import annotations

from typing import Any

from reconciler.model import labels as wk
from reconciler.model.hashes import restamp
from reconciler.model.meta import ManifestError

Manifest = dict[str, Any]


def adopt_nodeclaims(objects: list[Manifest]) -> int:
    """Re-stamp, in place, the NodeClaims among ``objects`` whose hashes are of another version; returns how many."""
    pools = {str(o["metadata"]["name"]): o for o in objects if o.get("kind") == "NodePool" and o.get("metadata")}
    classes = {str(o["metadata"]["name"]): o for o in objects
               if o.get("kind") == "EC2NodeClass" and o.get("metadata")}
    adopted = 0
    for claim in objects:
        if claim.get("kind") != "NodeClaim":
            continue
        metadata = claim.setdefault("metadata", {})
        pool = pools.get(str((metadata.get("labels") or {}).get(wk.NODEPOOL, "")))
        ref = (claim.get("spec") or {}).get("nodeClassRef") or {}
        nodeclass = classes.get(str(ref.get("name", ""))) if ref.get("kind", "EC2NodeClass") == "EC2NodeClass" else None
        drifted = any(c.get("type") == "Drifted" for c in (claim.get("status") or {}).get("conditions") or [])
        try:
            update = restamp(metadata.get("annotations") or {}, pool, nodeclass, drifted=drifted)
        except (ManifestError, ValueError):
            continue  # an unreadable NodePool is reported where it is loaded; its claims stay as they are
        if update:
            metadata["annotations"] = {**(metadata.get("annotations") or {}), **update}
            adopted += 1
    return adopted
