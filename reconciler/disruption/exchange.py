"""A many-to-many exchange over a settled cluster, for comparison only: never what `plan` or the controller do.

Karpenter's consolidation deletes or replaces one node, or several nodes with at most one, per command; it never
moves pods between nodes that both stay. ``exchange`` does: it keeps every node's constrained pods where they
are, moves only the pods the launch-batch repack may move (``provisioning/repack.plain_pod``; here another pod's
topology spread does not pin a pod it counts, see ``counted_selectors(spread=False)``) between nodes of the same
NodePool, and prices each node at the cheapest instance type that holds what it keeps.

The search: first every movable pod of a pool is taken off and put back, largest first, where the price grows
least (tightest fit among equals), kept when that packing is strictly cheaper; then sweeps of a local search: the
nodes that cost most per used resource first, each one's movable pods (largest first) offered to the other nodes
the same way, and the moves kept up to the point where the total cost is lowest, when that is strictly lower than
before. Sweeps repeat until one changes nothing (or ``max_sweeps``).

A node's types: its NodePool's (the template's catalogue), with an available offering in the node's zone and
capacity type, the node's current value of every label a topology key of any pod names, meeting every pod's node
selector / required node affinity on the node's labels with that type's, and holding the pods plus that type's
DaemonSet overhead (and at least the DaemonSet pods running there now). Its current type is always one of them,
with the room it has now. A node keeps its type and is never removed when it holds a do-not-disrupt pod or has
the annotation, holds a pod with volumes (attach limits are per type), is reserved capacity, or its NodePool has
minValues or no longer allows its zone or capacity type. A node that is not an initialized, managed node of a
known NodePool and type takes no part (its pods stay). A node left with no pod is removed. A pool with limits may
not end with more of a limited resource than its limit or than it had, whichever is more.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.model import labels as wk
from reconciler.model.nodepool import NODES
from reconciler.model.pod import Pod
from reconciler.model.requirements import Requirements
from reconciler.model.taints import untolerated
from reconciler.provisioning.repack import counted_selectors, plain_pod, pod_requirements
from reconciler.scheduling.instancetypes import TypeInfo
from reconciler.scheduling.templates import ClaimTemplate
from reconciler.state.node import StateNode

PRICE_EPSILON = 1e-9
REMOVED = -1  # a node's option index once it holds no pod and was removed


@dataclass(frozen=True, slots=True)
class NodeOutcome:
    name: str
    nodepool: str
    instance_type: str  # before
    price: float  # before: its type's offering in its zone and capacity type, $/h
    new_instance_type: str | None  # None: emptied and removed
    new_price: float
    pods: tuple[str, ...]  # the pods it holds after (DaemonSet pods left out), sorted


@dataclass(frozen=True, slots=True)
class ExchangeResult:
    nodes: list[NodeOutcome]  # every node that took part, in input order
    moves: dict[str, tuple[str, str]]  # pod key -> (from node, to node)
    left_alone: dict[str, str]  # node -> why it took no part
    cost: float  # $/h of the nodes that took part, after
    original_cost: float
    sweeps: int

    @property
    def savings(self) -> float:
        return self.original_cost - self.cost


@dataclass(slots=True)
class _Option:
    price: float
    info: TypeInfo
    room: dict[str, int]  # what pods may use: allocatable minus DaemonSet overhead


@dataclass(slots=True)
class _Node:
    state: StateNode
    template: ClaimTemplate
    current: TypeInfo  # its type now
    options: list[_Option]  # cheapest first
    load: dict[str, int]  # requests of every pod it holds (DaemonSet pods are in the options' room)
    movable: dict[str, Pod]
    needs: dict[str, Requirements]  # a movable pod's node requirements, when it has any
    original_price: float
    removable: bool
    own_movable: frozenset[str] = frozenset()  # the movable pods it held before
    index: int = 0
    price: float = 0.0
    _allowed: dict[tuple[int, Requirements], bool] = field(default_factory=dict)

    def allows(self, index: int, requirements: Requirements) -> bool:
        """A pod needing ``requirements`` may run on this node as option ``index``."""
        key = (index, requirements)
        found = self._allowed.get(key)
        if found is None:
            labels = _labels_as(self.state, self.current, self.options[index].info)
            found = self._allowed[key] = Requirements.from_labels(labels).is_compatible(requirements)
        return found

    def cheapest(self, load: Mapping[str, int], needs: Iterable[Requirements], start: int = 0,
                 below: float = float("inf")) -> tuple[int, float] | None:
        """The cheapest option from ``start`` that holds ``load`` and meets ``needs`` and costs less than
        ``below``; removal when nothing is left and the node may go."""
        if load.get("pods", 0) <= 0 and self.removable:
            return REMOVED, 0.0
        needed = list(needs)
        for index in range(max(start, 0), len(self.options)):
            option = self.options[index]
            if option.price >= below:
                return None
            if _holds(option.room, load) and all(self.allows(index, r) for r in needed):
                return index, option.price
        return None


def exchange(nodes: Sequence[StateNode], templates: Mapping[str, ClaimTemplate], *,
             max_sweeps: int = 10) -> ExchangeResult:
    """The exchange over ``nodes`` (every node of the cluster: their pods decide what is constrained);
    ``templates`` by NodePool name are a scheduling context's (requirements, taints, types with offerings,
    DaemonSet groups)."""
    pods = [pod for node in nodes for pod in node.pods.values()]
    counted = counted_selectors(pods, spread=False)
    pinned = _topology_keys(pods) - {wk.HOSTNAME}
    parts: list[_Node] = []
    left_alone: dict[str, str] = {}
    for node in nodes:
        built = _part(node, templates, counted, pinned)
        if isinstance(built, str):
            left_alone[node.name] = built
        else:
            parts.append(built)
    original = sum(part.original_price for part in parts)
    for part in parts:  # each node at the cheapest type that holds what it has now, never above what it costs
        found = part.cheapest(part.load, part.needs.values(), below=part.original_price + PRICE_EPSILON)
        part.index, part.price = found if found is not None else (_current(part), part.original_price)
    pools: dict[str, list[_Node]] = {}
    for part in parts:
        pools.setdefault(part.template.name, []).append(part)
    ceilings = {pool: _ceilings(group) for pool, group in pools.items()}
    for pool, group in pools.items():
        _repack(group, ceilings[pool])
    sweeps = 0
    for sweeps in range(1, max_sweeps + 1):  # noqa: B007 - the count is reported
        improved = False
        for source in sorted(parts, key=_cost_per_use, reverse=True):
            pool = source.template.name
            if source.movable and source.index != REMOVED and _relieve(source, pools[pool], ceilings[pool]):
                improved = True
        if not improved:
            break
    origin = {key: part.state.name for part in parts for key in part.own_movable}
    moves = {key: (origin[key], part.state.name) for part in parts for key in sorted(part.movable)
             if key not in part.own_movable}
    outcomes = [_outcome(part) for part in parts]
    return ExchangeResult(outcomes, moves, left_alone, sum(o.new_price for o in outcomes), original, sweeps)


# -- who takes part, and as what ---------------------------------------------------------------------------------


def _part(node: StateNode, templates: Mapping[str, ClaimTemplate], counted: Sequence[tuple[str, object]],
          pinned: set[str]) -> _Node | str:
    """The node as the search sees it, or why it takes no part."""
    if node.node is None or not node.managed or not node.initialized or node.marked_for_deletion:
        return "not an initialized, managed node"
    template = templates.get(node.nodepool)
    if template is None:
        return f"NodePool {node.nodepool!r} has no template"
    current = next((info for info in template.types if info.name == node.instance_type), None)
    if current is None:
        return f"instance type {node.instance_type!r} is not among its NodePool's"
    own = _offering_price(current, node)
    if own is None:
        return f"no {node.capacity_type} offering of {node.instance_type} in {node.zone}"
    daemons = dict(node.daemonset_requests)
    here = _Option(own, current, {n: v - daemons.get(n, 0) for n, v in node.allocatable.items()})
    load: dict[str, int] = {}
    movable: dict[str, Pod] = {}
    needs: dict[str, Requirements] = {}
    staying: list[Pod] = []
    for pod in node.pods.values():
        if pod.is_daemonset_pod or pod.is_terminal:
            continue
        _add(load, pod.scheduling_requests)
        if (not pod.is_static and not pod.is_terminating and pod.do_not_disrupt is None
                and plain_pod(pod, counted)):
            movable[pod.key] = pod
            requirements = pod_requirements(pod)
            if len(requirements):
                needs[pod.key] = requirements
        else:
            staying.append(pod)
    frozen = _keeps_type(node, template, staying)
    options = [here] if frozen else _options(node, template, current, here, daemons, staying, pinned)
    return _Node(node, template, current, options, load, movable, needs, own, removable=not frozen,
                 own_movable=frozenset(movable))


def _keeps_type(node: StateNode, template: ClaimTemplate, staying: Sequence[Pod]) -> bool:
    if node.capacity_type == wk.CAPACITY_TYPE_RESERVED or template.requirements.has_min_values():
        return True
    if node.node is not None and node.node.annotations.get(wk.DO_NOT_DISRUPT) == "true":
        return True
    if any(pod.volumes or pod.do_not_disrupt is not None for pod in staying):
        return True
    zones, capacity_types = template.requirements.get(wk.ZONE), template.requirements.get(wk.CAPACITY_TYPE)
    return (zones is not None and not zones.has(node.zone)) or (
        capacity_types is not None and not capacity_types.has(node.capacity_type))


def _options(node: StateNode, template: ClaimTemplate, current: TypeInfo, here: _Option, daemons: dict[str, int],
             staying: Sequence[Pod], pinned: set[str]) -> list[_Option]:
    picky = [pod for pod in staying if pod.node_selector or pod.required_terms]
    options = [here]
    for info in template.types:
        if info.name == current.name:
            continue
        price = _offering_price(info, node)
        if price is None:
            continue
        labels = _labels_as(node, current, info)
        if any(labels.get(key) != node.labels.get(key) for key in pinned):
            continue
        if picky:
            as_requirements = Requirements.from_labels(labels)
            if not all(_meets(as_requirements, pod) for pod in picky):
                continue
        overhead = template.daemon_groups[template.group_index[info.name]].overhead
        room = {n: v - max(overhead.get(n, 0), daemons.get(n, 0)) for n, v in info.allocatable.items()}
        options.append(_Option(price, info, room))
    options.sort(key=lambda option: (option.price, option.info.name != current.name, option.info.name))
    return options


def _meets(node_requirements: Requirements, pod: Pod) -> bool:
    """The pod's node selector and one of its required node-affinity terms hold on these labels."""
    base = Requirements.from_labels(pod.node_selector)
    terms = [base.merge(term.requirements) for term in pod.required_terms] or [base]
    return any(node_requirements.is_compatible(term) for term in terms)


