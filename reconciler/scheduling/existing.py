"""An existing or in-flight node as a placement candidate, with what is left on it during this run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field

from reconciler.model.pod import HostPort, Pod
from reconciler.model.requirements import Requirements
from reconciler.model.taints import Taint
from reconciler.scheduling.podinfo import PodClass, SchedulingPod
from reconciler.scheduling.templates import daemon_pod_fits_node
from reconciler.scheduling.topology import Topology, TopologyError
from reconciler.scheduling.topology_counts import NodeDomains
from reconciler.state.node import StateNode


class PlacementRefusal:
    """Why a candidate refused a pod; ``monotone`` rejections stay true as the candidate fills up.

    The detail may be an exception whose message is only rendered when read.
    """

    __slots__ = ("detail", "monotone", "prefix")

    def __init__(self, detail: str | Exception, monotone: bool = True, prefix: str = "") -> None:
        self.detail = detail
        self.monotone = monotone
        self.prefix = prefix

    @property
    def message(self) -> str:
        return f"{self.prefix}{self.detail}"


class _Fits:
    """The fit check of a node as a run sees it (``SlotBase`` before any placement, ``ExistingSlot`` after)."""

    __slots__ = ()
    name: str
    state: StateNode
    taints: tuple[Taint, ...]
    requirements: Requirements
    remaining: Mapping[str, int]
    host_ports: Sequence[tuple[str, HostPort]]
    volume_usage: Mapping[str, Set[str]]

    def can_add(
        self,
        sp: SchedulingPod,
        cls: PodClass,
        labels_key: frozenset[tuple[str, str]],
        topology: Topology,
        pod_volumes: dict[str, set[str]],
    ) -> Requirements | PlacementRefusal:
        for taint in self.taints:
            if not any(t.tolerates(taint) for t in sp.tolerations):
                return PlacementRefusal(f"node {self.name} has taint {taint} the pod does not tolerate")
        for driver, claims in pod_volumes.items():
            limit = self.state.volume_limits.get(driver)
            if limit is not None and len(self.volume_usage.get(driver, set()) | claims) > limit:
                return PlacementRefusal(f"node {self.name} would exceed its {limit} {driver} volume attachments")
        for port in sp.pod.host_ports:
            for owner, used in self.host_ports:
                if owner != sp.key and port.conflicts(used):
                    return PlacementRefusal(f"node {self.name} already uses host port {used}")
        remaining = self.remaining
        for name, value in cls.requests.items():
            if value > remaining.get(name, 0):
                return PlacementRefusal(f"node {self.name} lacks {name}")
        error = self.requirements.incompatibility(cls.requirements)
        if error is not None:
            return PlacementRefusal(f"node {self.name}: {error}")
        base = self.requirements.merge(cls.requirements)
        last: PlacementRefusal = PlacementRefusal(f"node {self.name} does not match")
        alternatives = sp.volume_alternatives or (None,)
        for alternative in alternatives:
            requirements = base
            if alternative is not None:
                error = requirements.incompatibility(alternative)
                if error is not None:
                    last = PlacementRefusal(f"node {self.name}: incompatible volume requirements, {error}")
                    continue
                requirements = requirements.merge(alternative)
            try:
                narrowed = topology.add_requirements(sp, labels_key, cls.strict_requirements, requirements)
            except TopologyError as err:
                last = PlacementRefusal(err, err.monotone and len(alternatives) == 1, prefix=f"node {self.name}: ")
                continue
            return narrowed
        return last



@dataclass(slots=True, frozen=True, eq=False)
class SlotBase(_Fits):
    """An active node as every scheduling run on one snapshot starts from it (shared, never changed): a run
    checks fits against it until it places a pod there (``ExistingSlot.of``)."""

    state: StateNode
    taints: tuple[Taint, ...]
    remaining: Mapping[str, int]  # what pods may still use (read-only; memoized on the StateNode)
    name: str
    requirements: Requirements
    host_ports: Sequence[tuple[str, HostPort]]
    volume_usage: Mapping[str, Set[str]]
    domains: NodeDomains  # the node as topology sees it (its own taints, not only those a pod must tolerate)

    @classmethod
    def of(cls, node: StateNode, daemon_pods: Sequence[Pod]) -> SlotBase:
        taints = node.scheduling_taints()
        # DaemonSet pods that belong here but are not running yet still need room.
        room = node.room(daemon_pods, lambda pod: daemon_pod_fits_node(pod, taints, node.labels))
        requirements = node.requirements()
        return cls(node, taints, room, node.name, requirements, node.host_ports, node.volume_usage,
                   (node.name, node.hostname, node.labels, node.taints, requirements))

    @property
    def room(self) -> Mapping[str, int]:
        return self.remaining


@dataclass(slots=True, eq=False)
class ExistingSlot(_Fits):
    """A node during one run once a pod was placed on it: its own copies of its ``SlotBase``'s views."""

    state: StateNode
    taints: tuple[Taint, ...]
    requirements: Requirements
    remaining: Mapping[str, int]
    host_ports: Sequence[tuple[str, HostPort]]
    volume_usage: Mapping[str, Set[str]]
    name: str
    pods: list[SchedulingPod] = field(default_factory=list)

    @classmethod
    def of(cls, base: SlotBase) -> ExistingSlot:
        return cls(base.state, base.taints, base.requirements, base.remaining, base.host_ports, base.volume_usage,
                   base.name)

    def add(self, sp: SchedulingPod, cls: PodClass, labels_key: frozenset[tuple[str, str]],
            requirements: Requirements, topology: Topology, pod_volumes: dict[str, set[str]]) -> None:
        if not self.pods:  # first placement this run: stop sharing the base's views
            self.remaining = dict(self.remaining)
            self.host_ports = list(self.host_ports)
            self.volume_usage = {driver: set(claims) for driver, claims in self.volume_usage.items()}
        self.pods.append(sp)
        remaining = self.remaining
        assert isinstance(remaining, dict) and isinstance(self.host_ports, list)
        for name, value in cls.requests.items():
            remaining[name] = remaining.get(name, 0) - value
        self.requirements = requirements
        topology.record(sp, labels_key, self.taints, requirements)
        self.host_ports.extend((sp.key, port) for port in sp.pod.host_ports)
        usage = self.volume_usage
        assert isinstance(usage, dict)
        for driver, claims in pod_volumes.items():
            usage.setdefault(driver, set()).update(claims)
