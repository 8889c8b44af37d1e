"""Applying a proposed NodePool configuration to a snapshot's objects (pure).

- NodePools: unchanged ones keep their live object; changed ones take the proposed spec (keeping
  the live ``uid``, as an in-place update does); new ones are added; NodePools missing from the
  proposal are removed (their NodeClaims are then deleted in the simulation, as the garbage
  collector does through ownerReferences).
- EC2NodeClasses: proposed ones replace or join the live ones; live ones not mentioned stay (a
  change usually touches NodePools only). Specs are compared after the API model's defaults are
  applied, so an omitted default is not a change; ``role`` filled in by the stack at deploy time is
  taken from the live object.
- EC2NodeClass drift: a changed class drifts its nodes through the ``ec2nodeclass-hash`` stamped on
  their NodeClaims (NodeClassDrifted), except for fields Karpenter resolves through AWS instead.
  Of those, ``amiSelectorTerms`` cannot be resolved offline but practically always selects another
  AMI (a new alias version, other tags): its NodeClaims get the ``Drifted`` condition the cloud
  provider would write (AMIDrift), marked as predicted. Subnet and security-group selectors usually
  still select what the nodes run, so they drift nothing here.
- NodeOverlays: proposed ones replace or join the cluster's (a changed one keeps the live ``uid`` and
  loses the status its controller wrote: it is evaluated again); ``--remove`` drops one. The "before"
  run keeps the snapshot's own overlays, so a price or capacity change shows as the difference.
- The "fresh provision" variant keeps only unmanaged nodes and makes every pod of a managed node
  pending again, to price the cheapest cluster the proposal allows.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from reconciler.insight.errors import InsightError
from reconciler.insight.sources import NODECLASS_KEY, NODEOVERLAY_KEY, NODEPOOL_KEY, ProposedConfig, removal_target
from reconciler.model import labels as wk
from reconciler.model.conditions import is_true
from reconciler.model.meta import format_time, owned_by_daemonset
from reconciler.sim.workloads import unschedulable_status

Manifest = dict[str, Any]
ADDED, REMOVED, CHANGED, UNCHANGED = "added", "removed", "changed", "unchanged"
AMI_DRIFT = "AMIDrift"  # the cloud provider's drift reason (reconciler.cloud.aws.drift)
# Kept as-is by the fresh-provision variant (configuration, not capacity).
_CONFIG_KINDS = frozenset(
    {
        "Namespace",
        "PriorityClass",
        "RuntimeClass",
        "StorageClass",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "PodDisruptionBudget",
        "DaemonSet",
        "NodeOverlay",
    }
)


@dataclass(slots=True, frozen=True)
class PoolChange:
    name: str
    change: str  # added | removed | changed | unchanged
    fields: tuple[str, ...] = ()  # spec paths that differ, e.g. template.spec.requirements
    # (key, before, after) for each requirement key whose allowed values change ("-" = not required).
    requirements: tuple[tuple[str, str, str], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "change": self.change, "fields": list(self.fields)}
        if self.requirements:
            data["requirements"] = [{"key": k, "before": b, "after": a} for k, b, a in self.requirements]
        return data


@dataclass(slots=True)
class AppliedProposal:
    objects: list[Manifest]
    pool_changes: list[PoolChange]
    removed_pools: list[str] = field(default_factory=list)
    nodeclass_changes: list[PoolChange] = field(default_factory=list)
    nodeoverlay_changes: list[PoolChange] = field(default_factory=list)


def normalized_spec(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The spec with the Karpenter API model's defaults filled in (what the API server would store), in one
    spelling: lists that are sets (requirements and their values, taints, budgets) in a fixed order, and empty
    maps (``template.metadata: {}``) dropped, so respelling the same spec is no change."""
    from reconciler.api import ValidationFailure, parse_object

    try:
        dumped = parse_object(manifest).model_dump(mode="json", by_alias=True, exclude_none=True)
    except ValidationFailure:
        return dict(manifest.get("spec") or {})
    canonical = _canonical(dumped.get("spec") or {})
    return dict(canonical) if isinstance(canonical, Mapping) else {}


# Lists whose order means nothing (Karpenter hashes them as sets and reads them as sets).
_SET_LISTS = frozenset({"requirements", "values", "taints", "startupTaints", "budgets", "reasons",
                        "subnetSelectorTerms", "securityGroupSelectorTerms", "amiSelectorTerms"})


