"""A PodDisruptionBudget's status as Kubernetes' disruption controller computes it (pure).

kubernetes/pkg/controller/disruption keeps each budget's ``status`` current; the eviction subresource and
Karpenter read it. Where no such controller runs (the in-process API server, the simulator, a snapshot
whose counts went stale as the simulation moved), ``budget_status`` computes it from the objects, with the
controller's rules:

- the pods of a budget are every pod of its namespace its selector matches (terminal and pending included);
- an integer ``minAvailable`` expects exactly those pods; ``maxUnavailable`` and a percentage
  ``minAvailable`` expect the summed scale of the pods' controllers: a ReplicaSet's Deployment (its
  ``spec.replicas``), a ReplicaSet of none, a StatefulSet, a ReplicationController — each found by name and,
  when both carry one, uid. A pod without a controller reference is unmanaged and left out of the count. A
  pod whose controller kind has no scale (Job, DaemonSet, a static pod's Node) fails the computation, as
  does a controller that is not stored — unless the budget carries a status the real controller observed
  (``expectedPods``: a snapshot of a cluster whose dump left its controllers out), which is used instead;
- percentages round up (``GetScaledValueFromIntOrPercent`` with roundUp, for both fields); desired healthy
  is ``expected - maxUnavailable`` (at least 0) or ``minAvailable``;
- healthy pods are Ready and not terminating; disruptions allowed are healthy - desired, and none when no
  pod is expected, neither field is set, or the computation failed (the controller's failSafe).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.model.selectors import LabelSelector, SelectorError

# (kind, API group, namespace, name) -> the stored object of that kind and group, or None.
ControllerLookup = Callable[[str, str, str, str], Mapping[str, Any] | None]

# Controller kinds that have no scale subresource: a budget counting from scale cannot use their pods.
_WITHOUT_SCALE = {
    ("batch", "Job"): "jobs.batch",
    ("batch", "CronJob"): "cronjobs.batch",
    ("apps", "DaemonSet"): "daemonsets.apps",
    ("extensions", "DaemonSet"): "daemonsets.extensions",
    ("", "Node"): "nodes",
}


@dataclass(slots=True, frozen=True)
class BudgetStatus:
    """What the disruption controller would write to a budget's status."""

    name: str
    expected_pods: int
    desired_healthy: int
    current_healthy: int
    # Why the controller could not compute the budget (it then allows nothing, as its failSafe does).
    failure: str = ""
    observed: bool = False  # expected pods taken from the budget's own status (its controllers are not stored)
    unmanaged: tuple[str, ...] = ()  # selected pods without a controller (not in the expected count)

    @property
    def disruptions_allowed(self) -> int:
        if self.failure or self.expected_pods <= 0:
            return 0
        return max(0, self.current_healthy - self.desired_healthy)

    def as_status(self) -> dict[str, int]:
        """The status fields the controller writes (``observedGeneration``, conditions left to the caller)."""
        return {
            "expectedPods": self.expected_pods,
            "desiredHealthy": self.desired_healthy,
            "currentHealthy": self.current_healthy,
            "disruptionsAllowed": self.disruptions_allowed,
        }


def is_pod_ready(pod: Mapping[str, Any]) -> bool:
    """The Ready condition is True (a running pod without conditions at all counts as ready)."""
    status = pod.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return status.get("phase") == "Running" and not status.get("conditions")


def is_pod_healthy(pod: Mapping[str, Any]) -> bool:
    """Ready and not terminating: what the controller counts as currentHealthy."""
    return not (pod.get("metadata") or {}).get("deletionTimestamp") and is_pod_ready(pod)


class BudgetValueError(ValueError):
    """A ``minAvailable``/``maxUnavailable`` that is neither an integer nor a percentage (the message names it)."""


class _CountFailed(Exception):
    """The controller's sync error: the budget allows nothing (its message says why)."""


def scaled_value(value: Any, total: int, *, field: str) -> int:
    """An IntOrString budget value against ``total``; percentages round up (both fields, as the controller)."""
    if isinstance(value, bool):
        raise BudgetValueError(f"{field}: {value!r} is neither an integer nor a percentage")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.endswith("%") and text[:-1].isdigit():
        return math.ceil(int(text[:-1]) * total / 100)
    if text.isdigit():  # a quoted integer: read as the integer it spells
        return int(text)
    raise BudgetValueError(f"{field}: {value!r} is neither an integer nor a percentage")


