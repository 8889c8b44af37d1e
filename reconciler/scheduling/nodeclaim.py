"""A NodeClaim being planned in this run: it narrows its requirements and instance types as pods join.

Instance-type options are filtered lazily: every check (requirements, resources
plus DaemonSet overhead, host ports, an available offering) only gets harder as
pods are added, so a type that fails once is dropped for good and ``can_add``
only needs to find *one* type that still works. The full option list is
computed once, when the run ends (``finalize``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.model import labels as wk
from reconciler.model.pod import HostPort
from reconciler.model.requirements import ALLOW_UNDEFINED_WELL_KNOWN, Requirement, Requirements
from reconciler.scheduling.existing import Rejection
from reconciler.scheduling.instancetypes import TypeInfo, min_values_shortfall, order_by_price
from reconciler.scheduling.podinfo import PodClass, SchedulingPod
from reconciler.scheduling.templates import ClaimTemplate
from reconciler.scheduling.topology import Topology, TopologyError


@dataclass(slots=True)
class Acceptance:
    requirements: Requirements
    requests: dict[str, int]
    options: list[TypeInfo] | None  # fully filtered options, when they had to be computed
    min_values_relaxed: bool = False


class NewNodeClaim:
    """A planned NodeClaim; ``number`` orders claims by creation and names the hostname placeholder."""

    __slots__ = (
        "hostname", "min_values_relaxed", "number", "options", "pods", "ports", "requests", "requirements",
        "template", "upper",
    )

    def __init__(self, template: ClaimTemplate, options: Sequence[TypeInfo], number: int) -> None:
        self.template = template
        self.number = number
        self.hostname = f"hostname-placeholder-{number:04d}"
        self.requirements = template.requirements.add(Requirement.single(wk.HOSTNAME, self.hostname))
        self.options: list[TypeInfo] = list(options)
        self.requests: dict[str, int] = {}
        self.pods: list[SchedulingPod] = []
        self.ports: list[tuple[str, HostPort]] = []
        self.min_values_relaxed = False
        self.upper = _upper(self.options)

    @property
    def nodepool(self) -> str:
        return self.template.name

    def can_add(
        self,
        sp: SchedulingPod,
        cls: PodClass,
        labels_key: frozenset[tuple[str, str]],
        topology: Topology,
        *,
        relax_min_values: bool = False,
    ) -> Acceptance | Rejection:
        for taint in self.template.taints:
            if not any(t.tolerates(taint) for t in sp.tolerations):
                return Rejection(f"did not tolerate taint {taint}")
        total = dict(self.requests)
        upper = self.upper
        for name, value in cls.requests.items():
            value += total.get(name, 0)
            total[name] = value
            if value > upper.get(name, 0):
                return Rejection("no instance type has room")
        error = self.requirements.compatible(cls.requirements, ALLOW_UNDEFINED_WELL_KNOWN)
        if error is not None:
            return Rejection(f"incompatible requirements, {error}")
        pod_ports = sp.pod.host_ports
        for port in pod_ports:
            for owner, used in self.ports:
                if owner != sp.key and port.conflicts(used):
                    return Rejection(f"host port {port} conflicts with pod {owner}")
        base = self.requirements.merge(cls.requirements)
        alternatives = sp.volume_alternatives or (None,)
        topology_bound = len(alternatives) > 1
        last: Rejection = Rejection("no instance type matched")
        for alternative in alternatives:
            requirements = base
            if alternative is not None:
                error = requirements.compatible(alternative, ALLOW_UNDEFINED_WELL_KNOWN)
                if error is not None:
                    last = Rejection(f"incompatible volume requirements, {error}", monotone=not topology_bound)
                    continue
                requirements = requirements.merge(alternative)
            try:
                narrowed = topology.add_requirements(sp, labels_key, cls.strict_requirements, requirements)
            except TopologyError as err:
                last = Rejection(str(err), monotone=False)
                continue
            if narrowed is not requirements:
                topology_bound = True
            if narrowed.has_min_values():
                options = self.filter_options(narrowed, total, pod_ports)
                shortfall = min_values_shortfall(options, narrowed) if options else {}
                if options and shortfall and relax_min_values:
                    narrowed = narrowed.add(*(
                        narrowed[key].with_min_values(have) for key, (_, have) in shortfall.items()
                    ))
                    return Acceptance(narrowed, total, options, min_values_relaxed=True)
                if options and not shortfall:
                    return Acceptance(narrowed, total, options)
                last = Rejection(_min_values_message(shortfall) if shortfall else "no instance type matched",
                                 monotone=not topology_bound)
                continue
            if self._first_fit(narrowed, total, pod_ports) is not None:
                return Acceptance(narrowed, total, None)
            last = Rejection("no instance type matched", monotone=not topology_bound)
        return last

    def add(self, sp: SchedulingPod, labels_key: frozenset[tuple[str, str]], accepted: Acceptance,
            topology: Topology) -> None:
        self.pods.append(sp)
        self.requests = accepted.requests
        self.requirements = accepted.requirements
        self.min_values_relaxed = self.min_values_relaxed or accepted.min_values_relaxed
        topology.register(wk.HOSTNAME, self.hostname)
        topology.record(sp, labels_key, self.template.taints, accepted.requirements)
        self.ports.extend((sp.key, port) for port in sp.pod.host_ports)
        if accepted.options is not None:
            self.options = accepted.options
            self.upper = _upper(self.options)
        else:
            self._prune()

    # -- instance types ------------------------------------------------------------------------

    def _type_works(self, info: TypeInfo, requirements: Requirements, total: dict[str, int],
                    pod_ports: Sequence[HostPort]) -> bool:
        template = self.template
        group = template.daemon_groups[template.group_index[info.name]]
        allocatable = info.allocatable
        overhead = group.overhead
        for name, value in total.items():
            if value + overhead.get(name, 0) > allocatable.get(name, 0):
                return False
        for name, value in overhead.items():
            if name not in total and value > allocatable.get(name, 0):
                return False
        if pod_ports and group.host_ports:
            for port in pod_ports:
                if any(port.conflicts(used) for used in group.host_ports):
                    return False
        if not info.compatible(requirements):
            return False
        return info.has_offering(requirements)

    def _first_fit(self, requirements: Requirements, total: dict[str, int],
                   pod_ports: Sequence[HostPort]) -> TypeInfo | None:
        for info in self.options:
            if self._type_works(info, requirements, total, pod_ports):
                return info
        return None

    def _prune(self) -> None:
        """Drop leading options that no longer work for the committed state (they never will again)."""
        options = self.options
        drop = 0
        for info in options:
            if self._type_works(info, self.requirements, self.requests, ()):
                break
            drop += 1
        if drop:
            del options[:drop]
            self.upper = _upper(options)

    def filter_options(self, requirements: Requirements | None = None, total: dict[str, int] | None = None,
                       pod_ports: Sequence[HostPort] = ()) -> list[TypeInfo]:
        requirements = self.requirements if requirements is None else requirements
        total = self.requests if total is None else total
        return [info for info in self.options if self._type_works(info, requirements, total, pod_ports)]

    def daemon_overhead(self, options: Sequence[TypeInfo]) -> dict[str, int]:
        """The smallest overhead among the DaemonSet groups that still have a candidate type."""
        names = {info.name for info in options}
        overhead: dict[str, int] | None = None
        for group in self.template.daemon_groups:
            if not group.type_names & names:
                continue
            if overhead is None:
                overhead = dict(group.overhead)
            else:
                overhead = {k: min(v, group.overhead.get(k, 0)) for k, v in overhead.items()}
        return overhead or {}

    def ordered_options(self) -> list[TypeInfo]:
        final = self.requirements.without(wk.HOSTNAME)
        return order_by_price(self.filter_options(), final)


def _upper(options: Sequence[TypeInfo]) -> dict[str, int]:
    upper: dict[str, int] = {}
    for info in options:
        for name, value in info.allocatable.items():
            if value > upper.get(name, 0):
                upper[name] = value
    return upper


def _min_values_message(shortfall: dict[str, tuple[int, int]]) -> str:
    parts = ", ".join(f"{key} needs {want} distinct values but only {have} remain" for key, (want, have) in
                      shortfall.items())
    return f"minValues requirement not met: {parts}"