def _canonical(value: Any, key: str = "") -> Any:
    if isinstance(value, Mapping):
        fields = {k: _canonical(v, str(k)) for k, v in value.items()}
        return {k: v for k, v in sorted(fields.items()) if v != {}}
    if isinstance(value, list):
        items = [_canonical(v) for v in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True, default=str)) if key in _SET_LISTS else items
    return value


def differing_paths(old: Any, new: Any, prefix: str = "", depth: int = 3) -> list[str]:
    """Dotted paths (up to ``depth`` levels) whose values differ."""
    if old == new:
        return []
    if depth == 0 or not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return [prefix or "(spec)"]
    paths = []
    for key in sorted(set(old) | set(new)):
        sub = f"{prefix}.{key}" if prefix else str(key)
        paths.extend(differing_paths(old.get(key), new.get(key), sub, depth - 1))
    return paths


def _key(manifest: Mapping[str, Any]) -> tuple[Any, Any]:
    return manifest.get("apiVersion"), manifest.get("kind")


def apply_proposal(
    objects: Sequence[Manifest], proposed: ProposedConfig, *, now: datetime | None = None
) -> AppliedProposal:
    """``objects`` with the proposal applied; ``now`` is when it takes effect (AMI drift is predicted only
    when it is given: the Drifted condition needs its transition time)."""
    current_pools = {m["metadata"]["name"]: m for m in objects if _key(m) == NODEPOOL_KEY}
    current_classes = {m["metadata"]["name"]: m for m in objects if _key(m) == NODECLASS_KEY}
    current_overlays = {m["metadata"]["name"]: m for m in objects if _key(m) == NODEOVERLAY_KEY}
    proposed_pools = {m["metadata"]["name"]: m for m in proposed.nodepools}
    changes: list[PoolChange] = []
    pools: dict[str, Manifest] = {}
    removed_pools, removed_overlays = _removals(proposed.removed, current_pools, current_overlays)
    for name in sorted(set(current_pools) | set(proposed_pools)):
        old, new = current_pools.get(name), proposed_pools.get(name)
        if new is None and old is not None and not proposed.complete and name not in removed_pools:
            changes.append(PoolChange(name, UNCHANGED))
            pools[name] = old
            continue
        if new is None:
            changes.append(PoolChange(name, REMOVED))
            continue
        if old is None:
            changes.append(PoolChange(name, ADDED))
            pools[name] = copy.deepcopy(new)
            continue
        pools[name], paths = _replacement(old, new)
        changes.append(PoolChange(name, CHANGED, paths, requirement_changes(old, new)) if paths
                       else PoolChange(name, UNCHANGED))
    classes = dict(current_classes)
    class_changes: list[PoolChange] = []
    ami_changed: set[str] = set()  # classes whose amiSelectorTerms changed
    stack_role = _shared_node_role(current_classes, proposed.nodeclasses)
    for manifest in proposed.nodeclasses:
        name = manifest["metadata"]["name"]
        current = current_classes.get(name)
        classes[name] = merged = _merged_nodeclass(current, manifest, stack_role)
        if current is None:
            class_changes.append(PoolChange(name, ADDED))
        elif merged is current:
            class_changes.append(PoolChange(name, UNCHANGED))
        else:
            paths = tuple(differing_paths(normalized_spec(current), normalized_spec(merged)))
            class_changes.append(PoolChange(name, CHANGED, paths))
            if any(path.partition(".")[0] == "amiSelectorTerms" for path in paths):
                ami_changed.add(name)
    overlays, overlay_changes = _merged_overlays(current_overlays, proposed.nodeoverlays, removed_overlays)
    result: list[Manifest] = []
    for manifest in objects:
        if _key(manifest) in (NODEPOOL_KEY, NODECLASS_KEY, NODEOVERLAY_KEY):
            continue
        result.append(_with_predicted_ami_drift(manifest, ami_changed, now) if now else manifest)
    result = [*classes.values(), *overlays, *pools.values(), *result]
    removed = [c.name for c in changes if c.change == REMOVED]
    return AppliedProposal(result, changes, removed, class_changes, overlay_changes)


