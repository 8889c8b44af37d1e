"""A pod being scheduled: its (relaxable) constraints and the data derived from them.

``SchedulingPod`` starts with every preference treated as required (Karpenter's
Respect policy) and ``relax`` drops one preference per call in Karpenter's
order. Identical pods share one ``PodClass`` so derived data and "this
candidate can never take this kind of pod" memos are computed once per class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reconciler.model.pod import (
    NodeSelectorTerm,
    Pod,
    PodAffinityTerm,
    PreferredNodeTerm,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)
from reconciler.model.requirements import Requirements
from reconciler.model.taints import PREFER_NO_SCHEDULE_TOLERATION, Toleration

RESPECT, IGNORE = "Respect", "Ignore"


@dataclass(slots=True, eq=False)
class PodClass:
    """Data shared by identical pods at the same relaxation step."""

    key: tuple[Any, ...]
    requests: dict[str, int]
    requirements: Requirements
    strict_requirements: Requirements
    # Candidates (existing-node names / claim ids) that rejected this class for a reason that only
    # gets worse as pods are added (resources, requirements, taints, ports): skipped thereafter.
    rejected_by: set[object] = field(default_factory=set)
    # Existing nodes a try skipped for lack of room without asking them (``Scheduler._existing_by_room``):
    # (first position, end position, the pod as tried, its labels key, its volumes), in the order of the tries.
    room_skips: list[tuple[int, int, Any, frozenset[tuple[str, str]], dict[str, set[str]]]] = \
        field(default_factory=list)
    # NodePool name -> why a fresh claim from it cannot take this class (limits only shrink during a run).
    template_rejections: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class SchedulingPod:
    pod: Pod
    required_terms: tuple[NodeSelectorTerm, ...]
    preferred_terms: tuple[PreferredNodeTerm, ...]
    affinity_preferred: tuple[WeightedPodAffinityTerm, ...]
    anti_preferred: tuple[WeightedPodAffinityTerm, ...]
    spread: tuple[TopologySpreadConstraint, ...]
    tolerations: tuple[Toleration, ...]
    volume_alternatives: tuple[Requirements, ...] | None = None
    relaxed: tuple[str, ...] = ()
    cls: PodClass | None = None

    @classmethod
    def of(cls, pod: Pod, policy: str = RESPECT,
           volume_alternatives: tuple[Requirements, ...] | None = None) -> SchedulingPod:
        respect = policy != IGNORE
        return cls(
            pod=pod,
            required_terms=pod.required_terms,
            preferred_terms=_by_weight(pod.preferred_terms) if respect else (),
            affinity_preferred=_by_weight(pod.affinity_preferred) if respect else (),
            anti_preferred=_by_weight(pod.anti_affinity_preferred) if respect else (),
            spread=pod.topology_spread if respect else tuple(c for c in pod.topology_spread if c.is_hard),
            tolerations=pod.tolerations,
            volume_alternatives=volume_alternatives,
        )

    def copy(self) -> SchedulingPod:
        return SchedulingPod(
            self.pod, self.required_terms, self.preferred_terms, self.affinity_preferred, self.anti_preferred,
            self.spread, self.tolerations, self.volume_alternatives, self.relaxed, self.cls,
        )

    @property
    def key(self) -> str:
        return self.pod.key

    @property
    def affinity_terms(self) -> tuple[PodAffinityTerm, ...]:
        return (*self.pod.affinity_required, *(w.term for w in self.affinity_preferred))

    @property
    def anti_affinity_terms(self) -> tuple[PodAffinityTerm, ...]:
        return (*self.pod.anti_affinity_required, *(w.term for w in self.anti_preferred))

    def class_key(self) -> tuple[Any, ...]:
        """Pods with equal keys schedule identically (same requests, constraints, labels, namespace)."""
        pod = self.pod
        return (
            pod.namespace,
            frozenset(pod.labels.items()),
            pod.scheduling_requests,
            frozenset(pod.node_selector.items()),
            self.required_terms,
            self.preferred_terms,
            self.affinity_preferred,
            self.anti_preferred,
            pod.affinity_required,
            pod.anti_affinity_required,
            self.spread,
            self.tolerations,
            pod.host_ports,
            self.volume_alternatives,
        )

    def build_class(self) -> PodClass:
        requirements = Requirements.from_labels(self.pod.node_selector)
        strict = requirements
        if self.required_terms:
            strict = requirements.merge(self.required_terms[0].requirements)
        full = strict
        if self.preferred_terms:
            full = strict.merge(self.preferred_terms[0].requirements)
        return PodClass(
            key=self.class_key(),
            requests=dict(self.pod.scheduling_requests),
            requirements=full,
            strict_requirements=strict,
        )

    def relax(self, tolerate_prefer_no_schedule: bool) -> str | None:
        """Drop one preference (Karpenter's order); returns what was dropped, or None when nothing is left."""
        if len(self.required_terms) > 1:
            self.required_terms = self.required_terms[1:]
            return "dropped the first required node affinity term"
        if self.affinity_preferred:
            self.affinity_preferred = self.affinity_preferred[1:]
            return "dropped the heaviest preferred pod affinity term"
        if self.anti_preferred:
            self.anti_preferred = self.anti_preferred[1:]
            return "dropped the heaviest preferred pod anti-affinity term"
        if self.preferred_terms:
            self.preferred_terms = self.preferred_terms[1:]
            return "dropped the heaviest preferred node affinity term"
        for i, constraint in enumerate(self.spread):
            if not constraint.is_hard:
                self.spread = (*self.spread[:i], *self.spread[i + 1:])
                return f"dropped the ScheduleAnyway topology spread on {constraint.topology_key}"
        if tolerate_prefer_no_schedule and not any(
            t.operator == "Exists" and not t.key and t.effect in ("", "PreferNoSchedule") for t in self.tolerations
        ):
            self.tolerations = (*self.tolerations, PREFER_NO_SCHEDULE_TOLERATION)
            return "tolerated PreferNoSchedule taints"
        return None


def _by_weight(terms: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(sorted(terms, key=lambda t: -t.weight))
