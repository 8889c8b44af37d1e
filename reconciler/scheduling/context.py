"""What a scheduling run needs from the snapshot, prepared once and reusable across runs.

``SchedulingContext`` holds the NodeClaim templates of the usable NodePools
(weight desc, name desc), the instance-type index, DaemonSet pods and the
topology domains NodePools can create. Disruption simulations that try many
candidate sets against the same snapshot build it once and pass it to every
``Scheduler``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, count
from operator import is_, is_not
from typing import Any, TypeVar

from reconciler.cloud.types import InstanceType
from reconciler.model.nodepool import NodePool
from reconciler.model.pod import Pod
from reconciler.model.requirements import Requirements
from reconciler.model.taints import PREFER_NO_SCHEDULE, Taint
from reconciler.scheduling.domain_costs import DomainCosts
from reconciler.scheduling.existing import SlotBase
from reconciler.scheduling.instancetypes import TypeIndex, TypeInfo
from reconciler.scheduling.room_index import RoomIndex
from reconciler.scheduling.templates import ClaimTemplate, build_template
from reconciler.scheduling.topology import Topology
from reconciler.scheduling.topology_counts import CountedPod, NodeDomains
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState
from reconciler.state.node import StateNode
from reconciler.state.views import node_counts, node_values

T = TypeVar("T")


@dataclass(slots=True, frozen=True)
class Eligible:
    """An instance type a finished claim may use, with its cheapest offering price and capacity types."""

    info: TypeInfo
    price: float
    capacity_types: frozenset[str]


@dataclass(slots=True)
class SchedulingContext:
    state: ClusterState
    settings: Settings
    templates: list[ClaimTemplate]
    skipped_pools: dict[str, str]  # NodePool name -> why it cannot launch anything
    daemon_pods: list[Pod]
    # topology key -> domain -> taint sets of the pools that can create it
    domain_sources: dict[str, dict[str, list[tuple[Taint, ...]]]]
    tolerate_prefer_no_schedule: bool
    index: TypeIndex = field(default_factory=TypeIndex)
    _pvc_drivers: dict[str, str] | None = None
    _eligible: dict[tuple[int, Requirements], list[Eligible]] = field(default_factory=dict)
    # Views derived from the templates alone, shared by every context built on the same templates.
    template_views: dict[str, Any] = field(default_factory=dict)
    _slots: list[SlotBase] | None = None
    _topology: Topology | None = None

    def slot_bases(self) -> list[SlotBase]:
        """Nodes not being deleted, initialized first, then by name: where every run starts placing pods.
        Shared by every context on the same version of the nodes with the same DaemonSet pods."""
        if self._slots is None:
            daemon_pods = tuple(self.daemon_pods)

            def build() -> list[SlotBase]:
                # state_nodes() is in name order (names unique), so initialized-then-the-rest keeps that
                # order within each part: the order of a sort by (not initialized, name), without sorting.
                # Each node's SlotBase (None while marked) is kept across versions for the nodes that stay.
                view = node_values(self.state, "scheduling.slot_bases", lambda node: _slot_base(node, daemon_pods),
                                   daemon_pods)
                bases = list(filter(None, view.values.values()))  # C-level: a SlotBase is never falsy
                if not node_counts(self.state, "scheduling.uninitialized_slots", _uninitialized_slot):
                    return bases  # mostly every node is initialized: the order is the view's (no Python walk)
                return [slot for slot in bases if slot.state.initialized] + \
                    [slot for slot in bases if not slot.state.initialized]

            self._slots = _shared(self.state, "scheduling.slots", (daemon_pods,), build)
        return self._slots

    def room_index(self) -> RoomIndex:
        """``slot_bases`` indexed by free room (once per version of the nodes, from the last one built)."""
        slots, carried = self.slot_bases(), self.state.carried

        def build() -> RoomIndex:
            index = carried["scheduling.room_index"] = RoomIndex.after(carried.get("scheduling.room_index"), slots)
            return index

        return _shared(self.state, "scheduling.room_index", (slots,), build)

    def free_room_order(self) -> list[SlotBase]:
        """Slot bases, most free CPU first (once per version of the nodes)."""
        return self.room_index().by_free_cpu

    def deleting_nodes(self) -> frozenset[str]:
        """Names of the nodes marked for deletion (once per version of the nodes)."""
        state = self.state
        return state.nodes_memo(
            "scheduling.deleting", lambda: frozenset(n.name for n in state.state_nodes() if n.marked_for_deletion)
        )

    def base_topology(self) -> Topology:
        """Topology of the snapshot with nothing excluded; runs ``fork`` it (never changed, so shared like
        ``slot_bases``, also with the same NodePool domains, preference policy and namespace labels). A new
        version of the nodes updates the previous version's by the pods that changed (``Topology.updated``)."""
        if self._topology is None:
            state = self.state
            by_node, counted, pod_namespaces = state.nodes_memo("scheduling.counted_pods", lambda: _counted_pods(state))
            namespaces = {name: state.namespace_labels(name) for name in {*state.namespaces, *pod_namespaces}}
            slots = self.slot_bases()
            policy = self.settings.preference_policy

            def build() -> Topology:
                nodes = [slot.domains for slot in slots]
                previous: _BaseTopology | None = state.carried.get("scheduling.topology")
                topology = None
                if previous is not None and previous.reusable(self.domain_sources, policy, namespaces):
                    topology = previous.updated(by_node, counted, nodes)
                if topology is None:
                    topology = Topology(domain_sources=self.domain_sources, counted_pods=counted, node_domains=nodes,
                                        namespace_labels=namespaces, policy=policy)
                state.carried["scheduling.topology"] = _BaseTopology(
                    self.domain_sources, policy, namespaces, by_node, topology
                )
                return topology

            inputs = (slots, self.domain_sources, policy, namespaces)
            self._topology = _shared(state, "scheduling.topology", inputs, build)
        return self._topology

    def eligible_types(self, template: ClaimTemplate, requirements: Requirements) -> list[Eligible]:
        """The template's types meeting ``requirements`` with an available offering, cheapest such offering
        first (ties by name). Cached: most planned claims end with the same requirements."""
        key = (id(template), requirements)
        found = self._eligible.get(key)
        if found is None:
            found = []
            for info in template.types:
                if not info.compatible(requirements):
                    continue
                offerings = info.offerings_for(requirements)
                if offerings:
                    found.append(Eligible(info, min(o.price for o in offerings),
                                          frozenset(o.capacity_type for o in offerings)))
            found.sort(key=lambda e: (e.price, e.info.name))
            self._eligible[key] = found
        return found


    def domain_costs(self) -> DomainCosts:
        """What pods cost per topology domain on these templates (shared by contexts on the same templates)."""
        costs = self.template_views.get("domain_costs")
        if costs is None:
            costs = self.template_views["domain_costs"] = DomainCosts(self.templates)
        return costs  # type: ignore[no-any-return]

    def pvc_drivers(self) -> dict[str, str]:
        """PVC key -> CSI driver, for volume attachment limits."""
        if self._pvc_drivers is None:
            self._pvc_drivers = self.state.pvc_drivers()
        return self._pvc_drivers

    @classmethod
    def build(
        cls,
        state: ClusterState,
        instance_types_by_nodepool: Mapping[str, Sequence[InstanceType]],
        settings: Settings,
        *,
        nodepools: Sequence[NodePool] | None = None,
    ) -> SchedulingContext:
        pools = list(state.nodepools.values()) if nodepools is None else list(nodepools)
        usable, skipped = _usable_pools(pools, state, require_nodeclass=settings.require_nodeclass)
        daemon_pods = state.daemonset_pods()
        types = [tuple(instance_types_by_nodepool.get(pool.name, ())) for pool in usable]
        built = _TEMPLATES.get(usable, types, daemon_pods, relax_min_values=settings.min_values_policy == "BestEffort")
        return cls(
            state=state,
            settings=settings,
            templates=list(built.templates),
            skipped_pools={**skipped, **built.skipped},
            daemon_pods=daemon_pods,
            domain_sources=built.domain_sources,
            tolerate_prefer_no_schedule=any(
                t.effect == PREFER_NO_SCHEDULE for pool in usable for t in pool.taints
            ),
            index=built.index,
            _eligible=built.eligible,
            template_views=built.views,
        )


