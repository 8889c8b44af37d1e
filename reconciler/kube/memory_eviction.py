"""The Eviction subresource's PodDisruptionBudget check (kubernetes/pkg/registry/core/pod/storage/eviction.go).

The budget's status is computed on the spot from the stored pods and controllers (``model.pdb_status``: an
in-process cluster has no disruption controller keeping it current). An eviction of a terminal, pending or
terminating pod skips budgets; a pod under two budgets cannot be evicted (500); an unready pod is evicted
under ``unhealthyPodEvictionPolicy: AlwaysAllow``, or under ``IfHealthyBudget`` (the default) while the
budget has its desired healthy pods (and desires some); otherwise the eviction needs a disruption allowed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.kube.api import ApiError, Manifest, TooManyRequestsError
from reconciler.kube.semantics import selector_object_matcher
from reconciler.model.pdb_status import BudgetStatus, BudgetValueError, ControllerLookup, budget_status, is_pod_ready


def can_ignore_budget(pod: Mapping[str, Any]) -> bool:
    """Terminal, pending and already-terminating pods are evicted without consulting budgets."""
    phase = (pod.get("status") or {}).get("phase", "Pending")
    return phase in ("Succeeded", "Failed", "Pending") or bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def covering_budgets(pod: Mapping[str, Any], pdbs: Iterable[Manifest]) -> list[Manifest]:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return [pdb for pdb in pdbs if selector_object_matcher((pdb.get("spec") or {}).get("selector"))(labels)]


def refusal(status: BudgetStatus) -> str:
    """The eviction subresource's 429 message, with what the computation found."""
    if status.failure:
        return (f"Cannot evict pod as it would violate the pod's disruption budget. The disruption budget "
                f"{status.name} allows no disruptions: {status.failure}")
    text = ("Cannot evict pod as it would violate the pod's disruption budget. "
            f"The disruption budget {status.name} needs {status.desired_healthy} healthy pods "
            f"and has {status.current_healthy} currently")
    if status.expected_pods <= 0 and status.unmanaged:
        text += (f" (it expects 0 pods: the {len(status.unmanaged)} pod(s) it selects have no controller, "
                 "so only an integer minAvailable counts them)")
    return text


def check_eviction(
    pod: Manifest, pdbs: Iterable[Manifest], namespace_pods: Iterable[Manifest], lookup: ControllerLookup | None = None
) -> None:
    """Raise ``TooManyRequestsError`` when a budget forbids evicting ``pod``; return when allowed."""
    if can_ignore_budget(pod):
        return
    covering = covering_budgets(pod, pdbs)
    if not covering:
        return
    if len(covering) > 1:
        raise ApiError(
            500,
            "InternalError",
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        )
    pdb = covering[0]
    try:
        status = budget_status(pdb, namespace_pods, lookup)
    except BudgetValueError as err:
        raise ApiError(422, "Invalid", str(err)) from None
    if not is_pod_ready(pod):
        policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
        if policy == "AlwaysAllow":
            return
        if not status.failure and status.current_healthy >= status.desired_healthy > 0:
            return
    if status.disruptions_allowed > 0:
        return
    raise TooManyRequestsError(refusal(status))
