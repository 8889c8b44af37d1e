"""What each NodePool can launch: its NodeClaim template, candidate instance types and DaemonSet overhead.

Built once per scheduling run. A template's requirements are the pool's
requirements intersected with its template labels and the labels Karpenter puts
on every node of the pool. Instance types are pre-filtered by those
requirements (a pool left with none is skipped with a reason), and grouped by
the set of DaemonSet pods that would land on them, so each group carries one
overhead and one set of daemon host ports.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.model import labels as wk
from reconciler.model.nodepool import NodePool
from reconciler.model.pod import HostPort, Pod
from reconciler.model.requirements import ALLOW_UNDEFINED_WELL_KNOWN, Requirement, Requirements
from reconciler.model.taints import PREFER_NO_SCHEDULE, PREFER_NO_SCHEDULE_TOLERATION, Taint
from reconciler.scheduling.instancetypes import TypeInfo, max_capacity, min_values_shortfall


@dataclass(slots=True, eq=False)
class DaemonGroup:
    """Instance types on which the same DaemonSet pods would run."""

    overhead: dict[str, int]
    host_ports: tuple[HostPort, ...]
    daemons: tuple[str, ...]
    type_names: set[str] = field(default_factory=set)
    types: list[TypeInfo] = field(default_factory=list)
    _ascending: dict[str, tuple[list[int], list[TypeInfo]]] = field(default_factory=dict)

    def too_small(self, total: dict[str, int]) -> set[int]:
        """Ids of the group's types lacking room for ``total`` plus the group's overhead (bisect per resource)."""
        failing: set[int] = set()
        needed = dict(self.overhead)
        for name, value in total.items():
            needed[name] = needed.get(name, 0) + value
        for name, value in needed.items():
            if value <= 0:
                continue
            ascending = self._ascending.get(name)
            if ascending is None:
                ordered = sorted(self.types, key=lambda t: t.allocatable.get(name, 0))
                ascending = ([t.allocatable.get(name, 0) for t in ordered], ordered)
                self._ascending[name] = ascending
            values, ordered = ascending
            failing.update(id(t) for t in ordered[: bisect.bisect_left(values, value)])
        return failing


@dataclass(slots=True, eq=False)
class ClaimTemplate:
    nodepool: NodePool
    requirements: Requirements
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    types: list[TypeInfo]
    daemon_groups: list[DaemonGroup]
    group_index: dict[str, int]  # instance type name -> index into daemon_groups
    # Largest first: a planned claim looks for any type that still fits, and the big ones fit longest.
    types_by_size: list[TypeInfo] = field(default_factory=list)
    max_capacity: dict[str, int] = field(default_factory=dict)
    upper: dict[str, int] = field(default_factory=dict)  # per resource, the largest allocatable of any type
    # Keys every type defines with a finite value set -> the union of those values (e.g. zones, arch, names):
    # requirements that miss the union rule out every type without looking at them one by one.
    type_domains: dict[str, frozenset[str]] = field(default_factory=dict)
    # The types with an available reserved offering (usually none): what a claim may hold reservations of.
    reserved_types: list[TypeInfo] = field(default_factory=list)

    def out_of_domain(self, requirements: Requirements) -> str | None:
        """A requirement no instance type of the pool can meet, or None."""
        for key, values in self.type_domains.items():
            requirement = requirements.get(key)
            # DoesNotExist (no values) is met by any type that lacks the key; the per-type check decides.
            if (
                requirement is not None and not requirement.complement and requirement.values
                and not requirement.values & values
            ):
                return f"no instance type offers {requirement}"
        return None
    _by_capacity: dict[str, list[TypeInfo]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.nodepool.name

    def by_capacity(self, resource: str) -> list[TypeInfo]:
        """The template's types, largest ``resource`` capacity first."""
        found = self._by_capacity.get(resource)
        if found is None:
            found = sorted(self.types, key=lambda t: -t.capacity.amount(resource))
            self._by_capacity[resource] = found
        return found


def template_requirements(nodepool: NodePool) -> tuple[Requirements, dict[str, str]]:
    labels = dict(nodepool.labels)
    labels[wk.NODEPOOL] = nodepool.name
    nodeclass = nodepool.node_class_label
    if nodeclass is not None:
        labels[nodeclass[0]] = nodeclass[1]
    requirements = nodepool.requirements.merge(Requirements.from_labels(labels)).add(
        Requirement.single(wk.REGISTERED, "true"), Requirement.single(wk.INITIALIZED, "true")
    )
    return requirements, labels


