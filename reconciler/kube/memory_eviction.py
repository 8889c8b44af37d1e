"""The Eviction subresource's PodDisruptionBudget check, computed from the pods themselves.

A real cluster's disruption controller keeps ``status.disruptionsAllowed`` current; an
in-process cluster has no such controller, so the budget is evaluated on the spot from the
pods the budget selects, with the same rules (kubernetes/pkg/registry/core/pod/storage/eviction.go
and pkg/controller/disruption).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.kube.api import ApiError, Manifest, TooManyRequestsError
from reconciler.kube.semantics import selector_object_matcher


@dataclass(slots=True, frozen=True)
class BudgetStatus:
    name: str
    expected_pods: int
    desired_healthy: int
    current_healthy: int
    # Set when the expected count cannot be known (a selected pod without a resolvable controller under
    # maxUnavailable or a percentage): the disruption controller then fails safe and allows nothing.
    unknown_scale: str = ""

    @property
    def disruptions_allowed(self) -> int:
        if self.unknown_scale:
            return 0
        return max(0, self.current_healthy - self.desired_healthy)


def is_pod_healthy(pod: Mapping[str, Any]) -> bool:
    """Ready and not terminating; a running pod without a Ready condition counts as ready."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return status.get("phase") == "Running"


def can_ignore_budget(pod: Mapping[str, Any]) -> bool:
    """Terminal, pending and already-terminating pods are evicted without consulting budgets."""
    phase = (pod.get("status") or {}).get("phase", "Pending")
    return phase in ("Succeeded", "Failed", "Pending") or bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def _scaled(value: Any, total: int, *, field: str) -> int:
    """An IntOrString budget value; percentages round up, as the disruption controller does."""
    if isinstance(value, int):
        return value
    text = str(value)
    if text.endswith("%"):
        try:
            return math.ceil(int(text[:-1]) * total / 100)
        except ValueError:
            pass
    else:
        try:
            return int(text)
        except ValueError:
            pass
    raise ApiError(422, "Invalid", f"{field}: {value!r} is neither an integer nor a percentage")


# Given a pod's controller ownerReference, the desired replica count of the workload behind it
# (a ReplicaSet owned by a Deployment answers with the Deployment's), or None when unknown.
ScaleLookup = Callable[[Mapping[str, Any]], int | None]


def _controller_of(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for owner in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if owner.get("controller"):
            return owner
    return None


def _expected_pods(selected: list[Mapping[str, Any]], scale_of: ScaleLookup | None) -> int | str:
    """What the disruption controller calls expectedCount: the summed scale of the controllers of the
    selected pods. A pod without a controller, or whose controller's scale is unknown, makes the count
    unknowable; the reason is returned instead (counting such pods as themselves would let every
    eviction shrink the budget's base, so it would never run out)."""
    expected, seen = 0, set()
    for pod in selected:
        owner = _controller_of(pod)
        name = (pod.get("metadata") or {}).get("name", "")
        if owner is None:
            return f"found no controller ref for pod {name!r}"
        replicas = scale_of(owner) if scale_of is not None else None
        if replicas is None:
            return f"found no controllers for pod {name!r}"
        if owner.get("uid", owner.get("name")) not in seen:
            seen.add(owner.get("uid", owner.get("name")))
            expected += replicas
    return expected


def budget_status(
    pdb: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], scale_of: ScaleLookup | None = None
) -> BudgetStatus:
    """Healthy and desired pod counts for one budget over the pods of its namespace."""
    metadata = pdb.get("metadata") or {}
    spec = pdb.get("spec") or {}
    selects = selector_object_matcher(spec.get("selector"))
    selected = [
        pod
        for pod in pods
        if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        and selects((pod.get("metadata") or {}).get("labels") or {})
    ]
    name = str(metadata.get("name", ""))
    min_available = spec.get("minAvailable")
    unknown_scale = ""
    if spec.get("maxUnavailable") is None and isinstance(min_available, int):
        expected = len(selected)  # an integer minAvailable needs no controller scale
    else:
        counted = _expected_pods(selected, scale_of)
        if isinstance(counted, str):
            expected, unknown_scale = len(selected), counted
        else:
            expected = counted
    if spec.get("maxUnavailable") is not None:
        unavailable = _scaled(spec["maxUnavailable"], expected, field=f"{name}.spec.maxUnavailable")
        desired = max(0, expected - unavailable)
    elif spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected, field=f"{name}.spec.minAvailable")
    else:
        desired = expected  # no field set: the API server defaults minAvailable to 1 only on create
    healthy = sum(1 for pod in selected if is_pod_healthy(pod))
    return BudgetStatus(
        name=name, expected_pods=expected, desired_healthy=desired, current_healthy=healthy,
        unknown_scale=unknown_scale,
    )


def check_eviction(
    pod: Manifest, pdbs: Iterable[Manifest], namespace_pods: Iterable[Manifest], scale_of: ScaleLookup | None = None
) -> None:
    """Raise ``TooManyRequestsError`` when a budget forbids evicting ``pod``; return when allowed."""
    if can_ignore_budget(pod):
        return
    labels = (pod.get("metadata") or {}).get("labels") or {}
    covering = [pdb for pdb in pdbs if selector_object_matcher((pdb.get("spec") or {}).get("selector"))(labels)]
    if not covering:
        return
    if len(covering) > 1:
        raise ApiError(
            500,
            "InternalError",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        )
    pdb = covering[0]
    status = budget_status(pdb, list(namespace_pods), scale_of)
    if not is_pod_healthy(pod):
        policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy", "IfHealthyBudget")
        if policy == "AlwaysAllow" or status.current_healthy >= status.desired_healthy:
            return
    elif status.disruptions_allowed > 0:
        return
    if status.unknown_scale:
        raise TooManyRequestsError(
            f"Cannot evict pod: the disruption budget {status.name} allows no disruptions ({status.unknown_scale})"
        )
    raise TooManyRequestsError(
        "Cannot evict pod as it would violate the pod's disruption budget. "
        f"The disruption budget {status.name} needs {status.desired_healthy} healthy pods "
        f"and has {status.current_healthy} currently"
    )