def _shared(state: ClusterState, name: str, inputs: tuple[Any, ...], build: Callable[[], T]) -> T:
    """``build()`` once per version of the nodes and ``inputs`` (objects compared by identity, dicts by
    value, tuples item by item by identity: each context makes its own tuple of the state's DaemonSet pods);
    the inputs are kept with the result, so an identity is never mistaken for a new object's."""
    entries: list[tuple[tuple[Any, ...], Any]] = state.nodes_memo(name, list)
    for seen, value in entries:
        if all(map(_same_input, seen, inputs)):
            return value
    value = build()
    entries.append((inputs, value))
    del entries[:-4]
    return value


def _same_input(seen: Any, given: Any) -> bool:
    if isinstance(seen, dict):
        return bool(seen == given)
    if isinstance(seen, tuple) and isinstance(given, tuple):
        return len(seen) == len(given) and all(map(is_, seen, given))
    return seen is given


def _uninitialized_slot(node: StateNode) -> tuple[str, ...]:
    """Counts the nodes with a SlotBase (not marked) that are not initialized."""
    return () if node.marked_for_deletion or node.initialized else ("uninitialized",)


def _slot_base(node: StateNode, daemon_pods: tuple[Pod, ...]) -> SlotBase | None:
    """The node's SlotBase (None when it is marked for deletion), kept on its StateNode for the same DaemonSet
    pods (by identity)."""
    if node.marked_for_deletion:
        return None
    kept: tuple[tuple[Pod, ...], SlotBase] | None = node.memo_get("scheduling.slot_base")
    if kept is not None and len(kept[0]) == len(daemon_pods) and all(map(is_, kept[0], daemon_pods)):
        return kept[1]
    slot = SlotBase.of(node, daemon_pods)
    node.memo_set("scheduling.slot_base", (daemon_pods, slot))
    return slot


