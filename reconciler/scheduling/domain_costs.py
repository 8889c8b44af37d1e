"""What a pod costs in each domain of a topology key: how a new pod-affinity group picks its domain.

A self-selecting pod-affinity group with no matching pod anywhere is bootstrapped by its first pod, and every
later pod of the group follows it into that domain. Karpenter takes an arbitrary domain there (the first in
Go's map order, after the domain of the in-flight claim the pod is trying), so the zone of a whole group
is an accident of which claim its first pod met. On a real catalogue zones differ: Graviton types have no
offering in us-east-1e, for example, so a group pinned there pays a third more per pod.

Adze keeps Karpenter's rule that any allowed domain may be chosen, and chooses by price: the domains where
the pod is cheapest, its cost in a domain being the lowest, over the instance types a NodePool could launch
there for it, of the cheapest allowed offering's price times the largest share of the type's allocatable
the pod's requests take (the fractional cost of the pod alone on that type). Where every allowed domain
costs the same (a catalogue priced alike in every zone) there is no preference and the earlier rule stands.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reconciler.model.requirements import ALLOW_UNDEFINED_WELL_KNOWN, Requirement, Requirements
from reconciler.model.resources import CPU
from reconciler.model.taints import PREFER_NO_SCHEDULE, Toleration

if TYPE_CHECKING:
    from reconciler.scheduling.podinfo import PodClass
    from reconciler.scheduling.templates import ClaimTemplate

# Domains whose cost is within this fraction of the cheapest count as equally cheap: below it, how pods pack
# onto whole nodes matters more than the price per unit of resource (measured on the aws-us-east-1 catalogue
# with Karpenter's benchmark mix: 5 % made some runs dearer, 15 % none, and still avoids us-east-1e).
TIE = 0.15


class DomainCosts:
    """What a pod of a class costs in a domain, memoized for one set of templates."""

    def __init__(self, templates: Sequence[ClaimTemplate]) -> None:
        self._templates = tuple(templates)
        self._costs: dict[tuple[object, ...], tuple[float, float]] = {}
        self._options_memo: dict[tuple[object, ...], _Options] = {}

    def acceptable(self, first: tuple[PodClass, Sequence[Toleration]],
                   pods: Sequence[tuple[PodClass, Sequence[Toleration]]], key: str,
                   domains: Sequence[str]) -> tuple[str, ...] | None:
        """The domains of ``domains`` (in their order) a new group of ``pods`` (class and tolerations of each)
        may start in when ``first`` starts it: those where the group costs at most ``TIE`` more than where it is
        cheapest, or at most one node more (the price of the cheapest node that holds ``first`` there: joining
        a node with room saves about that much). None when every domain is acceptable or none can be priced."""
        if len(domains) < 2 or not pods:
            return None
        costs = [sum(self.cost(cls, tolerations, key, domain)[0] for cls, tolerations in pods) for domain in domains]
        lowest = min(costs)
        if lowest == math.inf or lowest <= 0:
            return None
        cheapest = domains[costs.index(lowest)]
        node = self.cost(*first, key, cheapest)[1]
        ceiling = max(lowest * (1 + TIE), lowest + (node if node < math.inf else 0.0))
        kept = tuple(d for d, c in zip(domains, costs, strict=True) if c <= ceiling)
        return kept if len(kept) < len(domains) else None

    def cost(self, cls: PodClass, tolerations: Sequence[Toleration], key: str, domain: str) -> tuple[float, float]:
        """For one such pod in ``domain``: its lowest fractional cost, and the price of the cheapest node that
        holds it (both inf: no NodePool can launch it there)."""
        # Keyed by requests, not class: pods of other classes (spread, affinity) with the same requests cost alike.
        memo_key = (tuple(sorted(cls.requests.items())), cls.requirements, tuple(tolerations), key, domain)
        found = self._costs.get(memo_key)
        if found is None:
            options = self._options(cls.requirements, tuple(tolerations), key, domain)
            found = self._costs[memo_key] = _cheapest(cls.requests, options)
        return found

    def _options(self, requirements: Requirements, tolerations: tuple[Toleration, ...], key: str,
                 domain: str) -> _Options:
        """The types NodePools could launch in ``domain`` for pods with these requirements and tolerations (pods of
        every size share them), each at its cheapest allowed offering there."""
        memo_key = (requirements, tolerations, key, domain)
        found = self._options_memo.get(memo_key)
        if found is not None:
            return found
        pin = Requirement(key, False, frozenset({domain}))
        priced: list[tuple[float, float, dict[str, int]]] = []
        for template in self._templates:
            if not all(taint.effect == PREFER_NO_SCHEDULE or any(t.tolerates(taint) for t in tolerations)
                       for taint in template.taints):
                continue
            if template.requirements.incompatibility(requirements, ALLOW_UNDEFINED_WELL_KNOWN) is not None:
                continue
            merged = template.requirements.merge(requirements).add(pin)
            if not merged[key].values:
                continue
            for info in template.types:
                if not info.compatible(merged):
                    continue
                price = info.cheapest_price(merged)
                if price < math.inf:
                    priced.append((price / info.allocatable.get(CPU, 0) if info.allocatable.get(CPU, 0) > 0
                                   else math.inf, price, info.allocatable))
        found = self._options_memo[memo_key] = _Options(
            by_cpu_price=tuple(sorted(priced, key=lambda entry: entry[0])),
            by_price=tuple(sorted(((price, alloc) for _, price, alloc in priced), key=lambda entry: entry[0])))
        return found


@dataclass(frozen=True, slots=True)
class _Options:
    by_cpu_price: tuple[tuple[float, float, dict[str, int]], ...]  # (price per CPU, price, allocatable), ascending
    by_price: tuple[tuple[float, dict[str, int]], ...]  # (price, allocatable), cheapest first


def _cheapest(requests: dict[str, int], options: _Options) -> tuple[float, float]:
    """The lowest fractional cost of a pod with ``requests`` over ``options``, and the cheapest one that holds it."""
    best = math.inf
    cpu = requests.get(CPU, 0)
    for cpu_price, price, allocatable in options.by_cpu_price:
        if cpu * cpu_price >= best:
            break  # the pod's CPU alone costs at least this much on this type and every later one
        share = _share(requests, allocatable)
        if share <= 1:
            best = min(best, price * share)
    node = next((price for price, allocatable in options.by_price if _share(requests, allocatable) <= 1), math.inf)
    return best, node


def _share(requests: dict[str, int], allocatable: dict[str, int]) -> float:
    """The largest fraction of ``allocatable`` that ``requests`` take (above 1: does not fit)."""
    share = 0.0
    for name, value in requests.items():
        if value <= 0:
            continue
        room = allocatable.get(name, 0)
        if room <= 0:
            return math.inf
        share = max(share, value / room)
    return share