def _removals(
    entries: Sequence[str], pools: Mapping[str, Manifest], overlays: Mapping[str, Manifest]
) -> tuple[set[str], set[str]]:
    """(NodePools, NodeOverlays) that ``--remove`` names. A bare NAME is whichever of the two the cluster has;
    both is ambiguous and refused, as is a name the cluster does not have."""
    found: dict[str, set[str]] = {"NodePool": set(), "NodeOverlay": set()}
    present = {"NodePool": pools, "NodeOverlay": overlays}
    for entry in entries:
        kind, name = removal_target(entry)
        kinds = [kind] if kind else [k for k in present if name in present[k]]
        if len(kinds) > 1:
            raise InsightError(f"--remove {entry}: the cluster has both a NodePool and a NodeOverlay of that name; "
                               f"say which: --remove nodepool/{name} or --remove nodeoverlay/{name}")
        if not kinds or name not in present[kinds[0]]:
            wanted = kinds or ["NodePool", "NodeOverlay"]
            has = "; ".join(f"{k}s: {', '.join(sorted(present[k])) or 'none'}" for k in wanted)
            raise InsightError(f"--remove {entry}: the cluster has no {' or '.join(wanted)} of that name ({has})")
        found[kinds[0]].add(name)
    return found["NodePool"], found["NodeOverlay"]


def _merged_overlays(
    current: Mapping[str, Manifest], proposed: Sequence[Manifest], removed: set[str]
) -> tuple[list[Manifest], list[PoolChange]]:
    """The NodeOverlays after the change, and what changed (overlays neither given nor removed are left out
    of the changes: they are the cluster's, as they were)."""
    given = {m["metadata"]["name"]: m for m in proposed}
    overlays: list[Manifest] = []
    changes: list[PoolChange] = []
    for name in sorted(set(current) | set(given)):
        old, new = current.get(name), given.get(name)
        if name in removed:
            changes.append(PoolChange(name, REMOVED))
        elif new is None and old is not None:
            overlays.append(old)
        elif old is None and new is not None:
            changes.append(PoolChange(name, ADDED))
            overlays.append(copy.deepcopy(new))
        elif old is not None and new is not None:
            merged, paths = _replacement(old, new)
            changes.append(PoolChange(name, CHANGED, paths) if paths else PoolChange(name, UNCHANGED))
            overlays.append(merged)
    return overlays, changes


def _replacement(old: Manifest, new: Manifest) -> tuple[Manifest, tuple[str, ...]]:
    """What a proposed object leaves in the cluster in place of ``old``, and the spec paths that differ: ``old``
    itself when the spec is only reworded, else a copy of ``new`` keeping the live ``uid`` (the same object)."""
    paths = tuple(differing_paths(normalized_spec(old), normalized_spec(new)))
    if not paths:
        return old, paths
    updated = copy.deepcopy(new)
    uid = (old.get("metadata") or {}).get("uid")
    if uid:
        updated["metadata"]["uid"] = uid
    return updated, paths


# A stack's EC2NodeClasses get the stack's node role at deploy time; offline, a new class with no class of
# the cluster to take it from is planned with this stand-in (it does not change what launches).
STACK_ROLE_PLACEHOLDER = "adze-stack-node-role"


def _shared_node_role(current: Mapping[str, Manifest], proposed: Sequence[Mapping[str, Any]]) -> str:
    """The node role the cluster's classes use: what a stack class without one gets at deploy time.

    Only stack config omits the role (``--nodepools`` files are validated and must name one); the stack
    gives every such class its single node role, so a class the cluster already has shows which it is."""
    declared = [m["metadata"]["name"] for m in proposed if m["metadata"]["name"] in current]
    for name in [*declared, *sorted(current)]:
        role = (current[name].get("spec") or {}).get("role")
        if role:
            return str(role)
    return STACK_ROLE_PLACEHOLDER


def requirement_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[tuple[str, str, str], ...]:
    """Per requirement key of a NodePool, its allowed values before and after, where they differ."""
    def by_key(manifest: Mapping[str, Any]) -> dict[str, str]:
        """As written (``Gt 5``, ``In [c, m]``), entries of one key joined with "and"."""
        raw = (((manifest.get("spec") or {}).get("template") or {}).get("spec") or {}).get("requirements")
        written: dict[str, list[str]] = {}
        for entry in raw if isinstance(raw, list) else []:
            if not isinstance(entry, Mapping) or not isinstance(entry.get("key"), str):
                continue
            values = entry.get("values") or []
            text = str(entry.get("operator"))
            if values:
                text += f" [{', '.join(str(v) for v in sorted(values, key=str))}]"
            if entry.get("minValues") is not None:
                text += f" minValues {entry['minValues']}"
            key = str(entry["key"])
            written.setdefault(wk.NORMALIZED_LABELS.get(key, key), []).append(text)
        return {key: " and ".join(sorted(texts)) for key, texts in written.items()}

    before, after = by_key(old), by_key(new)
    return tuple(
        (key, before.get(key, "-"), after.get(key, "-"))
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
    )


