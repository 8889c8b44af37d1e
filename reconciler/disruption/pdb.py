"""PodDisruptionBudgets as disruption sees them: which pods they cover and whether they allow an eviction.

``disruptionsAllowed`` is read from the PDB's status when the API server's
disruption controller has written one; otherwise it is computed from the pods
the way that controller does (healthy = running, Ready and not terminating;
minAvailable / maxUnavailable as a count or a percentage rounded up). As in
Kubernetes, a pod matched by more than one PDB cannot be evicted at all.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconciler.disruption import pods as podutil
from reconciler.disruption.pods import PodFacts, PodLike, facts
from reconciler.model.selectors import LabelSelector, SelectorError

Manifest = Mapping[str, Any]


class PdbError(ValueError):
    """A PodDisruptionBudget that cannot be evaluated; the message names the object and field."""


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
        raise PdbError(f"{path}: expected an integer or a percentage")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.endswith("%") and text[:-1].isdigit():
        return -(-int(text[:-1]) * total // 100)
    if text.isdigit():
        return int(text)
    raise PdbError(f"{path}: {value!r} is not an integer or a percentage")


def _is_fully_blocking(spec: Mapping[str, Any]) -> bool:
    return spec.get("maxUnavailable") in (0, "0%") or spec.get("minAvailable") == "100%"


def computed_disruptions_allowed(spec: Mapping[str, Any], matching: Sequence[PodFacts], *, path: str) -> int:
    """What the disruption controller would write to ``status.disruptionsAllowed`` for these pods.

    ``maxUnavailable`` and a percentage ``minAvailable`` are scaled by the expected pod count, which the
    controller reads from the pods' controllers; a pod without one (or a mirror pod, owned by its Node) makes
    that count unknowable and the controller then allows nothing -- as the Eviction API will refuse, so a
    node holding such a pod is never chosen on the belief that it can be drained.
    """
    counted = [p for p in matching if not podutil.is_terminal(p)]
    scaled = spec.get("maxUnavailable") is not None or isinstance(spec.get("minAvailable"), str)
    if scaled and any(p.owner_kind in ("", "Node") for p in counted):
        return 0
    expected = len(counted)
    healthy = sum(1 for p in counted if podutil.is_healthy(p))
    if spec.get("maxUnavailable") is not None:
        desired = expected - _scaled(spec["maxUnavailable"], expected, path=f"{path}.spec.maxUnavailable")
    elif spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected, path=f"{path}.spec.minAvailable")
    else:
        desired = 1  # neither set: the API defaults minAvailable to 1
    return max(0, healthy - max(0, desired))


class PdbLimits:
    """All PDBs of a snapshot, indexed by namespace, answering "may this pod be evicted now"."""

    __slots__ = ("_by_namespace", "fingerprint")

    def __init__(self, pdbs: Iterable[Pdb]) -> None:
        self._by_namespace: dict[str, list[Pdb]] = defaultdict(list)
        for pdb in pdbs:
            self._by_namespace[pdb.namespace].append(pdb)
        # Everything the answers below depend on, by value: two limits with equal fingerprints answer alike
        # (what lets a node's assessment be kept from one pass to the next).
        self.fingerprint: tuple[Pdb, ...] = tuple(pdb for listed in self._by_namespace.values() for pdb in listed)

    @classmethod
    def from_manifests(
        cls, pdbs: Iterable[Manifest], pods: Iterable[PodLike], *, prefer_status: bool = True
    ) -> PdbLimits:
        """Build from PDB manifests; ``pods`` (all pods of the snapshot) are used when a PDB has no status.

        Raises ``PdbError`` naming the PDB and field when one cannot be read.
        """
        pods_by_namespace: dict[str, list[PodFacts]] | None = None
        items = []
        for manifest in pdbs:
            metadata = manifest.get("metadata") or {}
            namespace = str(metadata.get("namespace") or "default")
            key = f"{namespace}/{metadata.get('name', '')}"
            path = f"PodDisruptionBudget {key}"
            spec = manifest.get("spec") or {}
            try:
                selector = LabelSelector.from_manifest(spec.get("selector"), path=f"{path}: spec.selector")
            except SelectorError as err:
                raise PdbError(str(err)) from None
            status = manifest.get("status") or {}
            if prefer_status and "disruptionsAllowed" in status:
                allowed = int(status["disruptionsAllowed"])
            else:
                if pods_by_namespace is None:
                    pods_by_namespace = defaultdict(list)
                    for pod in pods:
                        view = facts(pod)
                        pods_by_namespace[view.namespace].append(view)
                matching = [p for p in pods_by_namespace.get(namespace, ()) if selector.matches(p.labels)]
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

    def matching(self, pod: PodLike | PodFacts) -> list[Pdb]:
        view = facts(pod)
        candidates = self._by_namespace.get(view.namespace)
        if not candidates:
            return []
        return [pdb for pdb in candidates if pdb.selector.matches(view.labels)]

    def eviction_blocker(
        self, pod: PodLike | PodFacts, now: datetime, *, fully_blocking_only: bool = False
    ) -> str | None:
        """Why evicting ``pod`` would be refused now (None when it would be allowed or is not evicted at all).

        ``fully_blocking_only`` asks the weaker question "will it *ever* be evictable"
        (used to decide whether to plan capacity for the pod).
        """
        view = facts(pod)
        if not podutil.is_evictable(view, now):
            return None
        matching = self.matching(view)
        if len(matching) > 1:
            keys = ", ".join(sorted(p.key for p in matching))
            return f"pod {view.key} is matched by several PDBs ({keys}): not evictable"
        for pdb in matching:
            if pdb.always_allow_unhealthy and podutil.is_explicitly_unready(view):
                return None
            if fully_blocking_only:
                if pdb.fully_blocking:
                    return f"PDB {pdb.key} never allows evicting pod {view.key}"
            elif pdb.disruptions_allowed <= 0:
                return f"PDB {pdb.key} allows 0 disruptions (pod {view.key})"
        return None

    def is_currently_reschedulable(self, pod: PodLike | PodFacts, now: datetime) -> bool:
        """Would move if its node were drained now (not do-not-disrupt, not fully PDB-blocked)."""
        view = facts(pod)
        return (
            podutil.is_reschedulable(view)
            and podutil.do_not_disrupt(view, now) is None
            and self.eviction_blocker(view, now, fully_blocking_only=True) is None
        )


def pods_blocker(pods: Iterable[PodLike | PodFacts], pdbs: PdbLimits, now: datetime) -> str | None:
    """The first reason these pods (one node's) forbid a graceful disruption, or None.

    Blocks on an active do-not-disrupt pod (DaemonSet and static pods included,
    as in Karpenter), a PDB allowing 0 disruptions, or a pod under several PDBs.
    """
    views = [facts(p) for p in pods]
    for view in views:
        protection = podutil.do_not_disrupt(view, now)
        if protection is not None:
            return protection.describe(view.key)
    for view in views:
        blocker = pdbs.eviction_blocker(view, now)
        if blocker is not None:
            return blocker
    return None
