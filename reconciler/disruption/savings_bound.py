"""A cheap proof that a single-node consolidation cannot save money, checked before simulating it.

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

If even the cheapest such type is not strictly cheaper than the candidate, the
simulation could only end in a rejection (not cheaper, more than one new node,
or a pod left pending), so it is skipped with a "not cheaper" explanation that
names the pods and the price. When the bound proves nothing the candidate is
simulated as before; the bound never turns a rejection into a command.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping

from reconciler.disruption.types import Candidate
from reconciler.model.pod import Pod
from reconciler.model.resources import CPU
from reconciler.scheduling import SchedulingContext
from reconciler.scheduling.existing import slot_room
from reconciler.scheduling.instancetypes import TypeInfo

_LISTED = 3


class SavingsBound:
    """Per decision: free room of the nodes that can take moved pods, and each pool's types by price."""

    def __init__(self, context: SchedulingContext, refusing_moved_pods: Collection[str]) -> None:
        homes = []
        for node in context.state.state_nodes():
            if node.marked_for_deletion or node.name in refusing_moved_pods:
                continue
            homes.append((node.name, slot_room(node, context.daemon_pods)))
        # Most free CPU first: a pod's search stops at the first node with less CPU than it asks for.
        homes.sort(key=lambda home: -home[1].get(CPU, 0))
        self._homes: list[tuple[str, Mapping[str, int]]] = homes
        self._ladders: list[tuple[dict[str, int], list[tuple[float, TypeInfo]]]] = []
        for template in context.templates:
            for group in template.daemon_groups:
                ladder = sorted(
                    ((info.cheapest_price(template.requirements), info) for info in group.types),
                    key=lambda entry: (entry[0], entry[1].name),
                )
                self._ladders.append((group.overhead, [entry for entry in ladder if entry[0] < math.inf]))
        self._cheapest: dict[tuple[tuple[str, int], ...], float] = {}

    def rejection(self, candidate: Candidate) -> str | None:
        """Why replacing ``candidate`` cannot be cheaper, or None when only a simulation can tell."""
        homeless = [pod for pod in candidate.reschedulable if not self._has_home(pod, candidate.name)]
        if not homeless:
            return None
        total: dict[str, int] = {}
        for pod in homeless:
            for name, value in pod.scheduling_requests.items():
                total[name] = total.get(name, 0) + value
        floor = self._cheapest_fitting(total)
        if floor == math.inf or floor < candidate.price:
            return None  # nothing fits them all (the simulation says why), or a cheaper node might
        listed = ", ".join(pod.key for pod in homeless[:_LISTED])
        more = f" and {len(homeless) - _LISTED} more" if len(homeless) > _LISTED else ""
        subject = f"pod {listed} fits" if len(homeless) == 1 else f"pods {listed}{more} fit"
        return (
            f"no replacement is cheaper than the current ${candidate.price:.4f}/h ({subject} on no other node "
            f"by requests, and the cheapest instance type that could hold {'it' if len(homeless) == 1 else 'them'} "
            f"costs ${floor:.4f}/h)"
        )

    def _has_home(self, pod: Pod, candidate: str) -> bool:
        requests = pod.scheduling_requests
        cpu = requests.get(CPU, 0)
        for name, room in self._homes:
            if room.get(CPU, 0) < cpu:
                return False
            if name != candidate and all(value <= room.get(resource, 0) for resource, value in requests.items()):
                return True
        return False

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
