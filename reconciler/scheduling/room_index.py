"""Which existing nodes have room for a pod's requests, found without asking every node.

A scheduling run tries a pod on the existing nodes in order and takes the first that accepts it. On a full
cluster almost every node refuses for lack of room, so a run walked all of them for each kind of pod, and a
plan runs several such walks per pass. A ``RoomIndex`` is built once per list of ``SlotBase`` (one per version
of the nodes, shared by every run on it) and answers, per CPU request, the positions of the nodes with that much
free CPU, in list order; ``holds`` checks the other resources of one of them. Together they are the resource
check of ``_Fits.can_add``; nothing else about a node is judged here.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from operator import attrgetter, methodcaller, neg

from reconciler.model.resources import CPU
from reconciler.scheduling.existing import SlotBase

_REMAINING = attrgetter("remaining")
_CPU_OF = methodcaller("get", CPU, 0)


class RoomIndex:
    __slots__ = ("_bases", "_by_cpu", "_negated", "_order", "_positions", "_rooms")

    def __init__(self, bases: Sequence[SlotBase]) -> None:
        self._bases = bases
        # Built for every version of the nodes a run needs it on: C-level loops only (map, zip).
        self._rooms: list[Mapping[str, int]] = list(map(_REMAINING, bases))
        negated = list(map(neg, map(_CPU_OF, self._rooms)))
        # Most free CPU first, ties in list order (a stable sort); ``_negated`` in that order, ascending.
        self._order = sorted(range(len(negated)), key=negated.__getitem__)
        self._negated = [negated[i] for i in self._order]
        self._by_cpu: dict[int, list[int]] = {}
        self._positions: dict[SlotBase, int] | None = None

    def with_cpu(self, requests: Mapping[str, int]) -> list[int]:
        """Positions (ascending) of the bases whose free CPU holds the CPU request (every base without one:
        a node's CPU is then not checked, and it may even be overcommitted)."""
        cpu = requests.get(CPU)
        found = self._by_cpu.get(-1 if cpu is None else cpu)
        if found is None:
            cut = len(self._order) if cpu is None else bisect_right(self._negated, -cpu)
            found = self._by_cpu[-1 if cpu is None else cpu] = sorted(self._order[:cut])
        return found

    def holds(self, position: int, requests: Mapping[str, int]) -> bool:
        """Whether the base's room holds every request (``value <= room.get(name, 0)``)."""
        room = self._rooms[position]
        return all(value <= room.get(name, 0) for name, value in requests.items())

    def position(self, base: SlotBase) -> int:
        if self._positions is None:
            self._positions = dict(zip(self._bases, range(len(self._bases)), strict=True))
        return self._positions[base]

    @property
    def by_free_cpu(self) -> list[SlotBase]:
        """The bases, most free CPU first (ties in list order)."""
        return [self._bases[i] for i in self._order]
