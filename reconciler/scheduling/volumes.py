"""Volume topology: where a pod's PersistentVolumeClaims let it run, and whether they are usable at all.

A bound claim contributes its PersistentVolume's node affinity (hostname terms
of local/hostPath volumes are dropped, the node is gone or new anyway); an
unbound claim with a WaitForFirstConsumer StorageClass contributes the class's
``allowedTopologies``. Each source is a list of alternatives (OR); a pod's
alternatives are the compatible cross product over its volumes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.model import labels as wk
from reconciler.model.pod import Pod
from reconciler.model.requirements import Requirement, Requirements
from reconciler.state.cluster import ClusterState


def validate_volumes(pod: Pod, state: ClusterState) -> str | None:
    """Why the pod's claims make it unschedulable for now (Karpenter ignores such pods), or None."""
    for volume in pod.volumes:
        key = f"{pod.namespace}/{volume.claim_name}"
        pvc = state.persistent_volume_claims.get(key)
        if pvc is None:
            return f"PersistentVolumeClaim {key} (volume {volume.name}) does not exist"
        metadata = pvc.get("metadata") or {}
        spec = pvc.get("spec") or {}
        if metadata.get("deletionTimestamp"):
            return f"PersistentVolumeClaim {key} is being deleted"
        if (pvc.get("status") or {}).get("phase") == "Lost":
            return f"PersistentVolumeClaim {key} is bound to a PersistentVolume that no longer exists"
        volume_name = str(spec.get("volumeName") or "")
        if volume_name:
            pv = state.persistent_volumes.get(volume_name)
            if pv is None:
                return f"PersistentVolume {volume_name} of claim {key} does not exist"
            if (pv.get("metadata") or {}).get("deletionTimestamp"):
                return f"PersistentVolume {volume_name} of claim {key} is being deleted"
            continue
        class_name = str(spec.get("storageClassName") or "")
        if not class_name:
            return f"unbound PersistentVolumeClaim {key} must name a StorageClass"
        storage_class = state.storage_classes.get(class_name)
        if storage_class is None:
            return f"StorageClass {class_name} of claim {key} does not exist"
        if (storage_class.get("volumeBindingMode") or "Immediate") == "Immediate":
            return (
                f"PersistentVolumeClaim {key} uses StorageClass {class_name} with Immediate binding and is not "
                "bound yet"
            )
    return None


def volume_requirements(pod: Pod, state: ClusterState) -> tuple[Requirements, ...] | None:
    """Alternative node requirements from the pod's volumes, or None when volumes do not constrain it."""
    alternatives: list[Requirements | None] = [None]
    for volume in pod.volumes:
        options = _claim_alternatives(state, f"{pod.namespace}/{volume.claim_name}", pod)
        if not options:
            continue
        merged: list[Requirements | None] = [
            _merge(a, o) for a in alternatives for o in options if a is None or a.intersects(o) is None
        ]
        alternatives = merged or [_merge(a, o) for a in alternatives for o in options]
    if alternatives == [None]:
        return None
    return tuple(a for a in alternatives if a is not None)


def _merge(existing: Requirements | None, extra: Requirements) -> Requirements:
    return extra if existing is None else existing.merge(extra)


def _claim_alternatives(state: ClusterState, key: str, pod: Pod) -> list[Requirements]:
    pvc = state.persistent_volume_claims.get(key)
    if pvc is None:
        return []
    spec = pvc.get("spec") or {}
    volume_name = str(spec.get("volumeName") or "")
    if volume_name:
        pv = state.persistent_volumes.get(volume_name)
        return _pv_alternatives(pv, volume_name) if pv else []
    class_name = str(spec.get("storageClassName") or "")
    storage_class = state.storage_classes.get(class_name)
    if storage_class is None:
        return []
    alternatives = []
    for i, term in enumerate(storage_class.get("allowedTopologies") or []):
        requirements = []
        for j, expression in enumerate(term.get("matchLabelExpressions") or []):
            requirements.append(
                _requirement(expression.get("key", ""), "In", expression.get("values") or [],
                             f"StorageClass {class_name}: allowedTopologies[{i}].matchLabelExpressions[{j}]")
            )
        if requirements:
            alternatives.append(Requirements.of(*requirements))
    return alternatives


def _pv_alternatives(pv: Mapping[str, Any], name: str) -> list[Requirements]:
    spec = pv.get("spec") or {}
    terms = (((spec.get("nodeAffinity") or {}).get("required") or {}).get("nodeSelectorTerms")) or []
    local = bool(spec.get("local") or spec.get("hostPath"))
    alternatives = []
    for i, term in enumerate(terms):
        expressions = list(term.get("matchExpressions") or [])
        if local:
            kept = [e for e in expressions if e.get("key") != wk.HOSTNAME]
            if expressions and not kept:
                alternatives.append(Requirements())
                continue
            expressions = kept
        if expressions:
            alternatives.append(
                Requirements.of(*(
                    _requirement(e.get("key", ""), e.get("operator", ""), e.get("values") or [],
                                 f"PersistentVolume {name}: spec.nodeAffinity.required.nodeSelectorTerms[{i}]"
                                 f".matchExpressions[{j}]")
                    for j, e in enumerate(expressions)
                ))
            )
    return alternatives


def _requirement(key: str, operator: str, values: list[Any], path: str) -> Requirement:
    return Requirement.new(key, operator, values, path=path)
