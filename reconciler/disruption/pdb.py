"""PodDisruptionBudgets as disruption sees them: which pods they cover and whether they allow an eviction.

``disruptionsAllowed`` is read from the PDB's status when the API server's
disruption controller has written one; otherwise it is computed from the pods
the way that controller does (healthy = Ready and not terminating; minAvailable /
maxUnavailable as a count or a percentage rounded up). As in Kubernetes, a pod
matched by more than one PDB cannot be evicted at all.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconciler.disruption import pods as podutil

Manifest = Mapping[str, Any]


class SelectorError(ValueError):
    """A label selector that cannot be evaluated; the message names the field path."""


@dataclass(slots=True, frozen=True)
class LabelSelector:
    """A Kubernetes ``LabelSelector``; ``None`` selector (not ``{}``) matches nothing."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[tuple[str, str, frozenset[str]], ...] = ()
    matches_nothing: bool = False

    @classmethod
    def from_manifest(cls, raw: Any, *, path: str = "spec.selector") -> LabelSelector:
        if raw is None:
            return cls(matches_nothing=True)
        if not isinstance(raw, Mapping):
            raise SelectorError(f"{path}: expected a label selector map")
        labels = tuple(sorted((str(k), str(v)) for k, v in (raw.get("matchLabels") or {}).items()))
        expressions = []
        for i, expr in enumerate(raw.get("matchExpressions") or []):
            operator = expr.get("operator")
            if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
                raise SelectorError(f"{path}.matchExpressions[{i}].operator: {operator!r} is not supported")
            values = frozenset(str(v) for v in expr.get("values") or [])
            expressions.append((str(expr.get("key", "")), str(operator), values))
        return cls(labels, tuple(expressions))

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.matches_nothing:
            return False
        if any(labels.get(key) != value for key, value in self.match_labels):
            return False
        for key, operator, values in self.match_expressions:
            present = key in labels
            if operator == "In" and not (present and labels[key] in values):
                return False
            if operator == "NotIn" and present and labels[key] in values:
                return False
            if operator == "Exists" and not present:
                return False
            if operator == "DoesNotExist" and present:
                return False
        return True


@dataclass(slots=True, frozen=True)
class Pdb:
    key: str  # "namespace/name"
    namespace: str
    selector: LabelSelector
    disruptions_allowed: int
    fully_blocking: bool  # maxUnavailable 0 / 0% or minAvailable 100%: never allows an eviction
    always_allow_unhealthy: bool  # unhealthyPodEvictionPolicy: AlwaysAllow


def _scaled(value: Any, total: int, *, path: str) -> int:
    """An int-or-percent field scaled against ``total`` (percentages round up, as the controller does)."""
    if isinstance(value, bool):
        raise SelectorError(f"{path}: expected an integer or a percentage")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.endswith("%") and text[:-1].isdigit():
        return -(-int(text[:-1]) * total // 100)
    if text.isdigit():
        return int(text)
    raise SelectorError(f"{path}: {value!r} is not an integer or a percentage")


def _is_fully_blocking(spec: Mapping[str, Any]) -> bool:
    max_unavailable = spec.get("maxUnavailable")
    min_available = spec.get("minAvailable")
    return max_unavailable in (0, "0", "0%") or min_available == "100%"


def computed_disruptions_allowed(spec: Mapping[str, Any], matching: Sequence[Manifest], *, path: str) -> int:
    """What the disruption controller would write to ``status.disruptionsAllowed`` for these pods."""
    counted = [p for p in matching if not podutil.is_terminal(p)]
    expected = len(counted)
    healthy = sum(1 for p in counted if not podutil.is_terminating(p) and podutil.is_ready(p))
    if spec.get("maxUnavailable") is not None:
        desired = expected - _scaled(spec["maxUnavailable"], expected, path=f"{path}.spec.maxUnavailable")
    elif spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected, path=f"{path}.spec.minAvailable")
    else:
        desired = 1  # neither set: the API defaults minAvailable to 1
    return max(0, healthy - max(0, desired))


