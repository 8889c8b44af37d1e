"""A cheap proof that a consolidation try cannot save money, checked before simulating it.

Single-node consolidation tries candidates one by one and every try is a full
scheduling simulation over the whole cluster; on a cluster that is already
tight, almost every try ends "not cheaper". Many of those are decidable from
resources alone:

- a pod of the candidate whose requests exceed the free room of every other
  node that could take it (not the candidate, not deleting, not inside its
  consolidateAfter window) can only go to a new NodeClaim — room only shrinks
  as the simulation places pods;
- that NodeClaim must hold all such pods plus its DaemonSet overhead, so it is
  one of the types that fit them, and whatever offering it launches costs at
  least that type's cheapest offering under its NodePool's requirements.

If even the cheapest such type is not strictly cheaper than the candidates, or
no single type holds those pods, or two of them have required hostname
anti-affinity against each other (two new nodes), the simulation could only end
in a rejection (not cheaper, more than one new node, or a pod left pending), so
it is skipped with an explanation that names the pods and the price. The same
holds for a multi-node prefix. When the bound proves nothing the candidates are
simulated as before; the bound never turns a rejection into a command.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence

from reconciler.disruption.types import Candidate
from reconciler.model import labels as wk
from reconciler.model.pod import Pod
from reconciler.model.resources import CPU, Resources
from reconciler.scheduling import SchedulingContext
from reconciler.scheduling.existing import SlotBase
from reconciler.scheduling.instancetypes import TypeInfo, order_by_price

_LISTED = 3


class SavingsBound:
    """Per decision: free room of the nodes that can take moved pods, and each pool's types by price."""

    def __init__(self, context: SchedulingContext, refusing_moved_pods: Collection[str]) -> None:
        # Most free CPU first: a pod's search stops at the first node with less CPU than it asks for.
        # Those in ``refusing_moved_pods`` are passed over as the scan meets them: most scans stop early.
        self._homes: Sequence[SlotBase] = context.free_room_order()
        self._refusing = refusing_moved_pods
        ladders = context.template_views.get("savings_bound.ladders")
        if ladders is None:
            ladders = context.template_views["savings_bound.ladders"] = _ladders(context)
        self._ladders: list[tuple[dict[str, int], list[tuple[float, TypeInfo]]]] = ladders
        self._cheapest: dict[tuple[tuple[str, int], ...], float] = {}
        # Per pod shape: the first nodes (in ``_homes`` order) with room for it, and where the scan of
        # ``_homes`` stopped (-1: scanned to its end or to a node with too little CPU, so the list is complete).
        # Keyed by the requests (equal shapes hash alike, in any order).
        self._fitting: dict[Resources, tuple[list[str], int]] = {}

    def rejection(self, candidates: Sequence[Candidate]) -> tuple[str, str] | None:
        """``(code, message)`` when removing ``candidates`` provably cannot pay off, None when only a
        simulation can tell."""
        removed = {c.name for c in candidates}
        homeless = []
        answers: dict[Resources, bool] = {}  # per pod shape: pods of one workload ask alike
        for candidate in candidates:
            for pod in candidate.reschedulable:
                requests = pod.scheduling_requests
                housed = answers.get(requests)
                if housed is None:
                    housed = answers[requests] = self._has_room(requests, removed)
                if not housed:
                    homeless.append(pod)
        if not homeless:
            return None
        price = sum(c.price for c in candidates)
        apart = _kept_apart(homeless)
        if apart is not None:
            first, second = apart
            return "MultipleReplacements", (
                f"pods {first.key} and {second.key} fit on no other node by requests and their required "
                f"anti-affinity keeps them on separate hosts: at least 2 new nodes (at most 1 allowed)"
            )
        total: dict[str, int] = {}
        for pod in homeless:
            for name, value in pod.scheduling_requests.items():
                total[name] = total.get(name, 0) + value
        floor = self._cheapest_fitting(total)
        if floor == math.inf:
            if len(homeless) == 1:
                return None  # the pod fits no instance type at all: the simulation says why
            return "MultipleReplacements", (
                f"{_pods(homeless)} fit on no other node by requests and no single instance type holds them all"
            )
        if floor < price:
            return None
        return "NotCheaper", (
            f"no replacement is cheaper than the current ${price:.4f}/h ({_pods(homeless)} "
            f"{'fits' if len(homeless) == 1 else 'fit'} on no other node by requests, and the cheapest instance "
            f"type that could hold {'it' if len(homeless) == 1 else 'them'} costs ${floor:.4f}/h)"
        )

    def _has_home(self, pod: Pod, removed: Collection[str]) -> bool:
        """Whether a node outside ``removed`` has room for the pod (``_has_room`` of its requests)."""
        return self._has_room(pod.scheduling_requests, removed)

    def _has_room(self, requests: Resources, removed: Collection[str]) -> bool:
        """Whether a node outside ``removed`` has room for ``requests``. Of the nodes with room, the first
        ``len(removed) + 1`` include one outside ``removed`` whenever any exists, so only that many are looked
        for (pods of one workload share the list, extended when a larger ``removed`` asks for more)."""
        found, resume = self._fitting.get(requests) or ([], 0)
        if resume >= 0 and len(found) <= len(removed):
            resume = self._homes_for(requests, found, resume, len(removed) + 1)
            self._fitting[requests] = (found, resume)
        return any(name not in removed for name in found)

    def _homes_for(self, requests: Mapping[str, int], found: list[str], start: int, wanted: int) -> int:
        """Append to ``found`` the nodes with room for ``requests`` from ``_homes[start:]`` until it holds
        ``wanted``; return where to resume, or -1 when no further node has room."""
        cpu = requests.get(CPU, 0)
        homes, refusing = self._homes, self._refusing
        for index in range(start, len(homes)):
            if len(found) >= wanted:
                return index
            slot = homes[index]
            room = slot.remaining
            if room.get(CPU, 0) < cpu:
                if slot.name in refusing:
                    continue  # not a home at all: its room says nothing of the nodes after it
                return -1  # most free CPU first: no later node has room either
            if slot.name not in refusing and all(value <= room.get(name, 0) for name, value in requests.items()):
                found.append(slot.name)
        return -1

    def _cheapest_fitting(self, total: Mapping[str, int]) -> float:
        key = tuple(sorted(total.items()))
        found = self._cheapest.get(key)
        if found is None:
            found = math.inf
            for overhead, ladder in self._ladders:
                needed = dict(overhead)
                for name, value in total.items():
                    needed[name] = needed.get(name, 0) + value
                for price, info in ladder:
                    if price >= found:
                        break
                    if info.fits(needed):
                        found = price
                        break
            self._cheapest[key] = found
        return found