def _labels_as(node: StateNode, current: TypeInfo, info: TypeInfo) -> dict[str, str]:
    """The node's labels were it of type ``info``: its own, with that type's catalogue labels for its type's."""
    if info is current:
        return dict(node.labels)
    labels = {k: v for k, v in node.labels.items() if k not in current.instance_type.labels}
    labels.update(info.instance_type.labels)
    return labels


def _offering_price(info: TypeInfo, node: StateNode) -> float | None:
    prices = [o.price for o in info.offerings if o.zone == node.zone and o.capacity_type == node.capacity_type]
    return min(prices) if prices else None


def _topology_keys(pods: Iterable[Pod]) -> set[str]:
    keys: set[str] = set()
    for pod in pods:
        keys.update(constraint.topology_key for constraint in pod.topology_spread)
        keys.update(term.topology_key for term in (*pod.affinity_required, *pod.anti_affinity_required))
        keys.update(w.term.topology_key for w in (*pod.affinity_preferred, *pod.anti_affinity_preferred))
    return keys


def _current(part: _Node) -> int:
    return next(i for i, option in enumerate(part.options) if option.info.name == part.state.instance_type)


# -- the search --------------------------------------------------------------------------------------------------

Snapshot = list[tuple[dict[str, int], dict[str, Pod], dict[str, Requirements], int, float]]


