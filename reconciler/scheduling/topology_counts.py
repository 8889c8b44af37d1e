"""Domain counts of a topology group over the snapshot, computed once per base topology and reused by its forks.

A scheduling run's topology group (a pod's spread, affinity or anti-affinity rule) starts with the domains of the
active nodes its node filter accepts and the counts of the bound pods its selector matches. Disruption tries many
"what if these nodes went away" runs against one snapshot, and each used to recount every node and pod for each
such group. ``BaseCounts`` counts a group once with nothing excluded and then gives each run its counts less the
run's excluded nodes and uncounted (moving) pods; ``count_directly`` is the plain count both are checked against.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import is_not

from reconciler.model import labels as wk
from reconciler.model.pod import Pod
from reconciler.model.requirements import Requirements
from reconciler.model.taints import Taint
from reconciler.scheduling.topology_group import TopologyGroup


@dataclass(slots=True)
class CountedPod:
    """A bound pod as topology counting sees it."""

    pod: Pod
    node_labels: Mapping[str, str]
    node_taints: tuple[Taint, ...]
    node_requirements: Requirements
    node_name: str


# An active node as topology sees it: name, hostname, labels, taints, requirements.
NodeDomains = tuple[str, str, Mapping[str, str], tuple[Taint, ...], Requirements]


class PodsByNamespace:
    """Counted pods by namespace, indexed on the first ``get`` (a base and all its forks share one)."""

    __slots__ = ("_counted", "_index")

    def __init__(self, counted_pods: Sequence[CountedPod]) -> None:
        self._counted = counted_pods
        self._index: dict[str, list[CountedPod]] | None = None

    def get(self, namespace: str) -> Sequence[CountedPod]:
        if self._index is None:
            self._index = {}
            for counted in self._counted:
                self._index.setdefault(counted.pod.namespace, []).append(counted)
        return self._index.get(namespace, ())


def _pod_domain(group: TopologyGroup, counted: CountedPod) -> str | None:
    domain = counted.node_labels.get(group.key)
    if domain is None and group.key == wk.HOSTNAME:
        domain = counted.node_name
    return domain


def count_directly(
    group: TopologyGroup, nodes: Sequence[NodeDomains], pods: PodsByNamespace, excluded: Collection[str] = (),
    uncounted: Collection[str] = (),
) -> None:
    """Register the domains of the nodes not excluded and count the matching bound pods not uncounted."""
    for name, _, labels, taints, requirements in nodes:
        if excluded and name in excluded:
            continue
        domain = labels.get(group.key)
        if domain is not None and group.node_filter.matches(taints, requirements):
            group.register(domain)
    for namespace in group.namespaces:
        for counted in pods.get(namespace):
            if uncounted and counted.pod.key in uncounted:
                continue
            if not group.selector.matches(counted.pod.labels):
                continue
            domain = _pod_domain(group, counted)
            if domain is None or not group.node_filter.matches(counted.node_taints, counted.node_requirements):
                continue
            group.record((domain,))


@dataclass(slots=True)
class _GroupCount:
    """One group's count over the whole snapshot: what nodes register and what pods add, per domain."""

    node_domains: dict[str, int]  # domain -> how many nodes the filter accepts have it
    node_domain: dict[str, str]  # node name -> its domain (accepted nodes only)
    pod_domain: dict[str, str]  # pod key -> the domain it counts in (matching pods only)
    domains: dict[str, int]  # every node domain (0) and pod count together
    positive: frozenset[str]  # domains with a pod
    empty: frozenset[str]  # node domains without one


_FEW_PLACES = 64  # more places differ than this: the nodes moved (one came or went), found by identity instead


@dataclass(slots=True)
class Change:
    """How a base's nodes and pods differ from the previous base's (pods of changed nodes leave and arrive)."""

    nodes_before: Sequence[NodeDomains]
    removed_pods: Sequence[CountedPod]
    added_pods: Sequence[CountedPod]
    _nodes: tuple[list[str], list[NodeDomains]] | None = None

    def nodes(self, after: Sequence[NodeDomains]) -> tuple[list[str], list[NodeDomains]]:
        """(names of nodes gone or changed, nodes new or changed)."""
        if self._nodes is None:
            # An unchanged node's entry is the same object in both lists: only the others are compared by name
            # (C-level loops find them, in list order): those at places that differ, or, when nodes came, went
            # or moved, those not in the other list.
            before = self.nodes_before
            moved = list(compress(range(len(after)), map(is_not, before, after))) \
                if len(before) == len(after) else None
            if moved is not None and len(moved) <= _FEW_PLACES:
                old = {before[i][0]: before[i] for i in moved}
                new = {after[i][0]: after[i] for i in moved}
            else:
                left = set(map(id, before)).difference(map(id, after))
                arrived = set(map(id, after)).difference(map(id, before))
                old = {entry[0]: entry for entry in compress(before, map(left.__contains__, map(id, before)))}
                new = {entry[0]: entry for entry in compress(after, map(arrived.__contains__, map(id, after)))}
            gone = [name for name, entry in old.items() if not _same_node(entry, new.get(name))]
            came = [entry for name, entry in new.items() if not _same_node(entry, old.get(name))]
            self._nodes = (gone, came)
        return self._nodes


def _same_node(a: NodeDomains, b: NodeDomains | None) -> bool:
    # An unchanged node's SlotBase, and so its domains tuple, is kept across versions: mostly the same object.
    return a is b or (b is not None and a[1] == b[1] and a[2] is b[2] and a[3] == b[3] and a[4] is b[4])


