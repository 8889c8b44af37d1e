"""PodDisruptionBudgets as drain, provisioning and disruption see them (Karpenter's ``utils/pdb``): which pods
they cover and whether they allow an eviction.

``disruptionsAllowed`` is read from the PDB's status when the API server's
disruption controller has written one; otherwise it is computed from the pods
and their controllers the way that controller does (``model.pdb_status``). As in
Kubernetes, a pod matched by more than one PDB cannot be evicted at all.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconciler.model import podutil
from reconciler.model.pdb_status import BudgetValueError, ControllerLookup, budget_status
from reconciler.model.pod import Pod
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


def _is_fully_blocking(spec: Mapping[str, Any]) -> bool:
    return spec.get("maxUnavailable") in (0, "0%") or spec.get("minAvailable") == "100%"


def computed_disruptions_allowed(
    manifest: Manifest, namespace_pods: Iterable[Manifest], lookup: ControllerLookup | None, *, path: str
) -> int:
    """What the disruption controller would write to ``status.disruptionsAllowed`` (``namespace_pods``: the
    budget's namespace's pods; ``lookup``: the stored workload controllers, None when none are known)."""
    try:
        return budget_status(manifest, namespace_pods, lookup).disruptions_allowed
    except BudgetValueError as err:
        raise PdbError(f"{path}: spec.{err}") from None


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
        cls, pdbs: Iterable[Manifest], pods: Iterable[Manifest], *, prefer_status: bool = True,
        lookup: ControllerLookup | None = None,
    ) -> PdbLimits:
        """Build from PDB manifests; ``pods`` (all pods of the snapshot, manifests) and ``lookup`` (its workload
        controllers) are used when a PDB has no status.

        Raises ``PdbError`` naming the PDB and field when one cannot be read.
        """
        pods_by_namespace: dict[str, list[Manifest]] | None = None
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
                        pod_namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
                        pods_by_namespace[pod_namespace].append(pod)
                namespace_pods = pods_by_namespace.get(namespace, ())
                allowed = computed_disruptions_allowed(manifest, namespace_pods, lookup, path=path)
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

    def matching(self, pod: Pod) -> list[Pdb]:
        candidates = self._by_namespace.get(pod.namespace)
        if not candidates:
            return []
        return [pdb for pdb in candidates if pdb.selector.matches(pod.labels)]

    def eviction_blocker(
        self, pod: Pod, now: datetime, *, fully_blocking_only: bool = False
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
            return f"pod {pod.key} is matched by several PDBs ({keys}): not evictable"
        for pdb in matching:
            if pdb.always_allow_unhealthy and podutil.is_explicitly_unready(pod):
                return None
            if fully_blocking_only:
                if pdb.fully_blocking:
                    return f"PDB {pdb.key} never allows evicting pod {pod.key}"
            elif pdb.disruptions_allowed <= 0:
                return f"PDB {pdb.key} allows 0 disruptions (pod {pod.key})"
        return None

    def is_currently_reschedulable(self, pod: Pod, now: datetime) -> bool:
        """Would move if its node were drained now (not do-not-disrupt, not fully PDB-blocked)."""
        return (
            podutil.is_reschedulable(pod)
            and podutil.do_not_disrupt(pod, now) is None
            and self.eviction_blocker(pod, now, fully_blocking_only=True) is None
        )


def pods_blocker(pods: Iterable[Pod], pdbs: PdbLimits, now: datetime) -> str | None:
    """The first reason these pods (one node's) forbid a graceful disruption, or None.

    Blocks on an active do-not-disrupt pod (DaemonSet and static pods included,
    as in Karpenter), a PDB allowing 0 disruptions, or a pod under several PDBs.
    """
    pods = list(pods)
    for pod in pods:
        protection = podutil.do_not_disrupt(pod, now)
        if protection is not None:
            return protection.describe(pod.key)
    for pod in pods:
        blocker = pdbs.eviction_blocker(pod, now)
        if blocker is not None:
            return blocker
    return None