def _snapshot(group: Sequence[_Node]) -> Snapshot:
    return [(dict(n.load), dict(n.movable), dict(n.needs), n.index, n.price) for n in group]


def _restore(group: Sequence[_Node], snapshot: Snapshot) -> None:
    for node, (load, movable, needs, index, price) in zip(group, snapshot, strict=True):
        node.load, node.movable, node.needs = dict(load), dict(movable), dict(needs)
        node.index, node.price = index, price


def _by_cpu(pod: Pod) -> tuple[int, int, str]:
    requests = pod.scheduling_requests
    return -requests.amount("cpu"), -requests.amount("memory"), pod.key


def _by_memory(pod: Pod) -> tuple[int, int, str]:
    requests = pod.scheduling_requests
    return -requests.amount("memory"), -requests.amount("cpu"), pod.key


def _repack(group: Sequence[_Node], ceilings: Mapping[str, int]) -> None:
    """Every movable pod of the pool taken off and put back, largest first (by CPU, then by memory), each where
    the price grows least (best fit among the nodes it fits as they are); the cheaper packing is kept when it
    costs strictly less than the pool does now."""
    before = _snapshot(group)
    current = sum(n.price for n in group)
    best: tuple[float, Snapshot] | None = None
    for order in (_by_cpu, _by_memory):
        packed = _pack(group, order)
        if packed is not None and packed < current - PRICE_EPSILON and _within(group, ceilings) and (
                best is None or packed < best[0]):
            best = (packed, _snapshot(group))
        _restore(group, before)
    if best is not None:
        _restore(group, best[1])


