"""Adopting NodeClaims stamped by another hash algorithm (Karpenter's), as a snapshot is loaded (pure).

A snapshot of a Karpenter cluster holds NodeClaims with Karpenter's ``karpenter.sh/nodepool-hash-version``
(``v3``) and ``karpenter.k8s.aws/ec2nodeclass-hash-version``. Adze re-stamps them with its own hashes of
the snapshot's NodePools and EC2NodeClasses (``drift_hashes.restamp``), exactly as its live controller does on
taking over the cluster, so a proposed template change then shows as drift in ``plan``.
"""

from __future__ import annotations

from typing import Any

from reconciler.model import labels as wk
from reconciler.model.meta import ManifestError
from reconciler.provisioning.drift_hashes import restamp

Manifest = dict[str, Any]


def adopt_nodeclaims(objects: list[Manifest]) -> int:
    """Re-stamp, in place, the NodeClaims among ``objects`` whose hashes are of another version; returns how many.

    Runs before the snapshot is validated: a field of the wrong type leaves its claim as it is (validation then
    reports it by path)."""
    named = [o for o in objects if isinstance(o, dict) and isinstance(o.get("metadata"), dict)]
    pools = {str(o["metadata"].get("name")): o for o in named if o.get("kind") == "NodePool"}
    classes = {str(o["metadata"].get("name")): o for o in named if o.get("kind") == "EC2NodeClass"}
    adopted = 0
    for claim in named:
        if claim.get("kind") != "NodeClaim":
            continue
        metadata = claim["metadata"]
        labels, annotations = _map(metadata.get("labels")), _map(metadata.get("annotations"))
        spec, status = _map(claim.get("spec")), _map(claim.get("status"))
        if labels is None or annotations is None or spec is None or status is None:
            continue
        pool = pools.get(str(labels.get(wk.NODEPOOL, "")))
        ref = _map(spec.get("nodeClassRef")) or {}
        nodeclass = classes.get(str(ref.get("name", ""))) if ref.get("kind", "EC2NodeClass") == "EC2NodeClass" else None
        conditions = status.get("conditions") or []
        drifted = isinstance(conditions, list) and any(
            isinstance(c, dict) and c.get("type") == "Drifted" for c in conditions)
        try:
            update = restamp(annotations, pool, nodeclass, drifted=drifted)
        except (ManifestError, ValueError, TypeError, AttributeError):
            continue  # an unreadable NodePool is reported where it is loaded; its claims stay as they are
        if update:
            metadata["annotations"] = {**annotations, **update}
            adopted += 1
    return adopted


def _map(value: Any) -> dict[str, Any] | None:
    """A manifest field that should be a map: {} when absent, None when it is something else."""
    if value is None:
        return {}
    return value if isinstance(value, dict) else None
