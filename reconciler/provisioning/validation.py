"""Which pending pods the provisioner takes on, and why it ignores the others.

Karpenter refuses pods that select restricted labels (``kubernetes.io/hostname``,
the ``karpenter.sh`` domain), use ``matchFields``, or whose volumes cannot be
resolved; it silently skips pods that insist on *not* running on a Karpenter
node (``karpenter.sh/nodepool DoesNotExist``) and, by default, pods with
Dynamic Resource Allocation claims.
"""

from __future__ import annotations

from reconciler.model import labels as wk
from reconciler.model.pod import Pod
from reconciler.model.requirements import DOES_NOT_EXIST, Requirements
from reconciler.scheduling.volumes import validate_volumes
from reconciler.state.cluster import ClusterState

WELL_KNOWN = wk.WELL_KNOWN_LABELS


def restricted_label(key: str) -> bool:
    if key in WELL_KNOWN:
        return False
    domain = key.partition("/")[0] if "/" in key else ""
    return key == wk.HOSTNAME or domain == wk.GROUP or domain.endswith("." + wk.GROUP)


def _selection_requirements(pod: Pod) -> list[Requirements]:
    return [Requirements.from_labels(pod.node_selector), *(t.requirements for t in pod.required_terms)]


def refuses_karpenter_nodes(pod: Pod) -> bool:
    """The pod requires ``karpenter.sh/nodepool DoesNotExist``: it must never land on a node we launch."""
    for requirements in _selection_requirements(pod):
        requirement = requirements.get(wk.NODEPOOL)
        if requirement is not None and requirement.operator == DOES_NOT_EXIST:
            return True
    for term in pod.preferred_terms[:1]:
        requirement = term.requirements.get(wk.NODEPOOL)
        if requirement is not None and requirement.operator == DOES_NOT_EXIST:
            return True
    return False


def validation_problem(pod: Pod, state: ClusterState) -> str | None:
    """Why Karpenter would ignore this pod (reported as an event), or None."""
    for key in pod.node_selector:
        if restricted_label(wk.NORMALIZED_LABELS.get(key, key)):
            return f"ignoring pod: nodeSelector uses restricted label {key}"
    for i, term in enumerate(pod.required_terms):
        if term.has_match_fields:
            return f"ignoring pod: required node affinity term {i} uses matchFields, which is not supported"
        for key in term.requirements:
            if restricted_label(key):
                return f"ignoring pod: required node affinity term {i} uses restricted label {key}"
    problem = validate_volumes(pod, state) if pod.volumes else None
    return f"ignoring pod: {problem}" if problem else None


DRA_IGNORED = "ignoring pod: Dynamic Resource Allocation claims are not supported (IGNORE_DRA_REQUESTS)"
NOT_FOR_KARPENTER = "the pod requires karpenter.sh/nodepool DoesNotExist, so Karpenter never provisions for it"


def split_pods(
    pods: list[Pod], state: ClusterState, *, ignore_dra: bool = True
) -> tuple[list[Pod], dict[str, str], dict[str, str]]:
    """(pods to schedule, ignored with an event: key -> reason, ignored silently: key -> reason)."""
    accepted: list[Pod] = []
    ignored: dict[str, str] = {}
    silent: dict[str, str] = {}
    for pod in pods:
        if refuses_karpenter_nodes(pod):
            silent[pod.key] = NOT_FOR_KARPENTER
            continue
        if ignore_dra and pod.has_resource_claims:
            ignored[pod.key] = DRA_IGNORED
            continue
        problem = validation_problem(pod, state)
        if problem:
            ignored[pod.key] = problem
            continue
        accepted.append(pod)
    return accepted, ignored, silent