def _pack(group: Sequence[_Node], order: Callable[[Pod], tuple[int, int, str]]) -> float | None:
    """The pool's movable pods put back in ``order``; the total price, or None when a pod found no node."""
    pods: list[tuple[Pod, Requirements | None]] = []
    for node in group:
        for key, pod in node.movable.items():
            pods.append((pod, node.needs.get(key)))
            _add(node.load, pod.scheduling_requests, -1)
        node.movable, node.needs = {}, {}
        found = node.cheapest(node.load, ())
        if found is None:
            return None
        node.index, node.price = found
    for pod, needs in sorted(pods, key=lambda item: order(item[0])):
        placed = _best_target(pod, needs, None, group, {}, float("inf"))
        if placed is None:
            return None
        target, load, index, price = placed
        target.load, target.index, target.price = load, index, price
        target.movable[pod.key] = pod
        if needs is not None:
            target.needs[pod.key] = needs
    return sum(n.price for n in group)



def _relieve(source: _Node, peers: Sequence[_Node], ceilings: Mapping[str, int]) -> bool:
    """Move some of ``source``'s movable pods to ``peers`` when that lowers the total cost; True if it did."""
    fixed_load = dict(source.load)
    for pod in source.movable.values():
        _add(fixed_load, pod.scheduling_requests, -1)
    floor = source.cheapest(fixed_load, ())
    if floor is None or floor[1] >= source.price - PRICE_EPSILON:
        return False  # even with every movable pod gone it would cost as much
    tentative: dict[int, tuple[dict[str, int], int, float]] = {}  # id(peer) -> its load, option, price
    source_load = dict(source.load)
    source_needs = dict(source.needs)
    growth = 0.0
    tried: list[tuple[Pod, _Node]] = []
    best_delta, best_count = -PRICE_EPSILON, 0
    for pod in sorted(source.movable.values(), key=_size, reverse=True):
        limit = source.price - floor[1] - growth
        found = _best_target(pod, source.needs.get(pod.key), source, peers, tentative, limit)
        if found is None:
            continue
        target, load, index, price = found
        before = tentative.get(id(target), (target.load, target.index, target.price))
        growth += price - before[2]
        tentative[id(target)] = (load, index, price)
        _add(source_load, pod.scheduling_requests, -1)
        source_needs.pop(pod.key, None)
        tried.append((pod, target))
        shrunk = source.cheapest(source_load, source_needs.values())
        if shrunk is not None and shrunk[1] - source.price + growth < best_delta:
            best_delta, best_count = shrunk[1] - source.price + growth, len(tried)
    if not best_count:
        return False
    return _commit(source, tried[:best_count], peers, ceilings)


def _best_target(pod: Pod, needs: Requirements | None, source: _Node | None, peers: Sequence[_Node],
                 tentative: Mapping[int, tuple[dict[str, int], int, float]],
                 limit: float) -> tuple[_Node, dict[str, int], int, float] | None:
    """The peer whose price grows least (by less than ``limit``) when it takes ``pod``, and among those the
    tightest fit (least share of its CPU and memory left unused); its load, option and price with the pod."""
    requests = pod.scheduling_requests
    best: tuple[float, float, _Node, dict[str, int], int, float] | None = None
    for peer in peers:
        if peer is source:
            continue
        load, index, price = tentative.get(id(peer), (peer.load, peer.index, peer.price))
        room = peer.options[index].room if index != REMOVED else {}
        after = dict(load)
        _add(after, requests)
        if any(value > room.get(name, 0) for name, value in after.items() if value > 0):
            ceiling = price + limit if best is None else min(price + limit, price + best[0] + PRICE_EPSILON)
            if best is not None and best[0] == 0.0:
                continue
            grown = peer.cheapest(after, _with(peer, needs), start=index + 1, below=ceiling)
            if grown is None or untolerated(peer.state.taints, pod.tolerations):
                continue
            index, grown_price = grown
        elif (needs is not None and not peer.allows(index, needs)) or untolerated(peer.state.taints,
                                                                                   pod.tolerations):
            continue
        else:
            grown_price = price
        option = peer.options[index]
        unused = sum(1 - after.get(n, 0) / option.room[n] for n in ("cpu", "memory")
                                    if option.room.get(n, 0) > 0)
        candidate = (grown_price - price, unused, peer, after, index, grown_price)
        if best is None or candidate[:2] < best[:2]:
            best = candidate
    return None if best is None else best[2:]  # type: ignore[return-value]