def _counted_pods(state: ClusterState) -> tuple[dict[str, list[CountedPod]], Sequence[CountedPod], set[str]]:
    """Every active pod bound to a known node, as topology counts it (shared by the runs on one state), in
    ``bound_pods`` order, by node and all together, and their namespaces. Each node's part is kept across
    versions of the nodes while its StateNode is the same, so an unchanged node's list is the same object."""
    per_node = node_values(state, "scheduling.counted_pods", _kept_counted_pods, ordered=False).values
    by_node = _counted_by_node(state, per_node)
    counted = JoinedPods(by_node)
    # A node without bound pods counts none, so every StateNode's namespaces are those of ``by_node``'s nodes:
    # counted per namespace and brought up to date by the nodes that changed, not united again per version.
    namespaces = {str(name) for name in node_counts(state, "scheduling.counted_namespaces", _counted_namespaces)}
    return by_node, counted, namespaces


class JoinedPods(Sequence[CountedPod]):
    """Every node's counted pods in one sequence (by node, in the map's order), joined when first read: most
    versions of the nodes only ask its length, and the map is never changed once built."""

    __slots__ = ("_by_node", "_joined")

    def __init__(self, by_node: Mapping[str, list[CountedPod]]) -> None:
        self._by_node = by_node
        self._joined: list[CountedPod] | None = None

    def _all(self) -> list[CountedPod]:
        if self._joined is None:
            self._joined = list(chain.from_iterable(self._by_node.values()))
        return self._joined

    def __len__(self) -> int:
        return len(self._joined) if self._joined is not None else sum(map(len, self._by_node.values()))

    def __getitem__(self, index: Any) -> Any:
        return self._all()[index]

    def __iter__(self) -> Iterator[CountedPod]:
        return iter(self._all())


def _counted_by_node(
    state: ClusterState, per_node: Mapping[str, tuple[list[CountedPod], frozenset[str]]]
) -> dict[str, list[CountedPod]]:
    """Each node's counted pods, in ``bound_node_names`` order, for the nodes that have a StateNode: the map last
    built brought up to date by the names that changed since (a pod write changes its node's StateNode) when
    that is certain to keep the order, else built over every bound name."""
    kept: tuple[int, dict[str, list[CountedPod]]] | None = state.carried.get("scheduling.counted_by_node")
    generation = state.nodes_generation
    changed = state.node_changes_since(kept[0]) if kept is not None else None
    by_node = None
    if kept is not None and changed is not None:
        by_node = dict(kept[1])
        bound = state.bound_node_names()
        arrived = []
        for name in changed:
            found = per_node.get(name)
            if found is None or name not in bound:
                by_node.pop(name, None)
            else:
                if name not in by_node:
                    arrived.append(name)
                by_node[name] = found[0]
        # Bound names are only ever appended (``bound_node_names``), so one name that arrived is in place when it
        # is the last bound name; anything else is rebuilt.
        if arrived and (len(arrived) > 1 or arrived[0] != next(reversed(bound))):  # type: ignore[call-overload]
            by_node = None
    if by_node is None:
        by_node = {name: per_node[name][0] for name in state.bound_node_names() if name in per_node}
    state.carried["scheduling.counted_by_node"] = (generation, by_node)
    return by_node


