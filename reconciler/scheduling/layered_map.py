"""A map that each new version of the nodes derives from the last without copying every entry.

The base topology keeps per running pod what its anti-affinity groups are and where it counts
(``Topology._inverse_of``, ``_contributions``): one entry per anti-affinity pod, i.e. per node on a cluster
whose main workload spreads by hostname. Every version of the nodes (each drain step, each disruption pass)
derived the next topology by copying both dicts, O(pods) per version, to change the entries of a few pods. A
``LayeredMap`` version is a shared, never-edited ``base`` dict plus its own ``top`` of the entries written since
(a removed key is written as a tombstone); ``derive`` copies only ``top``, and folds it into a new base once it
has grown past about the square root of the base's size, so the copies per version stay small and a read looks
in two dicts at most. An earlier version is left exactly as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from math import isqrt
from typing import Generic, TypeVar, cast

K = TypeVar("K")
V = TypeVar("V")
D = TypeVar("D")

_GONE = object()  # a tombstone in ``top``: the base's entry was removed
_MISSING = object()


class LayeredMap(Generic[K, V]):
    """The dict operations ``Topology`` uses (``get``, ``[]``, ``pop``, ``setdefault``, ``in``)."""

    __slots__ = ("_base", "_top")

    def __init__(self, base: dict[K, V] | None = None) -> None:
        self._base: dict[K, V] = {} if base is None else base  # never edited once a version holds it
        self._top: dict[K, object] = {}

    def derive(self) -> LayeredMap[K, V]:
        """The next version: equal to this one, which later writes to either leave alone."""
        derived: LayeredMap[K, V] = LayeredMap.__new__(LayeredMap)
        top = self._top
        if len(top) > max(64, isqrt(32 * len(self._base))):
            derived._base, derived._top = self.as_dict(), {}
        else:
            derived._base, derived._top = self._base, dict(top)
        return derived

    def as_dict(self) -> dict[K, V]:
        merged: dict[K, object] = {**self._base, **self._top}
        for key in [key for key, value in self._top.items() if value is _GONE]:
            del merged[key]
        return cast("dict[K, V]", merged)

    def get(self, key: K, default: D) -> V | D:
        value = self._top.get(key, _MISSING)
        if value is _MISSING:
            return self._base.get(key, default)
        return default if value is _GONE else cast("V", value)

    def __getitem__(self, key: K) -> V:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return cast("V", value)

    def __setitem__(self, key: K, value: V) -> None:
        self._top[key] = value

    def __contains__(self, key: object) -> bool:
        return self.get(cast("K", key), _MISSING) is not _MISSING

    def pop(self, key: K, default: D) -> V | D:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            return default
        if key in self._base:
            self._top[key] = _GONE
        else:
            del self._top[key]
        return cast("V", value)

    def setdefault(self, key: K, default: V) -> V:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            self._top[key] = default
            return default
        return cast("V", value)

    def __iter__(self) -> Iterator[K]:
        return iter(self.as_dict())

    def __len__(self) -> int:
        return len(self.as_dict())


def derived(found: dict[K, V] | LayeredMap[K, V]) -> LayeredMap[K, V]:
    """The next version of ``found`` (a dict is taken as the base: its owner must never edit it again)."""
    return found.derive() if isinstance(found, LayeredMap) else LayeredMap(found)