def _ladders(context: SchedulingContext) -> list[tuple[dict[str, int], list[tuple[float, TypeInfo]]]]:
    """Per template and DaemonSet overhead group: its types by price, with their cheapest offering."""
    ladders = []
    for template in context.templates:
        for group in template.daemon_groups:
            priced = [(info.cheapest_price(template.requirements), info)
                      for info in order_by_price(group.types, template.requirements)]
            ladders.append((group.overhead, [entry for entry in priced if entry[0] < math.inf]))
    return ladders


def _pods(pods: Sequence[Pod]) -> str:
    listed = ", ".join(pod.key for pod in pods[:_LISTED])
    more = f" and {len(pods) - _LISTED} more" if len(pods) > _LISTED else ""
    return f"pod {listed}" if len(pods) == 1 else f"pods {listed}{more}"


def _kept_apart(pods: Sequence[Pod]) -> tuple[Pod, Pod] | None:
    """Two of ``pods`` that required hostname anti-affinity forbids on one node (either direction)."""
    for first in pods:
        for term in first.anti_affinity_required:
            if term.topology_key != wk.HOSTNAME or term.namespace_selector is not None:
                continue  # namespace selectors need namespace labels: leave those to the simulation
            namespaces = term.namespaces or frozenset({first.namespace})
            for second in pods:
                if second is not first and second.namespace in namespaces and term.selector.matches(second.labels):
                    return first, second
    return None