def _counted_namespaces(node: StateNode) -> tuple[str, ...]:
    return tuple(_kept_counted_pods(node)[1])


def _kept_counted_pods(node: StateNode) -> tuple[list[CountedPod], frozenset[str]]:
    return node.memo("scheduling.counted_pods", lambda: _node_counted_pods(node))


def _node_counted_pods(node: StateNode) -> tuple[list[CountedPod], frozenset[str]]:
    # StateNode.pods are the node's bound pods in binding order, less the terminal ones.
    pods = [CountedPod(pod, node.labels, node.taints, node.requirements(), node.name)
            for pod in node.pods.values() if pod.is_active]
    return pods, frozenset(c.pod.namespace for c in pods)


@dataclass(slots=True)
class _BaseTopology:
    """The last base topology built on a ClusterState, with what it was built from, to update the next one."""

    domain_sources: dict[str, dict[str, list[tuple[Taint, ...]]]]
    policy: str
    namespaces: dict[str, Mapping[str, str]]
    by_node: dict[str, list[CountedPod]]
    topology: Topology

    def reusable(self, domain_sources: Mapping[str, Any], policy: str, namespaces: Mapping[str, Any]) -> bool:
        return self.domain_sources is domain_sources and self.policy == policy and self.namespaces == namespaces

    def updated(
        self, by_node: Mapping[str, list[CountedPod]], counted: Sequence[CountedPod], nodes: list[NodeDomains]
    ) -> Topology | None:
        """This topology updated to ``by_node``'s pods and ``nodes``; None when rebuilding is as cheap."""
        removed, added = _pods_not_in(self.by_node, by_node), _pods_not_in(by_node, self.by_node)
        if len(removed) + len(added) > len(counted):
            return None  # most pods changed: a build costs no more
        order: dict[str, int] = {}

        def position(key: str, node: str) -> tuple[int, int] | None:
            """Where the pod is in ``counted`` (``bound_pods`` order: by node, then within the node)."""
            if not order:
                order.update(zip(by_node, count()))  # C-level: every node's place
            pods = by_node.get(node)
            if pods is None:
                return None
            return next(((order[node], index) for index, c in enumerate(pods) if c.pod.key == key), None)

        return self.topology.updated(counted, nodes, removed_pods=removed, added_pods=added, position=position)


def _pods_not_in(by_node: Mapping[str, list[CountedPod]], other: Mapping[str, list[CountedPod]]) -> list[CountedPod]:
    """The pods of ``by_node``'s nodes whose list is not ``other``'s (by identity), in order; C-level loops."""
    return list(chain.from_iterable(compress(by_node.values(), map(is_not, map(other.get, by_node), by_node.values()))))


@dataclass(slots=True)
class _BuiltTemplates:
    inputs: tuple[object, ...]  # what the key's ids point at, kept alive so no id is reused while cached
    templates: tuple[ClaimTemplate, ...]
    skipped: dict[str, str]
    domain_sources: dict[str, dict[str, list[tuple[Taint, ...]]]]
    index: TypeIndex
    eligible: dict[tuple[int, Requirements], list[Eligible]]
    views: dict[str, Any] = field(default_factory=dict)