def is_integer(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, str) and value.isdigit())


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ownerReference with ``controller: true`` (Kubernetes' GetControllerOf)."""
    for owner in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(owner, Mapping) and owner.get("controller"):
            return owner
    return None


def _group(reference: Mapping[str, Any]) -> str:
    api_version = str(reference.get("apiVersion") or "")
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def _resolve(reference: Mapping[str, Any], kind: str, groups: tuple[str, ...], namespace: str,
             lookup: ControllerLookup) -> Mapping[str, Any] | None:
    """The stored object the reference names when it is of ``kind`` in one of ``groups`` (uids must agree
    when both are known)."""
    group = _group(reference)
    if reference.get("kind") != kind or group not in groups:
        return None
    found = lookup(kind, group, namespace, str(reference.get("name") or ""))
    if found is None:
        return None
    uid, stored_uid = reference.get("uid"), (found.get("metadata") or {}).get("uid")
    return found if not uid or not stored_uid or uid == stored_uid else None


def _replicas(obj: Mapping[str, Any]) -> int:
    replicas = (obj.get("spec") or {}).get("replicas")
    return replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 1  # defaulted to 1


def controller_scale(reference: Mapping[str, Any], namespace: str, lookup: ControllerLookup) -> tuple[str, int] | None:
    """(identity, desired replicas) of the controller a pod's controller reference leads to, as the disruption
    controller's finders resolve it; None when no stored controller answers. Raises ``_CountFailed`` for a
    controller kind without scale."""
    found = _resolve(reference, "ReplicationController", ("",), namespace, lookup)
    if found is not None:
        return f"ReplicationController/{found['metadata'].get('name')}", _replicas(found)
    replicaset = _resolve(reference, "ReplicaSet", ("apps", "extensions"), namespace, lookup)
    if replicaset is not None:
        parent = controller_of(replicaset)
        if parent is None or parent.get("kind") != "Deployment":
            return f"ReplicaSet/{replicaset['metadata'].get('name')}", _replicas(replicaset)
        deployment = _resolve(parent, "Deployment", ("apps", "extensions"), namespace, lookup)
        if deployment is not None:
            return f"Deployment/{deployment['metadata'].get('name')}", _replicas(deployment)
        return None  # a ReplicaSet of a Deployment that is not there: no finder answers
    found = _resolve(reference, "StatefulSet", ("apps",), namespace, lookup)
    if found is not None:
        return f"StatefulSet/{found['metadata'].get('name')}", _replicas(found)
    resource = _WITHOUT_SCALE.get((_group(reference), str(reference.get("kind") or "")))
    if resource is not None:
        raise _CountFailed(f"{resource} does not implement the scale subresource")
    return None


def _expected_scale(pods: list[Mapping[str, Any]], namespace: str, lookup: ControllerLookup | None
                    ) -> tuple[int, tuple[str, ...]]:
    """SUM over the selected pods' distinct controllers of their scale, and the unmanaged pods."""
    scales: dict[str, int] = {}
    unmanaged: list[str] = []
    for pod in pods:
        name = str((pod.get("metadata") or {}).get("name", ""))
        reference = controller_of(pod)
        if reference is None:
            unmanaged.append(name)
            continue
        found = controller_scale(reference, namespace, lookup) if lookup is not None else None
        if found is None:
            raise _CountFailed(f"found no controllers for pod {name!r}")
        scales.setdefault(*found)
    return sum(scales.values()), tuple(unmanaged)


def _observed_expected(pdb: Mapping[str, Any]) -> int | None:
    """``status.expectedPods`` when the real controller wrote one for the budget's current generation."""
    status = pdb.get("status") or {}
    expected = status.get("expectedPods")
    if not isinstance(expected, int) or isinstance(expected, bool):
        return None
    generation = (pdb.get("metadata") or {}).get("generation")
    observed = status.get("observedGeneration")
    if isinstance(generation, int) and isinstance(observed, int) and observed < generation:
        return None  # written for an older spec
    return expected


def selected_pods(pdb: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The pods of the budget's namespace (``pods`` are that namespace's) its selector matches (an unreadable
    selector matches none)."""
    try:
        selector = LabelSelector.from_manifest((pdb.get("spec") or {}).get("selector"), path="spec.selector")
    except SelectorError:
        return []
    return [pod for pod in pods if selector.matches((pod.get("metadata") or {}).get("labels") or {})]


def budget_status(
    pdb: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], lookup: ControllerLookup | None = None
) -> BudgetStatus:
    """The status the disruption controller would compute for one budget; ``pods``: its namespace's pods,
    ``lookup``: the stored controllers (None: none are known)."""
    metadata = pdb.get("metadata") or {}
    spec = pdb.get("spec") or {}
    name = str(metadata.get("name", ""))
    namespace = str(metadata.get("namespace") or "default")
    selected = selected_pods(pdb, pods)
    healthy = sum(1 for pod in selected if is_pod_healthy(pod))
    max_unavailable, min_available = spec.get("maxUnavailable"), spec.get("minAvailable")
    if max_unavailable is None and min_available is None:
        return BudgetStatus(name, 0, 0, healthy)  # neither field: the controller expects no pod and allows nothing
    if max_unavailable is None and is_integer(min_available):
        desired = scaled_value(min_available, len(selected), field=f"{name}.spec.minAvailable")
        return BudgetStatus(name, len(selected), desired, healthy)
    observed = False
    try:
        expected, unmanaged = _expected_scale(selected, namespace, lookup)
    except _CountFailed as failed:
        fallback = _observed_expected(pdb) if str(failed).startswith("found no controllers") else None
        if fallback is None:
            return BudgetStatus(name, 0, 0, healthy, failure=str(failed))
        expected, unmanaged, observed = fallback, (), True
    if max_unavailable is not None:
        unavailable = scaled_value(max_unavailable, expected, field=f"{name}.spec.maxUnavailable")
        desired = max(0, expected - unavailable)
    else:
        desired = scaled_value(min_available, expected, field=f"{name}.spec.minAvailable")
    return BudgetStatus(name, expected, desired, healthy, observed=observed, unmanaged=unmanaged)