def _merged_nodeclass(current: Manifest | None, proposed: Mapping[str, Any], stack_role: str) -> Manifest:
    spec = normalized_spec(proposed)
    if "role" not in spec and "instanceProfile" not in spec:
        live = (current or {}).get("spec") or {}
        if live.get("instanceProfile") and not live.get("role"):
            spec["instanceProfile"] = live["instanceProfile"]
        else:
            spec["role"] = live.get("role") or stack_role
    unchanged = current is not None and not differing_paths(
        normalized_spec(current), normalized_spec({**proposed, "spec": spec})
    )
    if current is not None and unchanged:
        return current
    merged = copy.deepcopy(dict(proposed))
    merged["spec"] = spec
    if current is not None and (current.get("metadata") or {}).get("uid"):
        merged["metadata"]["uid"] = current["metadata"]["uid"]
    return merged


def _with_predicted_ami_drift(manifest: Manifest, ami_changed: set[str], now: datetime) -> Manifest:
    """A NodeClaim of a class whose AMI selection changed, with the AMIDrift condition; anything else as is."""
    if manifest.get("kind") != "NodeClaim" or not ami_changed:
        return manifest
    spec, metadata = manifest.get("spec") or {}, manifest.get("metadata") or {}
    nodeclass = str((spec.get("nodeClassRef") or {}).get("name") or "")
    if nodeclass not in ami_changed or metadata.get("deletionTimestamp"):
        return manifest
    if is_true(manifest, "Drifted"):
        return manifest  # already drifted: keep its own reason and time
    drifted = copy.deepcopy(manifest)
    drifted.setdefault("status", {})["conditions"] = [
        *(c for c in (manifest.get("status") or {}).get("conditions") or [] if c.get("type") != "Drifted"),
        {
            "type": "Drifted",
            "status": "True",
            "reason": AMI_DRIFT,
            "lastTransitionTime": format_time(now),
            "message": f"EC2NodeClass {nodeclass} amiSelectorTerms changed: the node's AMI is presumably no "
            "longer selected (predicted; AMIs are not resolved offline)",
        },
    ]
    return drifted


def nodeclaims_of_pools(objects: Sequence[Manifest], pools: Sequence[str]) -> list[str]:
    wanted = set(pools)
    return sorted(
        m["metadata"]["name"]
        for m in objects
        if m.get("kind") == "NodeClaim" and ((m["metadata"].get("labels") or {}).get(wk.NODEPOOL) in wanted)
    )


def fresh_provision_objects(objects: Sequence[Manifest], now: datetime) -> list[Manifest]:
    """Configuration, unmanaged nodes with their pods, and every other pod pending again."""
    managed_nodes = {
        m["metadata"]["name"]
        for m in objects
        if m.get("kind") == "Node" and (m["metadata"].get("labels") or {}).get(wk.NODEPOOL)
    }
    result: list[Manifest] = []
    for manifest in objects:
        kind = manifest.get("kind")
        is_config = kind in _CONFIG_KINDS or _key(manifest) in (NODEPOOL_KEY, NODECLASS_KEY)
        unmanaged_node = kind in ("Node", "CSINode") and manifest["metadata"]["name"] not in managed_nodes
        if is_config or unmanaged_node:
            result.append(manifest)
        elif kind == "Pod":
            pod = _pod_for_fresh_provision(manifest, managed_nodes, now)
            if pod is not None:
                result.append(pod)
    return result


def _pod_for_fresh_provision(pod: Manifest, managed_nodes: set[str], now: datetime) -> Manifest | None:
    node_name = (pod.get("spec") or {}).get("nodeName")
    if not node_name or node_name not in managed_nodes:
        return pod
    owners = {ref.get("kind") for ref in pod["metadata"].get("ownerReferences") or []}
    if owned_by_daemonset(pod["metadata"]) or "Node" in owners:
        return None  # recreated per node by its DaemonSet / a static pod of that node
    fresh = copy.deepcopy(pod)
    fresh["spec"].pop("nodeName", None)
    fresh["status"] = unschedulable_status(now)
    return fresh
