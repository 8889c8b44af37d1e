"""Karpenter's pod metrics (its ``metrics.pod`` controller), from the pods in the cluster-state cache.

Per pod: ``karpenter_pods_state`` (1, labelled by the pod, its owner, its node and that node's
pool/zone/arch/capacity type/instance type, phase, readiness). While it is Pending: seconds since creation
unstarted and unbound, and, once the provisioner found it a home, since then (``provisioning_*``); seconds
the provisioner has seen it without a decision. When a pod that was seen Pending turns Ready or binds, the
durations go into ``pods_startup_duration_seconds`` / ``pods_bound_duration_seconds`` (from the Ready and
PodScheduled conditions' transition times) and their ``provisioning_`` variants; a terminal or deleted pod
just drops out.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from reconciler.model import labels as wk
from reconciler.model.conditions import condition_of
from reconciler.model.meta import parse_time_or_none
from reconciler.observability import Metrics
from reconciler.state.store import StateStore


def _owner(pod: Mapping[str, Any], namespace: str) -> str:
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    if not owners:
        return ""
    owner = owners[0]
    return f"/apis/{owner.get('apiVersion', '')}/namespaces/{namespace}/{str(owner.get('kind', '')).lower()}s/" \
           f"{owner.get('name', '')}"


class PodMetrics:
    def __init__(self, metrics: Metrics, store: StateStore) -> None:
        self.metrics = metrics
        self.store = store
        self._pending: set[str] = set()  # pods seen Pending and not yet started
        self._unbound: set[str] = set()  # pods seen Pending and not yet bound

    def update(self, key: str, pod: Mapping[str, Any] | None, now: datetime) -> None:
        """Refresh one pod's series (``pod`` None: it was deleted)."""
        if pod is None:
            self._forget(key)
            return
        metadata = pod.get("metadata") or {}
        name, namespace = str(metadata.get("name", "")), str(metadata.get("namespace") or "default")
        ident = {"name": name, "namespace": namespace}
        self.metrics.pods_state.update(key, [(self._state_labels(pod, name, namespace), 1.0)])
        times = self.store.pod_times.get(key)
        scheduled_at = times.scheduled if times is not None else None
        self._undecided(pod, ident, times, now)
        self._startup(key, pod, ident, scheduled_at, now)
        self._bound(key, pod, ident, scheduled_at, now)

    def _state_labels(self, pod: Mapping[str, Any], name: str, namespace: str) -> dict[str, str]:
        status, spec = pod.get("status") or {}, pod.get("spec") or {}
        node_name = str(spec.get("nodeName") or "")
        node = self.store.get("Node", node_name) if node_name else None
        labels = ((node or {}).get("metadata") or {}).get("labels") or {}
        ready = condition_of(pod, "Ready")
        return {
            "name": name, "namespace": namespace, "owner": _owner(pod, namespace), "node": node_name,
            "scheduled": "true" if node_name else "false", "nodepool": labels.get(wk.NODEPOOL, ""),
            "zone": labels.get(wk.ZONE, ""), "arch": labels.get(wk.ARCH, ""),
            "capacity_type": labels.get(wk.CAPACITY_TYPE, ""), "instance_type": labels.get(wk.INSTANCE_TYPE, ""),
            "phase": str(status.get("phase") or ""), "ready": "true" if ready and ready.get("status") == "True" else
            "false", "managed": "true" if labels.get(wk.NODEPOOL) else "false",
        }

    def _undecided(self, pod: Mapping[str, Any], ident: dict[str, str], times: Any, now: datetime) -> None:
        gauge = self.metrics.pods_provisioning_scheduling_undecided_time
        scheduled = condition_of(pod, "PodScheduled")
        if (times is not None and times.decided is not None) or (scheduled and scheduled.get("status") == "True"):
            _remove(gauge, ident)
        elif times is not None:
            gauge.labels(**ident).set(max(0.0, (now - times.acked).total_seconds()))

    def _startup(self, key: str, pod: Mapping[str, Any], ident: dict[str, str], scheduled_at: datetime | None,
                 now: datetime) -> None:
        metrics = self.metrics
        created = parse_time_or_none((pod.get("metadata") or {}).get("creationTimestamp"))
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Pending" or (key in self._pending and phase not in ("Succeeded", "Failed")):
            ready = condition_of(pod, "Ready")
            ready_at = parse_time_or_none(ready.get("lastTransitionTime")) if ready and \
                ready.get("status") == "True" else None
            if phase != "Pending" and ready_at is not None and key in self._pending:
                if created is not None:
                    metrics.pods_startup_duration.observe(max(0.0, (ready_at - created).total_seconds()))
                if scheduled_at is not None:
                    metrics.pods_provisioning_startup_duration.observe(
                        max(0.0, (ready_at - scheduled_at).total_seconds()))
                self._started(key, ident)
                return
            self._pending.add(key)
            if created is not None:
                metrics.pods_unstarted_time.labels(**ident).set(max(0.0, (now - created).total_seconds()))
            if scheduled_at is not None:
                metrics.pods_provisioning_unstarted_time.labels(**ident).set(
                    max(0.0, (now - scheduled_at).total_seconds()))
            else:
                _remove(metrics.pods_provisioning_unstarted_time, ident)
        elif key in self._pending:  # terminal before it ever ran Ready: no startup duration (Karpenter's)
            self._started(key, ident)

    def _started(self, key: str, ident: dict[str, str]) -> None:
        self._pending.discard(key)
        _remove(self.metrics.pods_unstarted_time, ident)
        _remove(self.metrics.pods_provisioning_unstarted_time, ident)
        self.store.pod_times.pop(key, None)

    def _bound(self, key: str, pod: Mapping[str, Any], ident: dict[str, str], scheduled_at: datetime | None,
               now: datetime) -> None:
        metrics = self.metrics
        condition = condition_of(pod, "PodScheduled")
        bound = condition is not None and condition.get("status") == "True"
        if (pod.get("status") or {}).get("phase") == "Pending" and not bound:
            created = parse_time_or_none((pod.get("metadata") or {}).get("creationTimestamp"))
            if created is not None:
                metrics.pods_unbound_time.labels(**ident).set(max(0.0, (now - created).total_seconds()))
            if scheduled_at is not None:
                metrics.pods_provisioning_unbound_time.labels(**ident).set(
                    max(0.0, (now - scheduled_at).total_seconds()))
            else:
                _remove(metrics.pods_provisioning_unbound_time, ident)
            self._unbound.add(key)
            return
        if key in self._unbound and bound and condition is not None:
            _remove(metrics.pods_unbound_time, ident)
            _remove(metrics.pods_provisioning_unbound_time, ident)
            bound_at = parse_time_or_none(condition.get("lastTransitionTime"))
            created = parse_time_or_none((pod.get("metadata") or {}).get("creationTimestamp"))
            if bound_at is not None and created is not None:
                metrics.pods_bound_duration.observe(max(0.0, (bound_at - created).total_seconds()))
            if bound_at is not None and scheduled_at is not None:
                metrics.pods_provisioning_bound_duration.observe(max(0.0, (bound_at - scheduled_at).total_seconds()))
            self._unbound.discard(key)

    def _forget(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        ident = {"name": name, "namespace": namespace}
        self.metrics.pods_state.delete(key)
        for gauge in (self.metrics.pods_unstarted_time, self.metrics.pods_provisioning_unstarted_time,
                      self.metrics.pods_unbound_time, self.metrics.pods_provisioning_unbound_time,
                      self.metrics.pods_provisioning_scheduling_undecided_time):
            _remove(gauge, ident)
        self._pending.discard(key)
        self._unbound.discard(key)
        self.store.pod_times.pop(key, None)


def _remove(gauge: Any, ident: Mapping[str, str]) -> None:
    with contextlib.suppress(KeyError):  # no such series
        gauge.remove(ident["name"], ident["namespace"])