def _with(peer: _Node, needs: Requirements | None) -> list[Requirements]:
    found = list(peer.needs.values())
    if needs is not None:
        found.append(needs)
    return found


def _commit(source: _Node, chosen: Sequence[tuple[Pod, _Node]], peers: Sequence[_Node],
            ceilings: Mapping[str, int]) -> bool:
    """Apply the moves (each target re-priced upwards, the source downwards); undone when the pool would pass
    a ceiling of its limits or the total would not drop."""
    touched = {id(source): source, **{id(target): target for _, target in chosen}}
    saved = {key: (dict(n.load), dict(n.movable), dict(n.needs), n.index, n.price) for key, n in touched.items()}
    before = sum(n.price for n in touched.values())
    for pod, target in chosen:
        requirements = source.needs.pop(pod.key, None)
        del source.movable[pod.key]
        _add(source.load, pod.scheduling_requests, -1)
        target.movable[pod.key] = pod
        if requirements is not None:
            target.needs[pod.key] = requirements
        _add(target.load, pod.scheduling_requests)
        found = target.cheapest(target.load, target.needs.values(), start=target.index)
        if found is None:
            break
        target.index, target.price = found
    else:
        found = source.cheapest(source.load, source.needs.values())
        if found is not None:
            source.index, source.price = found
            if (sum(n.price for n in touched.values()) < before - PRICE_EPSILON
                    and _within(peers, ceilings)):
                return True
    for key, node in touched.items():
        node.load, node.movable, node.needs, node.index, node.price = saved[key]
    return False


def _ceilings(group: Sequence[_Node]) -> dict[str, int]:
    """Per limited resource of the pool: the most its nodes may have, the limit or what they have now."""
    limits = group[0].template.nodepool.limits
    return {name: max(limit, _capacity(group, name)) for name, limit in limits.items() if name != NODES}


def _within(group: Sequence[_Node], ceilings: Mapping[str, int]) -> bool:
    return all(_capacity(group, name) <= ceiling for name, ceiling in ceilings.items())


def _capacity(group: Sequence[_Node], resource: str) -> int:
    return sum(n.options[n.index].info.capacity.amount(resource) for n in group if n.index != REMOVED)


# -- helpers -----------------------------------------------------------------------------------------------------


def _holds(room: Mapping[str, int], load: Mapping[str, int]) -> bool:
    return all(value <= room.get(name, 0) for name, value in load.items() if value > 0)


def _add(into: dict[str, int], requests: Mapping[str, int], sign: int = 1) -> None:
    for name, value in requests.items():
        into[name] = into.get(name, 0) + sign * value


def _size(pod: Pod) -> tuple[int, int, str]:
    requests = pod.scheduling_requests
    return requests.amount("cpu"), requests.amount("memory"), pod.key


def _cost_per_use(part: _Node) -> float:
    """$/h per share of its type's room used (the larger of CPU and memory)."""
    if part.index == REMOVED:
        return 0.0
    room = part.options[part.index].room
    used = max((part.load.get(n, 0) / room[n] for n in ("cpu", "memory") if room.get(n, 0) > 0), default=0.0)
    return part.price / used if used > 0 else part.price * 1e6


def _outcome(part: _Node) -> NodeOutcome:
    """The node after: the pods that never could move, and the movable ones it holds now."""
    stayed = {key for key, pod in part.state.pods.items()
              if not pod.is_daemonset_pod and not pod.is_terminal and key not in part.own_movable}
    removed = part.index == REMOVED
    return NodeOutcome(part.state.name, part.template.name, part.state.instance_type, part.original_price,
                       None if removed else part.options[part.index].info.name, part.price,
                       tuple(sorted(stayed | set(part.movable))))
