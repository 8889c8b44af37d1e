"""Topology bookkeeping for one scheduling run: spread constraints, pod affinity and anti-affinity.

Built from the cluster snapshot: domains come from NodePool requirements and
labels, instance types (zones from offerings) and existing nodes; counts come
from bound pods. Pods being scheduled start uncounted and are recorded as they
are placed. Required anti-affinity of pods already running is enforced in
reverse through ``inverse`` groups.
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from reconciler.model import labels as wk
from reconciler.model.pod import Pod, PodAffinityTerm, TopologySpreadConstraint
from reconciler.model.requirements import Requirement, Requirements
from reconciler.model.selectors import LabelExpression
from reconciler.model.taints import Taint
from reconciler.scheduling.domain_costs import DomainCosts
from reconciler.scheduling.layered_map import LayeredMap, derived
from reconciler.scheduling.podinfo import IGNORE, SchedulingPod
from reconciler.scheduling.topology_counts import BaseCounts, Change, CountedPod, NodeDomains, PodsByNamespace
from reconciler.scheduling.topology_group import (
    AFFINITY,
    ANTI_AFFINITY,
    SPREAD,
    NodeFilter,
    TopologyGroup,
)
from reconciler.scheduling.topology_group import IGNORE as IGNORE_POLICY

_NAME_AND_HOSTNAME = operator.itemgetter(0, 1)  # of a NodeDomains: a node's name and hostname


class TopologyError(Exception):
    """No allowed domain; the message is built only when read (most rejections are never shown)."""

    def __init__(self, group: TopologyGroup, pod_domains: Requirement, node_domains: Requirement) -> None:
        super().__init__()
        self.group = group
        self.pod_domains = pod_domains
        self.node_domains = node_domains

    @property
    def monotone(self) -> bool:
        """Anti-affinity (empty domains only disappear) and hostname spread (the minimum is always 0) only get
        stricter as pods are placed in this run: a candidate they refuse stays refused."""
        return self.group.kind == ANTI_AFFINITY or (self.group.key == wk.HOSTNAME and self.group.kind == SPREAD)

    def __str__(self) -> str:
        return (f"unsatisfiable {self.group.describe()}; the pod allows {self.pod_domains}, "
                f"the node {self.node_domains}")


def _hostnames_after(hostnames: dict[str, str], hostname_set: frozenset[str], gone: Sequence[str],
                     came: Sequence[NodeDomains]) -> tuple[dict[str, str], frozenset[str]]:
    """Node name -> hostname, and the hostnames, after the nodes ``gone`` (or changed) and those that ``came``
    (or changed): this version's own when none did (pods moved), else a copy brought up to date."""
    if not gone and not came:
        return hostnames, hostname_set
    updated = dict(hostnames)
    for name in gone:
        del updated[name]
    updated.update(map(_NAME_AND_HOSTNAME, came))
    return updated, frozenset(updated.values())


