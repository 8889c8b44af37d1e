"""One topology rule (a spread constraint, a pod-affinity or an anti-affinity term) with its domain counts.

Pods with the same rule share a group (deduplicated by ``TopologyGroup.identity``);
``owners`` are the pods that carry the rule. ``domains`` counts, per domain of
the topology key, the pods the rule's selector matches; ``empty`` holds domains
known to have none.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.model import labels as wk
from reconciler.model.requirements import DOES_NOT_EXIST, IN, Requirement, Requirements
from reconciler.model.selectors import LabelSelector
from reconciler.model.taints import Taint, Toleration

SPREAD, AFFINITY, ANTI_AFFINITY = "topology spread", "pod affinity", "pod anti-affinity"
HONOR, IGNORE = "Honor", "Ignore"


@dataclass(slots=True, frozen=True)
class NodeFilter:
    """Which nodes a spread constraint counts (nodeAffinityPolicy / nodeTaintsPolicy)."""

    terms: tuple[Requirements, ...] = ()
    taint_policy: str = ""
    affinity_policy: str = ""
    tolerations: tuple[Toleration, ...] = ()

    def matches(self, taints: Sequence[Taint], requirements: Requirements) -> bool:
        if self.affinity_policy == HONOR and self.terms and not any(
            requirements.incompatibility(term) is None for term in self.terms
        ):
            return False
        if self.taint_policy == HONOR:
            for taint in taints:
                if not any(t.tolerates(taint) for t in self.tolerations):
                    return False
        return True


def _domain_requirement(key: str, domains: list[str] | set[str]) -> Requirement:
    return Requirement(key, False, frozenset(domains))


@dataclass(slots=True, eq=False)
class TopologyGroup:
    kind: str
    key: str
    namespaces: frozenset[str]
    selector: LabelSelector
    max_skew: int = math.inf  # type: ignore[assignment]
    min_domains: int | None = None
    node_filter: NodeFilter = field(default_factory=NodeFilter)
    owners: set[str] = field(default_factory=set)
    domains: dict[str, int] = field(default_factory=dict)
    empty: set[str] = field(default_factory=set)
    # Bumped whenever a candidate this group refused might now be accepted; ``refused`` memoizes refusals
    # per (pod-side key) for the current epoch so identical pods skip those candidates.
    epoch: int = 0
    refused: dict[tuple[Any, ...], tuple[int, set[object]]] = field(default_factory=dict)
    _selects_cache: dict[tuple[str, frozenset[tuple[str, str]]], bool] = field(default_factory=dict)
    # ``describe``'s text for the counts it was rendered from: every change to ``domains`` after the group is
    # built goes through ``register`` (bumps ``epoch``), ``BaseCounts.count`` (bumps ``epoch``) or ``record``
    # (bumps ``recorded``), so (epoch, recorded, number of domains) names the counts it shows.
    recorded: int = 0
    _described: tuple[tuple[int, int, int], str] | None = None
    # The first 25 domain names in order, for (epoch, number of domains): only ``record`` adds names without
    # a new epoch, and never removes one.
    _first_names: tuple[tuple[int, int], list[str]] | None = None

    @property
    def identity(self) -> tuple[Any, ...]:
        return (self.kind, self.key, self.namespaces, self.max_skew, self.min_domains, self.node_filter, self.selector)

    def fork(self, owners: set[str]) -> TopologyGroup:
        """A copy for another run: same rule and counts, fresh refusal memo (the selector cache is shared)."""
        return TopologyGroup(
            self.kind, self.key, self.namespaces, self.selector, self.max_skew, self.min_domains, self.node_filter,
            owners=owners, domains=dict(self.domains), empty=set(self.empty),
            _selects_cache=self._selects_cache,
        )

    def selects(self, namespace: str, labels: Mapping[str, str], labels_key: frozenset[tuple[str, str]]) -> bool:
        cache_key = (namespace, labels_key)
        found = self._selects_cache.get(cache_key)
        if found is None:
            found = namespace in self.namespaces and self.selector.matches(labels)
            self._selects_cache[cache_key] = found
        return found

    def counts(
        self, namespace: str, labels: Mapping[str, str], labels_key: frozenset[tuple[str, str]],
        taints: Sequence[Taint], requirements: Requirements,
    ) -> bool:
        return self.selects(namespace, labels, labels_key) and self.node_filter.matches(taints, requirements)

    def refuses(self, key: tuple[Any, ...], candidate: object) -> bool:
        entry = self.refused.get(key)
        return entry is not None and entry[0] == self.epoch and candidate in entry[1]

    def remember_refusal(self, key: tuple[Any, ...], candidate: object) -> None:
        entry = self.refused.get(key)
        if entry is None or entry[0] != self.epoch:
            entry = (self.epoch, set())
            self.refused[key] = entry
        entry[1].add(candidate)

    def register(self, domain: str) -> None:
        if domain not in self.domains:
            self.domains[domain] = 0
            self.empty.add(domain)
            self.epoch += 1

    def record(self, domains: Sequence[str] | set[str] | frozenset[str]) -> None:
        self.recorded += 1
        for domain in domains:
            count = self.domains.get(domain, 0)
            self.domains[domain] = count + 1
            self.empty.discard(domain)
            # Only changes that can turn a refusal into an acceptance start a new epoch: any count for spread
            # (the minimum may rise), a first pod in a domain for affinity; anti-affinity never relaxes.
            if self.kind == SPREAD or (self.kind == AFFINITY and count == 0):
                self.epoch += 1

    # -- choosing domains ----------------------------------------------------------------------

    def next_domains(self, self_selecting: bool, pod_domains: Requirement, node_domains: Requirement,
                     preferred: Sequence[str] | None = None) -> tuple[Requirement, set[str]]:
        """``preferred``: for an affinity group being bootstrapped, the domains its first pod may choose from
        (the cheapest ones, ``DomainCosts``); None: any the pod and the node allow."""
        if self.kind == SPREAD:
            return self._next_spread(self_selecting, pod_domains, node_domains)
        if self.kind == AFFINITY:
            chosen = self._next_affinity(self_selecting, pod_domains, node_domains, preferred)
        else:
            chosen = self._next_anti_affinity(pod_domains, node_domains)
        return _domain_requirement(self.key, chosen), set(chosen)

    def _next_spread(self, self_selecting: bool, pod_domains: Requirement,
                     node_domains: Requirement) -> tuple[Requirement, set[str]]:
        extra = 1 if self_selecting else 0
        if self.key == wk.HOSTNAME and not node_domains.complement and len(node_domains.values) == 1:
            hostname = next(iter(node_domains.values))
            if self.domains.get(hostname, 0) + extra <= self.max_skew:
                return _domain_requirement(self.key, [hostname]), {hostname}
            return Requirement(self.key, False, frozenset()), set()
        minimum = self.domain_min_count(pod_domains)
        valid: set[str] = set()
        best, best_count = "", math.inf
        if not node_domains.complement and node_domains.values:
            candidates = sorted(d for d in node_domains.values if d in self.domains)
        else:
            candidates = sorted(d for d in self.domains if node_domains.has(d))
        for domain in candidates:
            count = self.domains[domain] + extra
            if count - minimum <= self.max_skew:
                valid.add(domain)
                if count < best_count:
                    best, best_count = domain, count
        if not best:
            return Requirement(self.key, False, frozenset()), valid
        return _domain_requirement(self.key, [best]), valid

    def domain_min_count(self, pod_domains: Requirement) -> int:
        """Global minimum over the domains the pod may use; 0 below ``minDomains`` and for hostname."""
        if self.key == wk.HOSTNAME:
            return 0
        minimum, supported = math.inf, 0
        for domain, count in self.domains.items():
            if pod_domains.has(domain):
                supported += 1
                if count < minimum:
                    minimum = count
        if self.min_domains is not None and supported < self.min_domains:
            return 0
        return 0 if minimum == math.inf else int(minimum)

    def bootstrapping(self, self_selecting: bool, pod_domains: Requirement) -> bool:
        """Would a pod with these domains choose the group's domain (no matching pod it could join yet)?"""
        return self_selecting and (len(self.domains) == len(self.empty) or not self._any_compatible(pod_domains))

    def _next_affinity(self, self_selecting: bool, pod_domains: Requirement,
                       node_domains: Requirement, preferred: Sequence[str] | None = None) -> list[str]:
        domains = self.domains
        if self.key == wk.HOSTNAME and not node_domains.complement and len(node_domains.values) == 1:
            hostname = next(iter(node_domains.values))
            if not pod_domains.has(hostname):
                return []
            if domains.get(hostname, 0) > 0:
                return [hostname]
            if self_selecting and (len(domains) == len(self.empty) or not self._any_compatible(pod_domains)):
                return [hostname]
            return []
        if not node_domains.complement and node_domains.values:
            options = [d for d in sorted(node_domains.values) if pod_domains.has(d) and domains.get(d, 0) > 0]
        else:
            options = [d for d in sorted(domains) if domains[d] > 0 and pod_domains.has(d) and node_domains.has(d)]
        if options:
            return options
        if self.bootstrapping(self_selecting, pod_domains):
            # Bootstrap: nobody matches yet, so the first pod may pick a domain (preferably one the node allows).
            if preferred is not None:
                # Only a cheapest domain: a node outside them is refused, and the pod goes where one can be.
                return next(([d] for d in preferred if node_domains.has(d)), [])
            ordered = sorted(domains)
            both = next((d for d in ordered if pod_domains.has(d) and node_domains.has(d)), None)
            if both is not None:
                return [both]
            any_pod = next((d for d in ordered if pod_domains.has(d)), None)
            return [any_pod] if any_pod is not None else []
        return []

    def _any_compatible(self, pod_domains: Requirement) -> bool:
        return any(count > 0 and pod_domains.has(d) for d, count in self.domains.items())

    def _next_anti_affinity(self, pod_domains: Requirement, node_domains: Requirement) -> list[str]:
        if self.key == wk.HOSTNAME and not node_domains.complement and len(node_domains.values) == 1:
            hostname = next(iter(node_domains.values))
            return [hostname] if self.domains.get(hostname, 0) == 0 else []
        if not node_domains.complement and node_domains.values and len(node_domains.values) < len(self.empty):
            return sorted(d for d in node_domains.values if d in self.empty and pod_domains.has(d))
        return sorted(d for d in self.empty if node_domains.has(d) and pod_domains.has(d))

    def describe(self) -> str:
        """The rule and its counts (the first 25 domains), as refusals name it; kept until the counts change:
        a simulation's refusals by one group between two placements all show the same counts."""
        stamp = (self.epoch, self.recorded, len(self.domains))
        kept = self._described
        if kept is not None and kept[0] == stamp:
            return kept[1]
        text = self.render()
        self._described = (stamp, text)
        return text

    def render(self) -> str:
        """``describe`` without its kept text (the first names are kept by their own stamp)."""
        domains = self.domains
        names_stamp = (self.epoch, len(domains))
        first = self._first_names
        if first is None or first[0] != names_stamp:
            first = self._first_names = (names_stamp, sorted(domains)[:25])
        counts = ", ".join(f"{d}: {domains[d]}" for d in first[1])
        more = f" and {len(domains) - 25} more" if len(domains) > 25 else ""
        rule = f"{self.kind} on {self.key}"
        if self.kind == SPREAD:
            min_domains = f", minDomains {self.min_domains}" if self.min_domains else ""
            rule += f" (maxSkew {self.max_skew}{min_domains})"
        return f"{rule} for pods matching {self.selector}: counts {{{counts}{more}}}"


__all__ = ["AFFINITY", "ANTI_AFFINITY", "DOES_NOT_EXIST", "IN", "SPREAD", "NodeFilter", "TopologyGroup"]
