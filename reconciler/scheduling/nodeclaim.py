"""A NodeClaim being planned in this run: it narrows its requirements and instance types as pods join.

Instance-type options are filtered lazily: every check (requirements, resources
plus DaemonSet overhead, host ports, an available offering) only gets harder as
pods are added, so a type that fails once is dropped for good and ``can_add``
only needs to find *one* type that still works. The full option list is
computed once, when the run ends (``finalize``).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reconciler.model import labels as wk
from reconciler.model.pod import HostPort
from reconciler.model.requirements import ALLOW_UNDEFINED_WELL_KNOWN, Requirement, Requirements
from reconciler.scheduling.existing import PlacementRefusal

if TYPE_CHECKING:
    from reconciler.scheduling.context import Eligible
from reconciler.scheduling.instancetypes import TypeInfo, min_values_shortfall, offering_allowed, offering_key
from reconciler.scheduling.podinfo import PodClass, SchedulingPod
from reconciler.scheduling.reservations import ALL_HELD, WOULD_DROP, ReservationLedger
from reconciler.scheduling.templates import ClaimTemplate
from reconciler.scheduling.topology import Topology, TopologyError


@dataclass(slots=True)
class Acceptance:
    requirements: Requirements
    requests: dict[str, int]
    options: list[TypeInfo] | None  # fully filtered options, when they had to be computed
    min_values_relaxed: bool = False
    reservations: frozenset[str] = frozenset()  # capacity reservations the claim holds with this pod


class ReservedRefusal(PlacementRefusal):
    """Refused to keep reserved capacity: the pod waits rather than falling back to paid capacity or a
    lower-weight NodePool (never memoized, never relaxed: reservations may free up within the run)."""

    __slots__ = ()

    def __init__(self, detail: str) -> None:
        super().__init__(detail, monotone=False)


HOSTNAME_PLACEHOLDER = "hostname-placeholder-"  # a planned claim's hostname until its node exists
_PLACEHOLDER = re.compile(rf"{HOSTNAME_PLACEHOLDER}0*(\d+)")


def readable_placeholders(text: str) -> str:
    """A reason as a person reads it: a planned claim's internal hostname becomes "new node #N of this run"."""
    return _PLACEHOLDER.sub(lambda match: f"new node #{match[1]} of this run", text) if HOSTNAME_PLACEHOLDER in text \
        else text