class Topology:
    """Built once per snapshot (nothing excluded); each scheduling run works on a ``fork``."""

    def __init__(
        self,
        *,
        domain_sources: Mapping[str, Mapping[str, list[tuple[Taint, ...]]]],
        counted_pods: Sequence[CountedPod],
        node_domains: Sequence[NodeDomains],
        namespace_labels: Mapping[str, Mapping[str, str]],
        policy: str,
    ) -> None:
        self._domain_sources = domain_sources
        self._counted = counted_pods
        self._nodes = node_domains
        self._namespace_labels = namespace_labels
        self.policy = policy
        self.groups: dict[tuple, TopologyGroup] = {}
        self.inverse: dict[tuple, TopologyGroup] = {}
        # Set on a run's fork: prices the domains a new affinity group may start in (None: no preference).
        self.domain_costs: DomainCosts | None = None
        self._preferring: set[TopologyGroup] = set()  # groups a preference narrowed during this run
        self._unpreferred: set[TopologyGroup] = set()  # groups whose preference was dropped (see drop_preferences)
        self._preferences: dict[tuple[object, ...], tuple[str, ...] | None] = {}
        self._pods: dict[str, SchedulingPod] = {}  # the run's pods by key (whose classes price a group's domains)
        self._owned: dict[str, list[TopologyGroup]] = {}
        self._inverse_cache: dict[tuple[str, frozenset[tuple[str, str]]], list[TopologyGroup]] = {}
        self._inverse_identity: dict[tuple[PodAffinityTerm, str, tuple], tuple] = {}
        self._by_namespace = PodsByNamespace(counted_pods)  # shared with forks, indexed on first use
        self._base_counts = BaseCounts()  # shared with forks: groups' counts over all of this snapshot
        # Set on a fork: what ``_count`` skips when a group is first used in that run.
        self._excluded: Collection[str] = ()
        self._uncounted: Collection[str] = ()
        # Filled while building (read by ``fork``): what a fork must undo for excluded nodes and uncounted pods.
        self._hostnames = dict(map(_NAME_AND_HOSTNAME, node_domains))
        self._hostname_set = frozenset(self._hostnames.values())
        self._sources: dict[tuple, frozenset[str]] = {}  # inverse group -> domains registered from NodePools
        # Inverse group -> (pod key, node name) of the pod whose tolerations chose those domains, and them.
        self._creators: dict[tuple, tuple[str, str]] = {}
        self._creator_tolerations: dict[tuple, tuple] = {}
        # Counted pod key -> the inverse groups it owns; pod key -> (inverse group, domain). A base topology's are
        # LayeredMaps once ``updated`` (never edited once another version shares them), a fork's are dicts.
        self._inverse_of: dict[str, list[tuple]] | LayeredMap[str, list[tuple]] = {}
        self._contributions: dict[str, list[tuple[tuple, str]]] | LayeredMap[str, list[tuple[tuple, str]]] = {}
        for counted in counted_pods:
            if counted.pod.anti_affinity_required:
                self._add_inverse(counted.pod, counted.node_labels, counted.node_name)
        for _, hostname, *_ in node_domains:
            self.register(wk.HOSTNAME, hostname)

    def updated(
        self,
        counted_pods: Sequence[CountedPod],
        node_domains: Sequence[NodeDomains],
        *,
        removed_pods: Sequence[CountedPod],
        added_pods: Sequence[CountedPod],
        position: Callable[[str, str], tuple[int, int] | None],
    ) -> Topology | None:
        """The topology a build from ``counted_pods`` and ``node_domains`` gives (same NodePool domains, policy
        and namespaces), made from this one by the pods that left or arrived (a pod whose node changed leaves
        and arrives) instead of recounting; this one is left as it was. ``position(pod key, node name)`` is the
        pod's place in ``counted_pods`` order (the first owner of a group creates it). None when a group's
        NodePool domains would come from a pod with other tolerations: build afresh then."""
        new = copy.copy(self)
        new._counted, new._nodes = counted_pods, node_domains
        new._by_namespace = PodsByNamespace(counted_pods)
        change = Change(self._nodes, removed_pods, added_pods)
        new._base_counts = BaseCounts(self._base_counts, change)
        new.groups, new._owned, new._inverse_cache = {}, {}, {}
        new._hostnames, new._hostname_set = _hostnames_after(self._hostnames, self._hostname_set,
                                                             *change.nodes(node_domains))
        new._inverse_identity = dict(self._inverse_identity)
        new._sources, new._creators = dict(self._sources), dict(self._creators)
        new._creator_tolerations = dict(self._creator_tolerations)
        # One entry per running anti-affinity pod, a few of them changed: shared with this version, not copied.
        new._contributions, new._inverse_of = derived(self._contributions), derived(self._inverse_of)
        new.inverse = {identity: group.fork(set(group.owners)) for identity, group in self.inverse.items()}
        touched: dict[tuple, set[str]] = {}
        lost: set[tuple] = set()  # groups whose creator left
        for counted in removed_pods:
            key = counted.pod.key
            for identity, domain in new._contributions.pop(key, ()):
                new.inverse[identity].domains[domain] -= 1
                touched.setdefault(identity, set()).add(domain)
            for identity in new._inverse_of.pop(key, ()):
                new.inverse[identity].owners.discard(key)
                if new._creators.get(identity, (key,))[0] == key:
                    lost.add(identity)
        before = set(new.inverse)
        joined: dict[tuple, list[CountedPod]] = {}  # group -> owners that arrived
        for counted in added_pods:
            if counted.pod.anti_affinity_required:
                new._add_inverse(counted.pod, counted.node_labels, counted.node_name)
                for identity, domain in new._contributions.get(counted.pod.key, ()):
                    touched.setdefault(identity, set()).add(domain)
                for identity in new._inverse_of[counted.pod.key]:
                    joined.setdefault(identity, []).append(counted)
        for identity in [i for i, group in new.inverse.items() if not group.owners]:
            del new.inverse[identity]
            new._sources.pop(identity, None)
            new._creators.pop(identity, None)
            new._creator_tolerations.pop(identity, None)
        # Hostnames: every hostname group holds every active node's hostname (empty or not).
        gone: frozenset[str]
        arrived: frozenset[str]
        if new._hostname_set is self._hostname_set:
            gone = arrived = frozenset()
        else:
            gone, arrived = self._hostname_set - new._hostname_set, new._hostname_set - self._hostname_set
        for identity, group in new.inverse.items():
            if group.key != wk.HOSTNAME:
                continue
            for hostname in (new._hostname_set if identity not in before else arrived):
                group.register(hostname)
            if gone:
                touched.setdefault(identity, set()).update(gone)
        for identity, domains in touched.items():
            changed = new.inverse.get(identity)
            if changed is None:
                continue
            for domain in domains:
                if changed.domains.get(domain, 0) > 0:
                    continue
                if domain in new._sources[identity] or (changed.key == wk.HOSTNAME and domain in new._hostname_set):
                    changed.domains[domain] = 0
                    changed.empty.add(domain)
                else:
                    changed.domains.pop(domain, None)
                    changed.empty.discard(domain)
        if lost & new.inverse.keys():
            return new if new._recount_creators() else None
        if (joined or lost) and not new._settle_creators(joined, position):
            return None
        return new

    def _settle_creators(self, joined: Mapping[tuple, Sequence[CountedPod]],
                         position: Callable[[str, str], tuple[int, int] | None]) -> bool:
        """Creators and group order after owners arrived (no creator left): the first owner in counted order.
        False when that owner's tolerations are not those the group's NodePool domains were chosen with."""
        for identity, owners in joined.items():
            if identity not in self.inverse:
                continue
            key, node = self._creators[identity]
            best = position(key, node)
            for counted in owners:
                found = position(counted.pod.key, counted.node_name)
                if found is None or best is None:
                    return self._recount_creators()
                if found < best:
                    best, key, node = found, counted.pod.key, counted.node_name
                    if counted.pod.tolerations != self._creator_tolerations[identity]:
                        return False
            self._creators[identity] = (key, node)
        if len(self.inverse) > 1:
            places = {identity: position(*self._creators[identity]) for identity in self.inverse}
            if any(place is None for place in places.values()):
                return self._recount_creators()
            order = sorted(self.inverse, key=places.__getitem__)  # type: ignore[arg-type]
            if order != list(self.inverse):
                self.inverse = {identity: self.inverse[identity] for identity in order}
        return True

    def _recount_creators(self) -> bool:
        """Creators and group order as a build makes them, by a pass over every counted pod."""
        order: dict[tuple, None] = {}
        for counted in self._counted:
            pod = counted.pod
            for identity in self._inverse_of.get(pod.key, ()):
                if identity in order:
                    continue
                order[identity] = None
                if self._creator_tolerations[identity] != pod.tolerations:
                    return False
                self._creators[identity] = (pod.key, counted.node_name)
        if list(order) != list(self.inverse):
            self.inverse = {identity: self.inverse[identity] for identity in order}
        return True

    def fork(self, *, excluded_nodes: Collection[str] = (), uncounted_pods: Collection[str] = ()) -> Topology:
        """A run's topology: the same as building one without ``excluded_nodes`` and ``uncounted_pods``,
        made by copying this one's running anti-affinity groups and subtracting instead of recounting."""
        uncounted = set(uncounted_pods)
        for identity, (creator, _) in self._creators.items():
            if creator in uncounted and self.inverse[identity].owners - uncounted:
                # Another owner would have created the group, possibly with other tolerations: build afresh.
                return self._rebuilt(excluded_nodes, uncounted_pods)
        fork = copy.copy(self)
        fork._preferring, fork._unpreferred, fork._preferences, fork._pods = set(), set(), {}, {}
        fork._excluded, fork._uncounted = excluded_nodes, uncounted
        fork.groups, fork._owned, fork._inverse_cache = {}, {}, {}
        fork._inverse_identity = dict(self._inverse_identity)
        fork._sources, fork._creators, fork._contributions, fork._inverse_of = {}, {}, {}, {}
        # Per group, how many of its counts per domain came from pods this run does not count.
        subtract: dict[tuple, dict[str, int]] = {}
        for key in uncounted:
            for identity, domain in self._contributions.get(key, ()):
                counts = subtract.setdefault(identity, {})
                counts[domain] = counts.get(domain, 0) + 1
        gone = {self._hostnames[name] for name in excluded_nodes if name in self._hostnames}
        fork.inverse = {}
        for identity, group in self.inverse.items():
            owners = group.owners - uncounted
            if not owners:
                continue  # only pods being scheduled carry it: they re-create it as they are queued
            clone = group.fork(owners)
            fork.inverse[identity] = clone
            counts = subtract.get(identity, {})
            for domain, count in counts.items():
                clone.domains[domain] -= count
            # A domain now at zero stays (empty) only if this run would have registered it.
            touched = counts.keys() | gone if group.key == wk.HOSTNAME else counts.keys()
            for domain in touched:
                if clone.domains.get(domain) != 0:
                    continue
                if domain in self._sources[identity] or (group.key == wk.HOSTNAME and domain not in gone
                                                         and domain in self._hostname_set):
                    clone.empty.add(domain)
                else:
                    del clone.domains[domain]
                    clone.empty.discard(domain)
        return fork

    def _rebuilt(self, excluded_nodes: Collection[str], uncounted_pods: Collection[str]) -> Topology:
        rebuilt = Topology(
            domain_sources=self._domain_sources,
            counted_pods=[c for c in self._counted if c.pod.key not in uncounted_pods],
            node_domains=[n for n in self._nodes if n[0] not in excluded_nodes],
            namespace_labels=self._namespace_labels,
            policy=self.policy,
        )
        # Only the running pods' anti-affinity groups need the rebuild: the groups the run's pods bring are
        # counted as a fork counts them, from this snapshot's shared counts less the excluded nodes and uncounted
        # pods (the same counts as over the shorter lists, without counting each group over every pod again).
        rebuilt._nodes, rebuilt._by_namespace, rebuilt._base_counts = self._nodes, self._by_namespace, self._base_counts
        rebuilt._excluded, rebuilt._uncounted = excluded_nodes, set(uncounted_pods)
        return rebuilt

    # -- group construction --------------------------------------------------------------------

    def update(self, sp: SchedulingPod) -> None:
        """(Re)register the groups ``sp`` owns for its current (possibly relaxed) constraints."""
        key = sp.key
        self._pods[key] = sp
        for group in self._owned.pop(key, ()):
            group.owners.discard(key)
        pod = sp.pod
        if (self.policy == IGNORE and pod.anti_affinity_required) or (self.policy != IGNORE and pod.has_anti_affinity):
            self._add_inverse(pod, None)
        owned: list[TopologyGroup] = []
        for constraint in sp.spread:
            owned.append(self._intern(self._spread_group(pod, constraint)))
        for term in sp.affinity_terms:
            owned.append(self._intern(self._term_group(AFFINITY, pod, term)))
        for term in sp.anti_affinity_terms:
            owned.append(self._intern(self._term_group(ANTI_AFFINITY, pod, term)))
        for group in owned:
            group.owners.add(key)
        self._owned[key] = owned

    def owned_groups(self, key: str) -> list[TopologyGroup]:
        return self._owned.get(key, [])

    def _intern(self, group: TopologyGroup) -> TopologyGroup:
        identity = group.identity
        existing = self.groups.get(identity)
        if existing is not None:
            return existing
        self._count(group)
        self.groups[identity] = group
        self._inverse_cache.clear()
        return group

    def _new_group(self, kind: str, key: str, pod: Pod, namespaces: frozenset[str], selector, max_skew: float,
                   min_domains: int | None, node_filter: NodeFilter) -> TopologyGroup:
        group = TopologyGroup(kind, key, namespaces, selector, max_skew, min_domains, node_filter)  # type: ignore[arg-type]
        self._register_domains(group, pod, filter_taints=node_filter.taint_policy != IGNORE_POLICY)
        return group

    def _register_domains(self, group: TopologyGroup, pod: Pod, *, filter_taints: bool) -> None:
        """Domains NodePools can create; unless taints are ignored, only those of pools the pod tolerates."""
        for domain, taint_sets in self._domain_sources.get(group.key, {}).items():
            if not filter_taints or any(
                all(any(t.tolerates(taint) for t in pod.tolerations) for taint in taints) for taints in taint_sets
            ):
                group.register(domain)

    def _spread_group(self, pod: Pod, constraint: TopologySpreadConstraint) -> TopologyGroup:
        selector = constraint.selector
        for label_key in constraint.match_label_keys:
            if label_key in pod.labels:
                expression = LabelExpression(label_key, "In", frozenset({pod.labels[label_key]}))
                selector = selector.with_expression(expression)
        base = Requirements.from_labels(pod.node_selector)
        terms = tuple(base.merge(term.requirements) for term in pod.required_terms) or (base,)
        node_filter = NodeFilter(terms, constraint.node_taints_policy, constraint.node_affinity_policy,
                                 pod.tolerations)
        return self._new_group(SPREAD, constraint.topology_key, pod, frozenset({pod.namespace}), selector,
                               constraint.max_skew, constraint.min_domains, node_filter)

    def _term_group(self, kind: str, pod: Pod, term: PodAffinityTerm) -> TopologyGroup:
        return self._new_group(kind, term.topology_key, pod, self._namespaces(pod.namespace, term), term.selector,
                               float("inf"), None, NodeFilter())

    def _namespaces(self, own: str, term: PodAffinityTerm) -> frozenset[str]:
        if not term.namespaces and term.namespace_selector is None:
            return frozenset({own})
        selected = set(term.namespaces)
        if term.namespace_selector is not None:
            selected.update(
                name for name, labels in self._namespace_labels.items() if term.namespace_selector.matches(labels)
            )
        return frozenset(selected)

    def _count(self, group: TopologyGroup) -> None:
        """Register domains of existing nodes and count matching bound pods (less this run's exclusions)."""
        self._base_counts.count(group, self._nodes, self._by_namespace, self._excluded, self._uncounted)

    def _add_inverse(self, pod: Pod, node_labels: Mapping[str, str] | None, node_name: str = "") -> None:
        """Add ``pod``'s required anti-affinity terms to the inverse groups: a counted pod (``node_labels`` of its
        node) also counts in its domain; a pod being scheduled (None) only owns the group."""
        for term in pod.anti_affinity_required:
            # Replicas share their terms: find the group without building (and registering domains for) a
            # new one per running pod — every scheduling run starts by doing this for all of them.
            seen = (term, pod.namespace, pod.tolerations)
            identity = self._inverse_identity.get(seen)
            group = self.inverse.get(identity) if identity is not None else None
            if group is None:
                group = TopologyGroup(ANTI_AFFINITY, term.topology_key, self._namespaces(pod.namespace, term),
                                      term.selector, float("inf"), None, NodeFilter())  # type: ignore[arg-type]
                self._register_domains(group, pod, filter_taints=True)
                if group.identity not in self.inverse and node_labels is not None:
                    self._sources[group.identity] = frozenset(group.domains)
                    self._creators[group.identity] = (pod.key, node_name)
                    self._creator_tolerations[group.identity] = pod.tolerations
                group = self.inverse.setdefault(group.identity, group)
                self._inverse_identity[seen] = group.identity
            if node_labels is not None:
                self._inverse_of.setdefault(pod.key, []).append(group.identity)
                if term.topology_key in node_labels:
                    domain = node_labels[term.topology_key]
                    group.record((domain,))
                    self._contributions.setdefault(pod.key, []).append((group.identity, domain))
            group.owners.add(pod.key)
        self._inverse_cache.clear()

    # -- queries used while placing pods -------------------------------------------------------

    def register(self, key: str, domain: str) -> None:
        for group in self.groups.values():
            if group.key == key:
                group.register(domain)
        for group in self.inverse.values():
            if group.key == key:
                group.register(domain)

    def inverse_for(self, pod: Pod, labels_key: frozenset[tuple[str, str]]) -> list[TopologyGroup]:
        """Running (or placed) pods' required anti-affinity groups that select ``pod``."""
        cache_key = (pod.namespace, labels_key)
        found = self._inverse_cache.get(cache_key)
        if found is None:
            found = [g for g in self.inverse.values() if g.selects(pod.namespace, pod.labels, labels_key)]
            self._inverse_cache[cache_key] = found
        return found

    def add_requirements(
        self,
        sp: SchedulingPod,
        labels_key: frozenset[tuple[str, str]],
        strict: Requirements,
        node_requirements: Requirements,
    ) -> Requirements:
        """Narrow ``node_requirements`` to the domains every matching topology allows; raise ``TopologyError``."""
        groups = self._owned.get(sp.key, ())
        inverse = self.inverse_for(sp.pod, labels_key) if self.inverse else ()
        if not groups and not inverse:
            return node_requirements
        pod = sp.pod
        narrowed: list[Requirement] = []
        for group in (*groups, *inverse):
            pod_domains = strict.get(group.key) or Requirement.exists(group.key)
            node_domains = node_requirements.get(group.key) or Requirement.exists(group.key)
            self_selecting = group.selects(pod.namespace, pod.labels, labels_key)
            preferred = None
            if (self.domain_costs is not None and group.kind == AFFINITY and group.key != wk.HOSTNAME
                    and group not in self._unpreferred and group.bootstrapping(self_selecting, pod_domains)):
                preferred = self._preference(group, sp, pod_domains)
                if preferred is not None:
                    self._preferring.add(group)
            domains, _ = group.next_domains(self_selecting, pod_domains, node_domains, preferred)
            if not domains.values:
                raise TopologyError(group, pod_domains, node_domains)
            narrowed.append(domains)
        return node_requirements.add(*narrowed)

    def record(self, sp: SchedulingPod, labels_key: frozenset[tuple[str, str]], taints: Sequence[Taint],
               requirements: Requirements) -> None:
        pod = sp.pod
        for group in self.groups.values():
            if not group.counts(pod.namespace, pod.labels, labels_key, taints, requirements):
                continue
            domains = requirements.get(group.key)
            if domains is None or domains.complement:
                continue
            if group.kind == ANTI_AFFINITY or len(domains.values) == 1:
                group.record(domains.values)
        for group in self.inverse.values():
            if pod.key in group.owners:
                domains = requirements.get(group.key)
                if domains is not None and not domains.complement:
                    group.record(domains.values)

    def _preference(self, group: TopologyGroup, sp: SchedulingPod, pod_domains: Requirement) -> tuple[str, ...] | None:
        """The domains ``sp`` may start the group in, priced for the group's pods in this run (``DomainCosts``),
        or None (any)."""
        assert self.domain_costs is not None and sp.cls is not None
        allowed = tuple(d for d in sorted(group.domains) if pod_domains.has(d))
        memo_key = (group, allowed, sp.cls.key)
        if memo_key not in self._preferences:
            owners = [self._pods[key] for key in sorted(group.owners) if key in self._pods]
            priced = [(owner.cls, owner.tolerations) for owner in owners if owner.cls is not None]
            self._preferences[memo_key] = self.domain_costs.acceptable(
                (sp.cls, sp.tolerations), priced, group.key, allowed)
        return self._preferences[memo_key]

    def drop_preferences(self, sp: SchedulingPod) -> bool:
        """Stop preferring cheap domains for the groups ``sp`` owns that a preference narrowed (the pod fitted
        nowhere with it: e.g. a NodePool limit leaves only existing nodes elsewhere). True when any was dropped;
        candidates refused under the preference are tried again (the groups start a new refusal epoch)."""
        dropped = False
        for group in self._owned.get(sp.key, ()):
            if group in self._preferring and group not in self._unpreferred:
                self._unpreferred.add(group)
                group.epoch += 1
                dropped = True
        return dropped

    def zone_groups_owned(self, key: str) -> Iterable[TopologyGroup]:
        return (g for g in self._owned.get(key, ()) if g.key == wk.ZONE)