def build_template(
    nodepool: NodePool, types: Sequence[TypeInfo], daemon_pods: Sequence[Pod], *, relax_min_values: bool = False
) -> ClaimTemplate | str:
    """The pool's template, or the reason the pool can launch nothing.

    A pool whose types cannot meet its ``minValues`` is dropped under the Strict policy; under BestEffort
    it stays and each claim relaxes minValues to what its options offer (upstream keeps such pools)."""
    requirements, labels = template_requirements(nodepool)
    if not types:
        return f"NodePool {nodepool.name} has no instance types"
    options = [t for t in types if t.compatible(requirements) and t.has_offering(requirements)]
    if not options:
        return (
            f"NodePool {nodepool.name}: none of its {len(types)} instance types has an available offering "
            f"matching its requirements ({requirements})"
        )
    shortfall = min_values_shortfall(options, requirements)
    if shortfall and not relax_min_values:
        missing = ", ".join(f"{k} needs {want} values, {have} available" for k, (want, have) in shortfall.items())
        return f"NodePool {nodepool.name}: its instance types cannot meet minValues ({missing})"
    by_size = sorted(options, key=lambda t: (-t.allocatable.get("cpu", 0), -t.allocatable.get("memory", 0), t.name))
    upper: dict[str, int] = {}
    for info in options:
        for name, value in info.allocatable.items():
            upper[name] = max(upper.get(name, 0), value)
    template = ClaimTemplate(nodepool, requirements, labels, nodepool.taints, options, [], {}, by_size,
                             max_capacity(options), upper, _type_domains(options),
                             [t for t in options if t.reserved])
    _group_daemons(template, daemon_pods)
    return template


def _type_domains(types: Sequence[TypeInfo]) -> dict[str, frozenset[str]]:
    domains: dict[str, set[str]] = {}
    common: set[str] | None = None
    for info in types:
        finite = {key for key, req in info.requirements.items() if not req.complement}
        common = finite if common is None else common & finite
        for key in finite:
            domains.setdefault(key, set()).update(info.requirements[key].values)
    return {key: frozenset(domains[key]) for key in common or ()}


def _daemon_fits_template(template: ClaimTemplate, pod: Pod) -> list[Requirements]:
    """The daemon pod's strict requirement alternatives that the template could satisfy (empty: none)."""
    tolerations = (*pod.tolerations, PREFER_NO_SCHEDULE_TOLERATION)
    for taint in template.taints:
        if not any(t.tolerates(taint) for t in tolerations):
            return []
    base = Requirements.from_labels(pod.node_selector)
    terms = [base.merge(term.requirements) for term in pod.required_terms] or [base]
    return [t for t in terms if template.requirements.incompatibility(t, ALLOW_UNDEFINED_WELL_KNOWN) is None]


def _group_daemons(template: ClaimTemplate, daemon_pods: Sequence[Pod]) -> None:
    alternatives = [(pod, _daemon_fits_template(template, pod)) for pod in daemon_pods]
    groups: dict[tuple[str, ...], DaemonGroup] = {}
    for info in template.types:
        compatible = tuple(
            pod.key for pod, terms in alternatives if any(info.requirements.intersects(t) is None for t in terms)
        )
        group = groups.get(compatible)
        if group is None:
            overhead: dict[str, int] = {}
            ports: list[HostPort] = []
            for pod, _ in alternatives:
                if pod.key in compatible:
                    for name, value in pod.scheduling_requests.items():
                        overhead[name] = overhead.get(name, 0) + value
                    ports.extend(pod.host_ports)
            group = DaemonGroup(overhead, tuple(ports), compatible)
            groups[compatible] = group
            template.daemon_groups.append(group)
        group.type_names.add(info.name)
        group.types.append(info)
        template.group_index[info.name] = template.daemon_groups.index(group)


def daemon_pod_fits_node(pod: Pod, taints: Sequence[Taint], labels: Mapping[str, str]) -> bool:
    """Would this DaemonSet pod run on a node with these taints and labels?"""
    for taint in taints:
        if taint.effect == PREFER_NO_SCHEDULE:
            continue
        if not any(t.tolerates(taint) for t in pod.tolerations):
            return False
    node = Requirements.from_labels(labels)
    base = Requirements.from_labels(pod.node_selector)
    terms = [base.merge(term.requirements) for term in pod.required_terms] or [base]
    return any(node.incompatibility(term) is None for term in terms)


def has_prefer_no_schedule(templates: Sequence[ClaimTemplate]) -> bool:
    return any(t.effect == PREFER_NO_SCHEDULE for template in templates for t in template.taints)