class PdbLimits:
    """All PDBs of a snapshot, indexed by namespace, answering "may this pod be evicted now"."""

    __slots__ = ("_by_namespace",)

    def __init__(self, pdbs: Iterable[Pdb]) -> None:
        self._by_namespace: dict[str, list[Pdb]] = defaultdict(list)
        for pdb in pdbs:
            self._by_namespace[pdb.namespace].append(pdb)

    @classmethod
    def from_manifests(
        cls, pdbs: Iterable[Manifest], pods: Iterable[Manifest], *, prefer_status: bool = True
    ) -> PdbLimits:
        """Build from PDB manifests; ``pods`` (all pods of the snapshot) are used when a PDB has no status."""
        pods_by_namespace: dict[str, list[Manifest]] = defaultdict(list)
        for pod in pods:
            pods_by_namespace[(pod.get("metadata") or {}).get("namespace") or "default"].append(pod)
        items = []
        for manifest in pdbs:
            metadata = manifest.get("metadata") or {}
            namespace = metadata.get("namespace") or "default"
            key = f"{namespace}/{metadata.get('name', '')}"
            path = f"PodDisruptionBudget {key}"
            spec = manifest.get("spec") or {}
            selector = LabelSelector.from_manifest(spec.get("selector"), path=f"{path}.spec.selector")
            status = manifest.get("status") or {}
            if prefer_status and "disruptionsAllowed" in status:
                allowed = int(status["disruptionsAllowed"])
            else:
                matching = [
                    p for p in pods_by_namespace.get(namespace, ())
                    if selector.matches((p.get("metadata") or {}).get("labels") or {})
                ]
                allowed = computed_disruptions_allowed(spec, matching, path=path)
            items.append(
                Pdb(
                    key=key,
                    namespace=namespace,
                    selector=selector,
                    disruptions_allowed=allowed,
                    fully_blocking=_is_fully_blocking(spec),
                    always_allow_unhealthy=spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow",
                )
            )
        return cls(items)

    def matching(self, pod: Manifest) -> list[Pdb]:
        metadata = pod.get("metadata") or {}
        candidates = self._by_namespace.get(metadata.get("namespace") or "default")
        if not candidates:
            return []
        labels = metadata.get("labels") or {}
        return [pdb for pdb in candidates if pdb.selector.matches(labels)]

    def eviction_blocker(
        self, pod: Manifest, now: datetime, *, fully_blocking_only: bool = False
    ) -> str | None:
        """Why evicting ``pod`` would be refused now (None when it would be allowed or is not evicted at all).

        ``fully_blocking_only`` asks the weaker question "will it *ever* be evictable"
        (used to decide whether to plan capacity for the pod).
        """
        if not podutil.is_evictable(pod, now):
            return None
        matching = self.matching(pod)
        if len(matching) > 1:
            keys = ", ".join(sorted(p.key for p in matching))
            return f"pod {podutil.pod_key(pod)} is matched by several PDBs ({keys}): not evictable"
        for pdb in matching:
            if pdb.always_allow_unhealthy and podutil.is_explicitly_unready(pod):
                return None
            if fully_blocking_only:
                if pdb.fully_blocking:
                    return f"PDB {pdb.key} never allows evicting pod {podutil.pod_key(pod)}"
            elif pdb.disruptions_allowed <= 0:
                return f"PDB {pdb.key} allows 0 disruptions (pod {podutil.pod_key(pod)})"
        return None

    def is_currently_reschedulable(self, pod: Manifest, now: datetime) -> bool:
        """Would move if its node were drained now (not do-not-disrupt, not fully PDB-blocked)."""
        return (
            podutil.is_reschedulable(pod)
            and podutil.do_not_disrupt(pod, now) is None
            and self.eviction_blocker(pod, now, fully_blocking_only=True) is None
        )


def pods_blocker(pods: Iterable[Manifest], pdbs: PdbLimits, now: datetime) -> str | None:
    """The first reason these pods (one node's) forbid a graceful disruption, or None.

    Blocks on an active do-not-disrupt pod (DaemonSet and static pods included,
    as in Karpenter), a PDB allowing 0 disruptions, or a pod under several PDBs.
    """
    pods = list(pods)
    for pod in pods:
        protection = podutil.do_not_disrupt(pod, now)
        if protection is not None:
            return protection.describe(podutil.pod_key(pod))
    for pod in pods:
        blocker = pdbs.eviction_blocker(pod, now)
        if blocker is not None:
            return blocker
    return None