class _TemplateCache:
    """Templates per (NodePools, instance types, DaemonSet pods), by object identity.

    Building templates is the fixed cost of every scheduling run (hundreds of instance types
    per pool); disruption passes and the simulator's kube-scheduler rebuild a context many
    times against the same pools and catalogue. NodePool, InstanceType and DaemonSet Pod
    objects are immutable values (a change makes a new object), so identity is a safe key.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[tuple, _BuiltTemplates] = OrderedDict()

    def get(
        self,
        pools: Sequence[NodePool],
        types: Sequence[tuple[InstanceType, ...]],
        daemon_pods: Sequence[Pod],
        *,
        relax_min_values: bool = False,
    ) -> _BuiltTemplates:
        key = (
            tuple(id(pool) for pool in pools),
            tuple(tuple(id(t) for t in listed) for listed in types),
            tuple(id(pod) for pod in daemon_pods),
            relax_min_values,
        )
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
            return found
        index = TypeIndex()
        templates: list[ClaimTemplate] = []
        skipped: dict[str, str] = {}
        for pool, listed in zip(pools, types, strict=True):
            template = build_template(pool, index.infos(listed), daemon_pods, relax_min_values=relax_min_values)
            if isinstance(template, str):
                skipped[pool.name] = template
            else:
                templates.append(template)
        found = _BuiltTemplates(
            (tuple(pools), tuple(types), tuple(daemon_pods)),
            tuple(templates), skipped, _domain_sources(templates), index, {},
        )
        self._entries[key] = found
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)
        return found


_TEMPLATES = _TemplateCache(size=16)
AWS_NODECLASS_GROUP, AWS_NODECLASS_KIND = "karpenter.k8s.aws", "EC2NodeClass"


def nodeclass_problem(pool: NodePool, state: ClusterState, *, require_nodeclass: bool) -> str | None:
    """Why ``pool`` is not Ready because of its nodeClassRef (None when the reference resolves), as
    Karpenter's NodePool readiness says: another provider's class, or an EC2NodeClass that does not exist."""
    ref = pool.node_class_ref
    group, kind, class_name = ref.get("group", ""), ref.get("kind", ""), ref.get("name", "")
    if (group and group != AWS_NODECLASS_GROUP) or (kind and kind != AWS_NODECLASS_KIND):
        return (
            f"NodePool {pool.name} is not Ready: its nodeClassRef {group}/{kind} {class_name} belongs to "
            "another provider (Adze serves karpenter.k8s.aws EC2NodeClass)"
        )
    if require_nodeclass and class_name not in state.nodeclasses:
        return (
            f"NodePool {pool.name} is not Ready: its nodeClassRef names EC2NodeClass {class_name}, "
            "which does not exist"
        )
    return None


def _usable_pools(
    pools: Sequence[NodePool], state: ClusterState, *, require_nodeclass: bool
) -> tuple[list[NodePool], dict[str, str]]:
    """Pools that may launch, and why each other one may not (Karpenter: the NodePool is not Ready)."""
    skipped: dict[str, str] = {}
    usable = []
    for pool in pools:
        not_ready = nodeclass_problem(pool, state, require_nodeclass=require_nodeclass)
        if not_ready is not None:
            skipped[pool.name] = not_ready
        elif pool.is_static:
            skipped[pool.name] = f"NodePool {pool.name} is static (replicas); it does not provision for pods"
        elif pool.deletion_timestamp is not None:
            skipped[pool.name] = f"NodePool {pool.name} is being deleted"
        elif not pool.ready:
            skipped[pool.name] = f"NodePool {pool.name} is not Ready"
        else:
            usable.append(pool)
    # Weight descending, then name descending (Karpenter's OrderByWeight).
    usable.sort(key=lambda p: p.name, reverse=True)
    usable.sort(key=lambda p: p.weight, reverse=True)
    return usable, skipped


def _domain_sources(templates: Sequence[ClaimTemplate]) -> dict[str, dict[str, list[tuple[Taint, ...]]]]:
    sources: dict[str, dict[str, list[tuple[Taint, ...]]]] = {}

    def insert(key: str, domain: str, taints: tuple[Taint, ...]) -> None:
        taint_sets = sources.setdefault(key, {}).setdefault(domain, [])
        if taints not in taint_sets:
            taint_sets.append(taints)

    for template in templates:
        taints = template.taints
        seen: set[Requirements] = set()
        for info in template.types:
            if info.requirements in seen:
                continue
            seen.add(info.requirements)
            for key, requirement in template.requirements.merge(info.requirements).items():
                if not requirement.complement:
                    for value in requirement.values:
                        insert(key, value, taints)
        for key, requirement in template.requirements.items():
            if not requirement.complement:
                for value in requirement.values:
                    insert(key, value, taints)
    return sources