class NewNodeClaim:
    """A planned NodeClaim; ``number`` orders claims by creation and names the hostname placeholder."""

    __slots__ = (
        "excluded", "hostname", "ledger", "min_values_relaxed", "number", "options", "pods", "ports", "requests",
        "requirements", "start", "template", "upper",
    )

    def __init__(
        self, template: ClaimTemplate, options: list[TypeInfo], number: int, ledger: ReservationLedger | None = None
    ) -> None:
        self.template = template
        # Only set when the run tracks reservations and the pool has reserved offerings.
        self.ledger = ledger if ledger and template.reserved_types else None
        self.number = number
        self.hostname = f"{HOSTNAME_PLACEHOLDER}{number:04d}"
        self.requirements = template.requirements.add(Requirement.single(wk.HOSTNAME, self.hostname))
        self.requests: dict[str, int] = {}
        self.pods: list[SchedulingPod] = []
        self.ports: list[tuple[str, HostPort]] = []
        self.min_values_relaxed = False
        # ``options[start:]`` are the candidates still in play (never mutated: usually the template's own list);
        # ``excluded`` holds ids of the template's types that are out, so most claims never copy a list.
        self.options = options
        self.start = 0
        self.excluded: set[int] = set()
        self.upper = template.upper
        if options is not template.types_by_size:
            self._replace_options(options)

    def _replace_options(self, options: list[TypeInfo]) -> None:
        self.options = options
        self.start = 0
        kept = {id(info) for info in options}
        self.excluded = {id(info) for info in self.template.types if id(info) not in kept}
        self.upper = _upper(options)

    @property
    def nodepool(self) -> str:
        return self.template.name

    @property
    def reservations(self) -> frozenset[str]:
        """The capacity reservations this claim holds (it launches into one of them)."""
        return self.ledger.held(self.number) if self.ledger is not None else frozenset()

    def can_add(
        self,
        sp: SchedulingPod,
        cls: PodClass,
        labels_key: frozenset[tuple[str, str]],
        topology: Topology,
        *,
        relax_min_values: bool = False,
    ) -> Acceptance | PlacementRefusal:
        for taint in self.template.taints:
            if not any(t.tolerates(taint) for t in sp.tolerations):
                return PlacementRefusal(f"did not tolerate taint {taint}")
        total = dict(self.requests)
        upper = self.upper
        for name, value in cls.requests.items():
            value += total.get(name, 0)
            total[name] = value
            if value > upper.get(name, 0):
                return PlacementRefusal("no instance type has room")
        error = self.requirements.incompatibility(cls.requirements, ALLOW_UNDEFINED_WELL_KNOWN)
        if error is not None:
            return PlacementRefusal(f"incompatible requirements, {error}")
        pod_ports: Sequence[HostPort] = sp.pod.host_ports
        for port in pod_ports:
            for owner, used in self.ports:
                if owner != sp.key and port.conflicts(used):
                    return PlacementRefusal(f"host port {port} conflicts with pod {owner}")
        if self.ports:  # every pod's ports must also clear the chosen type's DaemonSet ports
            pod_ports = [*(port for _, port in self.ports), *pod_ports]
        base = self.requirements.merge(cls.requirements)
        alternatives = sp.volume_alternatives or (None,)
        topology_bound = len(alternatives) > 1
        last: PlacementRefusal = PlacementRefusal("no instance type matched")
        for alternative in alternatives:
            requirements = base
            if alternative is not None:
                error = requirements.incompatibility(alternative, ALLOW_UNDEFINED_WELL_KNOWN)
                if error is not None:
                    last = PlacementRefusal(f"incompatible volume requirements, {error}", monotone=not topology_bound)
                    continue
                requirements = requirements.merge(alternative)
            try:
                narrowed = topology.add_requirements(sp, labels_key, cls.strict_requirements, requirements)
            except TopologyError as err:
                last = PlacementRefusal(err, err.monotone and len(alternatives) == 1)
                continue
            if narrowed is not requirements:
                topology_bound = True
            missing = self.template.out_of_domain(narrowed)
            if missing is not None:
                last = PlacementRefusal(missing, monotone=not topology_bound)
                continue
            if narrowed.has_min_values():
                options = self.filter_options(narrowed, total, pod_ports)
                shortfall = min_values_shortfall(options, narrowed) if options else {}
                if options and shortfall and relax_min_values:
                    narrowed = narrowed.replacing(*(
                        narrowed[key].with_min_values(have) for key, (_, have) in shortfall.items()
                    ))
                    return self._reserve(Acceptance(narrowed, total, options, min_values_relaxed=True), pod_ports)
                if options and not shortfall:
                    return self._reserve(Acceptance(narrowed, total, options), pod_ports)
                last = PlacementRefusal(_min_values_message(shortfall) if shortfall else "no instance type matched",
                                 monotone=not topology_bound)
                continue
            if self._first_fit(narrowed, total, pod_ports) is not None:
                return self._reserve(Acceptance(narrowed, total, None), pod_ports)
            last = PlacementRefusal("no instance type matched", monotone=not topology_bound)
        return last

    def _reserve(self, accepted: Acceptance, pod_ports: Sequence[HostPort]) -> Acceptance | PlacementRefusal:
        """The reservations the claim can hold with this pod (Karpenter's offeringsToReserve): every available
        reserved offering of a type that still works, allowed by the requirements, with room left."""
        ledger = self.ledger
        if ledger is None:
            return accepted
        key = offering_key(accepted.requirements)
        if accepted.options is not None:
            types = [info for info in accepted.options if info.reserved]
        else:
            types = [
                info for info in self.template.reserved_types
                if id(info) not in self.excluded and self._type_works(info, accepted.requirements, accepted.requests,
                                                                      pod_ports)
            ]
        compatible = False
        held: set[str] = set()
        for info in types:
            for offering in info.reserved:
                if not offering_allowed(offering, *key):
                    continue
                compatible = True
                if ledger.can_hold(self.number, offering.reservation_id):
                    held.add(offering.reservation_id)
        if ledger.strict:
            if compatible and not held:
                return ReservedRefusal(ALL_HELD)
            if ledger.held(self.number) and not held:
                return ReservedRefusal(WOULD_DROP)
        accepted.reservations = frozenset(held)
        return accepted

    def add(self, sp: SchedulingPod, labels_key: frozenset[tuple[str, str]], accepted: Acceptance,
            topology: Topology) -> None:
        self.pods.append(sp)
        self.requests = accepted.requests
        self.requirements = accepted.requirements
        self.min_values_relaxed = self.min_values_relaxed or accepted.min_values_relaxed
        if self.ledger is not None:
            self.ledger.hold(self.number, accepted.reservations)
        topology.register(wk.HOSTNAME, self.hostname)
        topology.record(sp, labels_key, self.template.taints, accepted.requirements)
        self.ports.extend((sp.key, port) for port in sp.pod.host_ports)
        if accepted.options is not None:
            self._replace_options(accepted.options)
        else:
            self._prune()

    # -- instance types ------------------------------------------------------------------------

    def _type_works(self, info: TypeInfo, requirements: Requirements, total: dict[str, int],
                    pod_ports: Sequence[HostPort]) -> bool:
        if not self._has_room(info, total, pod_ports):
            return False
        if not info.compatible(requirements):
            return False
        return info.has_offering(requirements)

    def _has_room(self, info: TypeInfo, total: dict[str, int], pod_ports: Sequence[HostPort]) -> bool:
        """Fits ``total`` plus its DaemonSet group's overhead, without a host-port clash with the daemons."""
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
        return True

    def works(self, info: TypeInfo) -> bool:
        """Does ``info`` still work for the pods committed so far?"""
        return self._type_works(info, self.requirements, self.requests, [port for _, port in self.ports])

    def _first_fit(self, requirements: Requirements, total: dict[str, int],
                   pod_ports: Sequence[HostPort]) -> TypeInfo | None:
        options = self.options
        for i in range(self.start, len(options)):
            if self._type_works(options[i], requirements, total, pod_ports):
                return options[i]
        return None

    def _prune(self) -> None:
        """Drop leading options that no longer work for the committed state (they never will again)."""
        options = self.options
        ports = [port for _, port in self.ports]
        start = self.start
        while start < len(options) and not self._type_works(options[start], self.requirements, self.requests, ports):
            self.excluded.add(id(options[start]))
            start += 1
        if start != self.start:
            self.start = start
            self.upper = _upper(options[start:])

    def filter_options(self, requirements: Requirements | None = None, total: dict[str, int] | None = None,
                       pod_ports: Sequence[HostPort] = ()) -> list[TypeInfo]:
        requirements = self.requirements if requirements is None else requirements
        total = self.requests if total is None else total
        return [info for info in self.options[self.start:] if self._type_works(info, requirements, total, pod_ports)]

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

    def ordered_options(self, eligible: Sequence[Eligible]) -> list[Eligible]:
        """The final options, cheapest first: ``eligible`` (types meeting the final requirements with an
        offering, price-ordered) that still have room for the claim's pods and ports."""
        ports = [port for _, port in self.ports]
        out = set(self.excluded)
        for group in self.template.daemon_groups:
            if ports and group.host_ports and any(p.conflicts(u) for p in ports for u in group.host_ports):
                out.update(id(t) for t in group.types)
            else:
                out |= group.too_small(self.requests)
        return [e for e in eligible if id(e.info) not in out]


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


class ClaimOrder:
    """Planned claims in the order pods try them: fewest pods first, then oldest first."""

    def __init__(self) -> None:
        self._buckets: dict[int, list[NewNodeClaim]] = {}
        self._counts: list[int] = []

    def add(self, claim: NewNodeClaim) -> None:
        count = len(claim.pods)
        bucket = self._buckets.get(count)
        if bucket is None:
            bucket = self._buckets[count] = []
            bisect.insort(self._counts, count)
        bisect.insort(bucket, claim, key=_claim_number)

    def grew(self, claim: NewNodeClaim) -> None:
        """``claim`` just got one more pod: move it to the next bucket."""
        old = len(claim.pods) - 1
        bucket = self._buckets[old]
        del bucket[bisect.bisect_left(bucket, claim.number, key=_claim_number)]
        if not bucket:
            del self._buckets[old]
            self._counts.remove(old)
        self.add(claim)

    def __iter__(self) -> Iterator[NewNodeClaim]:
        for count in self._counts:
            yield from self._buckets[count]


def _claim_number(claim: NewNodeClaim) -> int:
    return claim.number
