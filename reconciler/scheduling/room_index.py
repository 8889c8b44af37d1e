"""Which existing nodes have room for a pod's requests, found without asking every node.

A scheduling run tries a pod on the existing nodes in order and takes the first that accepts it. On a full
cluster almost every node refuses for lack of room, so a run walked all of them for each kind of pod, and a
plan runs several such walks per pass. A ``RoomIndex`` is built once per list of ``SlotBase`` (one per version
of the nodes, shared by every run on it) and answers, per requests vector, the positions of the nodes whose
free room holds those requests: the nodes the resource check of ``_Fits.can_add`` lets through. Nothing else
about a node is judged here.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence

from reconciler.model.resources import CPU
from reconciler.scheduling.existing import SlotBase


class RoomIndex:
    __slots__ = ("_cpus", "_fitting", "_order", "_rooms", "by_free_cpu", "positions")

    def __init__(self, bases: Sequence[SlotBase]) -> None:
        self._rooms: list[Mapping[str, int]] = [base.remaining for base in bases]
        rooms = self._rooms
        # Most free CPU first; ``_cpus`` ascending (negated) for bisect.
        self._order = sorted(range(len(rooms)), key=lambda i: -rooms[i].get(CPU, 0))
        self._cpus = [-rooms[i].get(CPU, 0) for i in self._order]
        self.by_free_cpu: list[SlotBase] = [bases[i] for i in self._order]  # ties in list order
        self._fitting: dict[tuple[tuple[str, int], ...], list[int]] = {}
        self.positions: dict[SlotBase, int] = {base: i for i, base in enumerate(bases)}

    def fitting(self, requests: Mapping[str, int]) -> list[int]:
        """Positions (ascending) of the bases whose room holds every request (``value <= room.get(name, 0)``)."""
        key = tuple(requests.items())
        found = self._fitting.get(key)
        if found is None:
            rooms = self._rooms
            # Without a CPU request a node's CPU is not checked (it may even be overcommitted).
            cut = bisect_right(self._cpus, -requests[CPU]) if CPU in requests else len(self._order)
            found = sorted(i for i in self._order[:cut]
                           if all(value <= rooms[i].get(name, 0) for name, value in requests.items()))
            self._fitting[key] = found
        return found

    def holds(self, position: int, requests: Mapping[str, int]) -> bool:
        room = self._rooms[position]
        return all(value <= room.get(name, 0) for name, value in requests.items())
