"""operatorpkg's status-condition and termination metrics for NodeClaims, NodePools, Nodes and EC2NodeClasses.

Fed by the cluster-state cache: every change of an object is compared with what was seen of it last, so a
condition that changed status counts as a transition (with how long the previous status lasted, from the
two ``lastTransitionTime``\\ s), and a deletion that completed is timed from its ``deletionTimestamp``. The
gauges (conditions present, seconds in the current status, seconds terminating) are rebuilt on ``refresh``.
Like operatorpkg's, the observation is best effort: two changes between two events count as one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from reconciler.model.meta import parse_time_or_none
from reconciler.observability.runtime_metrics import (
    INITIALIZED_LABEL,
    NODECLASS_LABEL,
    NODEPOOL_LABEL,
    RuntimeMetrics,
    StatusMetrics,
)

KINDS = {"NodeClaim": "nodeclaim", "NodePool": "nodepool", "Node": "node", "EC2NodeClass": "ec2nodeclass"}
# Object label -> metric label (operatorpkg's toPrometheusLabel of the keys Karpenter asks for).
_OBJECT_LABELS = {"karpenter.k8s.aws/ec2nodeclass": NODECLASS_LABEL, "karpenter.sh/nodepool": NODEPOOL_LABEL,
                  "karpenter.sh/initialized": INITIALIZED_LABEL}
Observed = dict[str, tuple[str, str, datetime | None]]  # condition type -> (status, reason, lastTransitionTime)


def _conditions(manifest: Mapping[str, Any]) -> Observed:
    observed: Observed = {}
    for condition in (manifest.get("status") or {}).get("conditions") or []:
        if not isinstance(condition, Mapping) or not condition.get("type"):
            continue
        stamp = parse_time_or_none(condition.get("lastTransitionTime"))
        observed[str(condition["type"])] = (str(condition.get("status", "")), str(condition.get("reason", "")), stamp)
    return observed


def _key(manifest: Mapping[str, Any]) -> tuple[str, str]:
    metadata = manifest.get("metadata") or {}
    return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")


class ConditionMetrics:
    def __init__(self, metrics: RuntimeMetrics) -> None:
        self._metrics = metrics
        self._seen: dict[tuple[str, str, str], Observed] = {}  # (kind, namespace, name) -> conditions
        self._deleting: dict[tuple[str, str, str], tuple[datetime, dict[str, str]]] = {}

    def _extra(self, family: StatusMetrics, manifest: Mapping[str, Any]) -> dict[str, str]:
        labels = (manifest.get("metadata") or {}).get("labels") or {}
        wanted = {metric: key for key, metric in _OBJECT_LABELS.items()}
        return {name: str(labels.get(wanted[name], "")) for name in family.extra_labels}

    def observe(self, kind: str, manifest: Mapping[str, Any], deleted: bool, now: datetime) -> None:
        """One change of an object as the cache saw it."""
        short = KINDS.get(kind)
        if short is None:
            return
        family = self._metrics.status[short]
        namespace, name = _key(manifest)
        key = (short, namespace, name)
        extra = self._extra(family, manifest)
        if deleted:
            self._seen.pop(key, None)
            started = self._deleting.pop(key, None)
            if started is not None:
                histogram = family.termination_duration
                child = histogram.labels(**started[1]) if started[1] else histogram  # kinds without extra labels
                child.observe(max(0.0, (now - started[0]).total_seconds()))
            return
        deletion = parse_time_or_none((manifest.get("metadata") or {}).get("deletionTimestamp"))
        if deletion is not None:
            self._deleting[key] = (deletion, extra)
        current = _conditions(manifest)
        previous = self._seen.get(key, {})
        self._seen[key] = current
        for kind_name, (status, reason, stamp) in current.items():
            before = previous.get(kind_name)
            if before is not None and before[0] == status:
                continue
            family.transitions.labels(type=kind_name, status=status, reason=reason, **extra).inc()
            if before is not None and before[2] is not None and stamp is not None:
                family.transition_seconds.labels(type=kind_name, status=before[0], **extra).observe(
                    max(0.0, (stamp - before[2]).total_seconds()))

    def refresh(self, objects: Mapping[str, Iterable[Mapping[str, Any]]], now: datetime) -> None:
        """Rebuild the gauges from the objects held now (``objects``: cache kind -> manifests)."""
        for kind, short in KINDS.items():
            family = self._metrics.status[short]
            counts: dict[str, list[tuple[dict[str, str], float]]] = {}
            ages: dict[str, list[tuple[dict[str, str], float]]] = {}
            terminating: dict[str, list[tuple[dict[str, str], float]]] = {}
            for manifest in objects.get(kind, ()):
                namespace, name = _key(manifest)
                extra = self._extra(family, manifest)
                object_key = f"{namespace}/{name}"
                counts[object_key], ages[object_key] = [], []
                for kind_name, (status, reason, stamp) in _conditions(manifest).items():
                    labels = {"namespace": namespace, "name": name, "type": kind_name, "status": status,
                              "reason": reason, **extra}
                    counts[object_key].append((labels, 1.0))
                    if stamp is not None:
                        ages[object_key].append((labels, max(0.0, (now - stamp).total_seconds())))
                deletion = parse_time_or_none((manifest.get("metadata") or {}).get("deletionTimestamp"))
                if deletion is not None:
                    terminating[object_key] = [({"namespace": namespace, "name": name, **extra},
                                                max(0.0, (now - deletion).total_seconds()))]
            family.count.replace_all(counts)
            family.current_status_seconds.replace_all(ages)
            family.termination_current_time.replace_all(terminating)