class BaseCounts:
    """Per group identity, its count over a base topology's nodes and pods, computed on first use: from the
    previous base's count and the change when that base had one, else over everything."""

    __slots__ = ("_change", "_counts", "_previous")

    def __init__(self, previous: BaseCounts | None = None, change: Change | None = None) -> None:
        self._counts: dict[tuple, _GroupCount] = {}
        self._previous = previous
        self._change = change
        if previous is not None:
            previous._previous = None  # one step back only: no chain of bases is kept alive

    def count(
        self, group: TopologyGroup, nodes: Sequence[NodeDomains], pods: PodsByNamespace, excluded: Collection[str],
        uncounted: Collection[str],
    ) -> None:
        """What ``count_directly`` does to ``group``, from the cached whole-snapshot count."""
        found = self._counts.get(group.identity)
        if found is None:
            earlier = self._previous._counts.get(group.identity) if self._previous is not None else None
            if earlier is not None and self._change is not None:
                found = _updated(earlier, group, self._change, nodes)
            else:
                found = _whole(group, nodes, pods)
            self._counts[group.identity] = found
        if not found.domains:
            return
        prior = set(group.domains)  # registered from NodePools before counting: few
        group.domains.update(found.domains)
        group.empty -= found.positive
        group.empty |= found.empty
        group.epoch += 1
        if not excluded and not uncounted:
            return
        # The run's own view: excluded nodes do not register their domain, uncounted pods do not count.
        gone: dict[str, int] = {}
        for name in excluded:
            domain = found.node_domain.get(name)
            if domain is not None:
                gone[domain] = gone.get(domain, 0) + 1
        moved: dict[str, int] = {}
        for key in uncounted:
            domain = found.pod_domain.get(key)
            if domain is not None:
                moved[domain] = moved.get(domain, 0) + 1
        for domain in gone.keys() | moved.keys():
            count = group.domains[domain] - moved.get(domain, 0)
            if count > 0:
                group.domains[domain] = count
            elif domain in prior or found.node_domains.get(domain, 0) > gone.get(domain, 0):
                group.domains[domain] = 0
                group.empty.add(domain)
            else:
                del group.domains[domain]
                group.empty.discard(domain)


def _whole(group: TopologyGroup, nodes: Sequence[NodeDomains], pods: PodsByNamespace) -> _GroupCount:
    node_domains: dict[str, int] = {}
    node_domain: dict[str, str] = {}
    for name, _, labels, taints, requirements in nodes:
        domain = labels.get(group.key)
        if domain is not None and group.node_filter.matches(taints, requirements):
            node_domains[domain] = node_domains.get(domain, 0) + 1
            node_domain[name] = domain
    pod_domain: dict[str, str] = {}
    counts: dict[str, int] = {}
    for namespace in group.namespaces:
        for counted in pods.get(namespace):
            if not group.selector.matches(counted.pod.labels):
                continue
            domain = _pod_domain(group, counted)
            if domain is None or not group.node_filter.matches(counted.node_taints, counted.node_requirements):
                continue
            pod_domain[counted.pod.key] = domain
            counts[domain] = counts.get(domain, 0) + 1
    domains = dict.fromkeys(node_domains, 0)
    domains.update(counts)
    positive = frozenset(counts)
    return _GroupCount(node_domains, node_domain, pod_domain, domains, positive, frozenset(domains.keys() - positive))


def _updated(earlier: _GroupCount, group: TopologyGroup, change: Change, nodes: Sequence[NodeDomains]) -> _GroupCount:
    """``earlier`` brought up to date by ``change`` (what ``_whole`` would give on the new base)."""
    node_domains, node_domain = dict(earlier.node_domains), dict(earlier.node_domain)
    pod_domain, domains = dict(earlier.pod_domain), dict(earlier.domains)
    touched: set[str] = set()
    gone, came = change.nodes(nodes)
    for name in gone:
        domain = node_domain.pop(name, None)
        if domain is not None:
            node_domains[domain] -= 1
            if not node_domains[domain]:
                del node_domains[domain]
            touched.add(domain)
    for name, _, labels, taints, requirements in came:
        domain = labels.get(group.key)
        if domain is not None and group.node_filter.matches(taints, requirements):
            node_domains[domain] = node_domains.get(domain, 0) + 1
            node_domain[name] = domain
            touched.add(domain)
    for counted in change.removed_pods:
        domain = pod_domain.pop(counted.pod.key, None)
        if domain is not None:
            domains[domain] -= 1
            touched.add(domain)
    for counted in change.added_pods:
        if counted.pod.namespace not in group.namespaces or not group.selector.matches(counted.pod.labels):
            continue
        domain = _pod_domain(group, counted)
        if domain is None or not group.node_filter.matches(counted.node_taints, counted.node_requirements):
            continue
        pod_domain[counted.pod.key] = domain
        domains[domain] = max(domains.get(domain, 0), 0) + 1
        touched.add(domain)
    positive, empty = set(earlier.positive), set(earlier.empty)
    for domain in touched:
        count = domains.get(domain, 0)
        positive.discard(domain)
        empty.discard(domain)
        if count > 0:
            positive.add(domain)
        elif domain in node_domains:
            domains[domain] = 0
            empty.add(domain)
        else:
            domains.pop(domain, None)
    return _GroupCount(node_domains, node_domain, pod_domain, domains, frozenset(positive), frozenset(empty))
