"""Which existing nodes have room for a pod's requests, found without asking every node.

A scheduling run tries a pod on the existing nodes in order and takes the first that accepts it. On a full
cluster almost every node refuses for lack of room, so a run walked all of them for each kind of pod, and a
plan runs several such walks per pass. A ``RoomIndex`` is built once per list of ``SlotBase`` (one per version
of the nodes, shared by every run on it) and answers, per CPU request, the positions of the nodes with that much
free CPU, in list order; ``holds`` checks the other resources of one of them. Together they are the resource
check of ``_Fits.can_add``; nothing else about a node is judged here.

A new version of the nodes mostly differs from the last in a few nodes (pods moved off a draining node onto
others, a node marked or replaced): ``RoomIndex.after`` then makes the new index from the last one by those
nodes instead of sorting every node again.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Mapping, Sequence
from itertools import compress, islice, repeat
from operator import attrgetter, is_not, itemgetter, le, lt, methodcaller, neg
from typing import cast

from reconciler.model.resources import CPU
from reconciler.scheduling.existing import SlotBase

_REMAINING = attrgetter("remaining")
_CPU_OF = methodcaller("get", CPU, 0)
_NEGATED, _POSITION = itemgetter(0), itemgetter(1)
# More bases than this changed: sorting every node again costs no more than moving each one.
_MOST_MOVED = 64
# ``with_room`` answers carried to the next version of the nodes (the most recently asked requests): a few pod
# shapes recur version after version, and a carried answer is brought up to date by the changed places only.
_CARRIED_ROOMS = 16
_Requests = tuple[tuple[str, int], ...]


class RoomIndex:
    __slots__ = ("_bases", "_by_cpu", "_by_room", "_keys", "_positions", "_rooms")

    def __init__(self, bases: Sequence[SlotBase]) -> None:
        self._bases = bases
        # Built for every version of the nodes a run needs it on: C-level loops only (map, zip).
        self._rooms: list[Mapping[str, int]] = list(map(_REMAINING, bases))
        # (negated free CPU, position), ascending: most free CPU first, ties in list order.
        self._keys: list[tuple[int, int]] = sorted(
            zip(map(neg, map(_CPU_OF, self._rooms)), range(len(bases)), strict=True))
        self._by_cpu: dict[int, list[int]] = {}
        self._by_room: dict[_Requests, list[int]] = {}
        self._positions: dict[SlotBase, int] | None = None

    @classmethod
    def after(cls, previous: RoomIndex | None, bases: Sequence[SlotBase]) -> RoomIndex:
        """The index of ``bases`` (as ``RoomIndex(bases)``), made from ``previous`` (an index of another version
        of the nodes) by the bases that changed, when few did and the others kept their order."""
        if previous is None:
            return cls(bases)
        old = previous._bases
        if len(old) == len(bases):
            moved = list(compress(range(len(bases)), map(is_not, old, bases)))
            if len(moved) <= _MOST_MOVED:
                # A few places hold another base (pods moved, mostly): their keys are taken out and put back.
                rooms, keys = list(previous._rooms), list(previous._keys)
                for position in moved:
                    del keys[bisect_left(keys, (-_CPU_OF(rooms[position]), position))]
                    rooms[position] = room = bases[position].remaining
                    insort(keys, (-_CPU_OF(room), position))
                return cls._made(bases, rooms, keys, None, _rooms_moved(previous._by_room, moved, rooms))
        # Nodes came, went or changed places: each kept base's key moves to its new place (C-level loops), which
        # keeps the keys sorted when the kept bases keep their order; the others are inserted.
        places = dict(zip(bases, range(len(bases)), strict=True))
        targets = list(map(places.get, old))  # each old base's new place (None: gone, or a new base)
        kept = cast("list[int]", list(compress(targets, map(is_not, targets, repeat(None)))))
        if len(kept) < len(bases) - _MOST_MOVED or not all(map(lt, kept, islice(kept, 1, None))):
            return cls(bases)
        olds = previous._keys
        mapped = list(map(targets.__getitem__, map(_POSITION, olds)))
        remapped = cast("list[tuple[int, int]]", list(compress(zip(map(_NEGATED, olds), mapped, strict=True),
                                                              map(is_not, mapped, repeat(None)))))
        fresh = list(map(_REMAINING, bases))
        arrived = sorted(set(range(len(bases))).difference(kept))
        for position in arrived:
            insort(remapped, (-_CPU_OF(fresh[position]), position))
        return cls._made(bases, fresh, remapped, places, _rooms_shifted(previous._by_room, targets, arrived, fresh))

    @classmethod
    def _made(cls, bases: Sequence[SlotBase], rooms: list[Mapping[str, int]], keys: list[tuple[int, int]],
              positions: dict[SlotBase, int] | None, by_room: dict[_Requests, list[int]]) -> RoomIndex:
        index = cls.__new__(cls)
        index._bases, index._rooms, index._keys, index._by_cpu, index._positions = bases, rooms, keys, {}, positions
        index._by_room = by_room
        return index

    def with_cpu(self, requests: Mapping[str, int]) -> list[int]:
        """Positions (ascending) of the bases whose free CPU holds the CPU request (every base without one:
        a node's CPU is then not checked, and it may even be overcommitted)."""
        cpu = requests.get(CPU)
        found = self._by_cpu.get(-1 if cpu is None else cpu)
        if found is None:
            keys = self._keys
            cut = len(keys) if cpu is None else bisect_right(keys, (-cpu, len(keys)))
            found = self._by_cpu[-1 if cpu is None else cpu] = sorted(map(_POSITION, keys[:cut]))
        return found

    def with_room(self, requests: Mapping[str, int]) -> list[int]:
        """Positions (ascending) of the bases whose room holds every request: ``with_cpu`` less those ``holds``
        refuses. Filtered by C-level loops, one resource at a time: on a full cluster most nodes with free CPU
        lack another resource, and a run's walk asked ``holds`` of each of them in Python."""
        key = tuple(requests.items())
        found = self._by_room.pop(key, None)  # put back last: the most recently asked are carried to the next index
        if found is None:
            found = self.with_cpu(requests)
            rooms = list(map(self._rooms.__getitem__, found))
            cpu = requests.get(CPU)
            for name, value in key:
                if name == CPU and cpu is not None:
                    continue  # ``with_cpu`` kept only the bases with this much free CPU
                fits = list(map(le, repeat(value), map(methodcaller("get", name, 0), rooms)))
                found, rooms = list(compress(found, fits)), list(compress(rooms, fits))
        self._by_room[key] = found
        return found

    def holds(self, position: int, requests: Mapping[str, int]) -> bool:
        """Whether the base's room holds every request (``value <= room.get(name, 0)``)."""
        return _holds(self._rooms[position], requests.items())

    def position(self, base: SlotBase) -> int:
        if self._positions is None:
            self._positions = dict(zip(self._bases, range(len(self._bases)), strict=True))
        return self._positions[base]

    @property
    def by_free_cpu(self) -> list[SlotBase]:
        """The bases, most free CPU first (ties in list order)."""
        bases = self._bases
        return [bases[i] for _, i in self._keys]


def _holds(room: Mapping[str, int], requests: Iterable[tuple[str, int]]) -> bool:
    return all(value <= room.get(name, 0) for name, value in requests)


def _rooms_moved(answers: Mapping[_Requests, list[int]], moved: list[int], rooms: list[Mapping[str, int]]
                 ) -> dict[_Requests, list[int]]:
    """The last index's ``with_room`` answers for the new rooms at the ``moved`` places (no base came or went)."""
    carried: dict[_Requests, list[int]] = {}
    for requests in list(answers)[-_CARRIED_ROOMS:]:
        positions = list(answers[requests])
        for position in moved:
            at = bisect_left(positions, position)
            listed = at < len(positions) and positions[at] == position
            if _holds(rooms[position], requests):
                if not listed:
                    positions.insert(at, position)
            elif listed:
                del positions[at]
        carried[requests] = positions
    return carried


def _rooms_shifted(answers: Mapping[_Requests, list[int]], targets: list[int | None], arrived: list[int],
                   rooms: list[Mapping[str, int]]) -> dict[_Requests, list[int]]:
    """The last index's ``with_room`` answers after bases came, went or moved: each kept base's place moved to its
    new one (still ascending: the kept bases kept their order), the ``arrived`` places asked afresh."""
    carried: dict[_Requests, list[int]] = {}
    for requests in list(answers)[-_CARRIED_ROOMS:]:
        mapped = list(map(targets.__getitem__, answers[requests]))
        positions = cast("list[int]", list(compress(mapped, map(is_not, mapped, repeat(None)))))
        for position in arrived:
            if _holds(rooms[position], requests):
                insort(positions, position)
        carried[requests] = positions
    return carried
