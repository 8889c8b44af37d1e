"""Node requirements algebra: the set semantics behind nodeSelector, node affinity and NodePool requirements.

A ``Requirement`` is the set of label values a node may carry for one key:
``In``/``DoesNotExist`` are finite sets, ``NotIn``/``Exists`` are complements of
finite sets, and ``Gt``/``Lt``/``Gte``/``Lte`` add inclusive integer bounds to a
complement (``Gt N`` is stored as ``Gte N+1``). ``Requirements`` maps keys to
requirements and intersects key by key. Both are immutable, so they can be
shared freely between pods, NodeClaims and instance types without copying.

Karpenter's undefined-key rule lives in ``Requirements.compatible``: a key the
other side does not define passes when it is well known (its values come from
instance types) or when the incoming operator is ``NotIn``/``DoesNotExist``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.model import labels as wk

IN, NOT_IN, EXISTS, DOES_NOT_EXIST = "In", "NotIn", "Exists", "DoesNotExist"
GT, LT, GTE, LTE = "Gt", "Lt", "Gte", "Lte"
OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT, GTE, LTE)
_BOUND_OPERATORS = (GT, LT, GTE, LTE)

# Labels Karpenter reserves for itself; pods may not select on them and NodePools may not set them.
RESTRICTED_LABELS = frozenset({wk.HOSTNAME, wk.NODEPOOL})


class RequirementError(ValueError):
    """An invalid requirement; the message names the offending field."""


def _as_int(value: str) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


_ALL_STRINGS = frozenset({str})
_FROM_MANIFEST: dict[tuple[Any, ...], Requirement] = {}
_FROM_MANIFEST_LIMIT = 4096


@dataclass(slots=True, frozen=True)
class Requirement:
    """The allowed values of one label key."""

    key: str
    complement: bool
    values: frozenset[str]
    gte: int | None = None
    lte: int | None = None
    min_values: int | None = None

    @classmethod
    def new(
        cls,
        key: str,
        operator: str,
        values: Iterable[Any] = (),
        min_values: int | None = None,
        *,
        path: str = "requirement",
    ) -> Requirement:
        """Build from a NodeSelectorRequirement; raises ``RequirementError`` naming ``path`` when invalid."""
        key = wk.NORMALIZED_LABELS.get(key, key)
        texts = tuple(str(v) for v in values or ())
        if operator == IN:
            if not texts:
                raise RequirementError(f"{path}.values: operator In needs at least one value")
            return cls(key, False, frozenset(texts), min_values=min_values)
        if operator == NOT_IN:
            return cls(key, True, frozenset(texts), min_values=min_values)
        if operator == EXISTS:
            return cls(key, True, frozenset(), min_values=min_values)
        if operator == DOES_NOT_EXIST:
            return cls(key, False, frozenset(), min_values=min_values)
        if operator in _BOUND_OPERATORS:
            if len(texts) != 1 or _as_int(texts[0]) is None:
                raise RequirementError(f"{path}.values: operator {operator} needs exactly one integer value")
            bound = int(texts[0])
            if operator == GT:
                return cls(key, True, frozenset(), gte=bound + 1, min_values=min_values)
            if operator == GTE:
                return cls(key, True, frozenset(), gte=bound, min_values=min_values)
            if operator == LT:
                return cls(key, True, frozenset(), lte=bound - 1, min_values=min_values)
            return cls(key, True, frozenset(), lte=bound, min_values=min_values)
        raise RequirementError(f"{path}.operator: {operator!r} is not one of {', '.join(OPERATORS)}")

    @classmethod
    def from_manifest(cls, raw: Mapping[str, Any], *, path: str = "requirement") -> Requirement:
        if not isinstance(raw, Mapping):
            raise RequirementError(f"{path}: expected a map with key, operator and values")
        key = raw.get("key")
        if not key or not isinstance(key, str):
            raise RequirementError(f"{path}.key: required")
        operator = raw.get("operator")
        if not isinstance(operator, str):
            raise RequirementError(f"{path}.operator: required")
        values = raw.get("values") or ()
        if not isinstance(values, list | tuple):
            raise RequirementError(f"{path}.values: expected a list")
        min_values = raw.get("minValues")
        if min_values is not None and (not isinstance(min_values, int) or isinstance(min_values, bool)):
            raise RequirementError(f"{path}.minValues: expected an integer")
        if type(values) is not list or not _ALL_STRINGS.issuperset(map(type, values)) or type(min_values) is bool:
            return cls.new(key, operator, values, min_values, path=path)
        # NodeClaims repeat their NodePool's requirement lists (one lists ~450 instance types): one instance
        # per distinct list of strings (requirements are immutable); a bad one raises every time.
        memo_key = (key, operator, tuple(values), min_values)
        known = _FROM_MANIFEST.get(memo_key)
        if known is None:
            known = cls.new(key, operator, values, min_values, path=path)
            if len(_FROM_MANIFEST) >= _FROM_MANIFEST_LIMIT:
                _FROM_MANIFEST.clear()
            _FROM_MANIFEST[memo_key] = known
        return known

    @classmethod
    def exists(cls, key: str) -> Requirement:
        return cls(key, True, frozenset())

    @classmethod
    def single(cls, key: str, value: str) -> Requirement:
        return cls(key, False, frozenset((value,)))

    # -- set queries ---------------------------------------------------------------------------

    @property
    def operator(self) -> str:
        """``In``/``NotIn``/``Exists``/``DoesNotExist`` (bounded complements read as ``Exists``/``NotIn``)."""
        if self.complement:
            return NOT_IN if self.values else EXISTS
        return IN if self.values else DOES_NOT_EXIST

    @property
    def size(self) -> float:
        """Number of allowed values (``math.inf`` for complements)."""
        return math.inf if self.complement else len(self.values)

    def has(self, value: str) -> bool:
        if self.complement:
            return value not in self.values and self._within_bounds(value)
        return value in self.values and self._within_bounds(value)

    def _within_bounds(self, value: str) -> bool:
        if self.gte is None and self.lte is None:
            return True
        number = _as_int(value)
        if number is None:
            return False
        return not ((self.gte is not None and number < self.gte) or (self.lte is not None and number > self.lte))

    def sorted_values(self) -> list[str]:
        return sorted(self.values)

    def intersection(self, other: Requirement) -> Requirement:
        gte = _max_opt(self.gte, other.gte)
        lte = _min_opt(self.lte, other.lte)
        min_values = _max_opt(self.min_values, other.min_values)
        if gte is not None and lte is not None and gte > lte:
            return Requirement(self.key, False, frozenset(), min_values=min_values)
        complement = self.complement and other.complement
        if complement:
            values = self.values | other.values
        elif self.complement:
            values = other.values - self.values
        elif other.complement:
            values = self.values - other.values
        else:
            values = self.values & other.values
        if gte is not None or lte is not None:
            values = frozenset(v for v in values if _bounded(v, gte, lte))
        if not complement:
            gte = lte = None
        return Requirement(self.key, complement, values, gte, lte, min_values)

    def has_intersection(self, other: Requirement) -> bool:
        """True when some value satisfies both (cheaper than building the intersection)."""
        gte = _max_opt(self.gte, other.gte)
        lte = _min_opt(self.lte, other.lte)
        if gte is not None and lte is not None and gte > lte:
            return False
        if self.complement and other.complement:
            return True
        if self.complement:
            return any(v not in self.values and _bounded(v, gte, lte) for v in other.values)
        if other.complement:
            return any(v not in other.values and _bounded(v, gte, lte) for v in self.values)
        smaller, larger = (self.values, other.values) if len(self.values) <= len(other.values) else (
            other.values,
            self.values,
        )
        return any(v in larger and _bounded(v, gte, lte) for v in smaller)

    def any_value(self) -> str | None:
        """A deterministic representative value (used to label nodes), or None for ``DoesNotExist``."""
        if not self.complement:
            return min(self.values) if self.values else None
        low = self.gte if self.gte is not None else 0
        high = self.lte if self.lte is not None else low + len(self.values) + 1
        for number in range(low, high + 1):
            if str(number) not in self.values:
                return str(number)
        return None

    def with_min_values(self, min_values: int | None) -> Requirement:
        return Requirement(self.key, self.complement, self.values, self.gte, self.lte, min_values)

    # -- output --------------------------------------------------------------------------------

    def to_manifest(self) -> list[dict[str, Any]]:
        """NodeSelectorRequirement(s); a two-sided bound needs two entries."""
        extra: dict[str, Any] = {} if self.min_values is None else {"minValues": self.min_values}
        if self.gte is not None and self.lte is not None:
            return [
                {"key": self.key, "operator": GTE, "values": [str(self.gte)], **extra},
                {"key": self.key, "operator": LTE, "values": [str(self.lte)], **extra},
            ]
        if self.gte is not None:
            return [{"key": self.key, "operator": GTE, "values": [str(self.gte)], **extra}]
        if self.lte is not None:
            return [{"key": self.key, "operator": LTE, "values": [str(self.lte)], **extra}]
        operator = self.operator
        if operator in (EXISTS, DOES_NOT_EXIST):
            return [{"key": self.key, "operator": operator, **extra}]
        return [{"key": self.key, "operator": operator, "values": self.sorted_values(), **extra}]

    def __str__(self) -> str:
        operator = self.operator
        if operator in (EXISTS, DOES_NOT_EXIST):
            text = f"{self.key} {operator}"
        else:
            values = self.sorted_values()
            if len(values) > 5:
                values = [*values[:5], f"and {len(values) - 5} others"]
            text = f"{self.key} {operator} [{', '.join(values)}]"
        if self.gte is not None:
            text += f" >={self.gte}"
        if self.lte is not None:
            text += f" <={self.lte}"
        if self.min_values is not None:
            text += f" minValues {self.min_values}"
        return text


def _bounded(value: str, gte: int | None, lte: int | None) -> bool:
    if gte is None and lte is None:
        return True
    number = _as_int(value)
    if number is None:
        return False
    return not ((gte is not None and number < gte) or (lte is not None and number > lte))


def _max_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if a > b else b


def _min_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if a < b else b


_NEGATIVE_OPERATORS = (NOT_IN, DOES_NOT_EXIST)


class Requirements(Mapping[str, Requirement]):
    """Immutable key -> ``Requirement`` map; adding intersects with what is already there."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Requirement] | None = None) -> None:
        self._items: dict[str, Requirement] = dict(items) if items else {}

    # -- construction --------------------------------------------------------------------------

    @classmethod
    def of(cls, *requirements: Requirement) -> Requirements:
        items: dict[str, Requirement] = {}
        _merge_into(items, requirements)
        return cls._wrap(items)

    @classmethod
    def _wrap(cls, items: dict[str, Requirement]) -> Requirements:
        result = cls.__new__(cls)
        result._items = items
        return result

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> Requirements:
        # Requirements are immutable: one instance per distinct label set is shared. Nodes, claims and
        # instance types are turned into requirements on every scheduling and disruption pass.
        return _requirements_from_labels(tuple((key, str(value)) for key, value in labels.items()))

    @classmethod
    def from_manifest(cls, raw: Iterable[Mapping[str, Any]] | None, *, path: str = "requirements") -> Requirements:
        """From a list of NodeSelectorRequirements (with optional ``minValues``)."""
        if raw is None:
            return EMPTY_REQUIREMENTS
        if not isinstance(raw, list | tuple):
            raise RequirementError(f"{path}: expected a list")
        return cls.of(*(Requirement.from_manifest(item, path=f"{path}[{i}]") for i, item in enumerate(raw)))

    def add(self, *requirements: Requirement) -> Requirements:
        """A new ``Requirements`` with ``requirements`` intersected in."""
        items = dict(self._items)
        _merge_into(items, requirements)
        return Requirements._wrap(items)

    def merge(self, other: Requirements) -> Requirements:
        if not other._items:
            return self
        if not self._items:
            return other
        items = dict(self._items)
        _merge_into(items, other._items.values())
        return Requirements._wrap(items)

    def replacing(self, *requirements: Requirement) -> Requirements:
        """A new ``Requirements`` where these requirements replace (not intersect) their keys."""
        items = dict(self._items)
        for requirement in requirements:
            items[requirement.key] = requirement
        return Requirements._wrap(items)

    def without(self, *keys: str) -> Requirements:
        if not any(key in self._items for key in keys):
            return self
        return Requirements._wrap({k: v for k, v in self._items.items() if k not in keys})

    # -- mapping -------------------------------------------------------------------------------

    def __getitem__(self, key: str) -> Requirement:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Requirements):
            return self._items == other._items
        return NotImplemented

    def __hash__(self) -> int:
        return hash(frozenset(self._items.items()))

    def get_or_exists(self, key: str) -> Requirement:
        """The requirement for ``key``; an undefined key allows any value (``Exists``)."""
        found = self._items.get(key)
        return found if found is not None else Requirement.exists(key)

    # -- algebra -------------------------------------------------------------------------------

    def incompatibility(self, incoming: Requirements, allow_undefined: frozenset[str] = frozenset()) -> str | None:
        """None when ``incoming`` can be met on top of these requirements, else the first reason.

        Keys of ``incoming`` that this side does not define fail unless listed in
        ``allow_undefined`` or negative (``NotIn``/``DoesNotExist``).
        """
        mine = self._items
        for key, requirement in incoming._items.items():
            if key in mine or key in allow_undefined:
                continue
            if requirement.operator in _NEGATIVE_OPERATORS:
                continue
            return f'label "{key}" does not have known values{_typo_hint(key, mine, allow_undefined)}'
        return self.intersects(incoming)

    def intersects(self, incoming: Requirements) -> str | None:
        """None when every key both sides define has a common value (undefined keys pass)."""
        mine, theirs = self._items, incoming._items
        pairs: Iterator[tuple[Requirement | None, Requirement | None]]
        if len(mine) > len(theirs):
            pairs = ((mine.get(key), req) for key, req in theirs.items())
        else:
            pairs = ((req, theirs.get(key)) for key, req in mine.items())
        for existing, other in pairs:
            if existing is None or other is None:
                continue
            if existing.has_intersection(other):
                continue
            if other.operator in _NEGATIVE_OPERATORS and existing.operator in _NEGATIVE_OPERATORS:
                continue
            return f"{other} not in {existing}"
        return None

    def is_compatible(self, incoming: Requirements, allow_undefined: frozenset[str] = frozenset()) -> bool:
        return self.incompatibility(incoming, allow_undefined) is None

    def single_values(self) -> dict[str, str]:
        """Keys constrained to exactly one value (these become node labels)."""
        return {
            key: next(iter(req.values))
            for key, req in self._items.items()
            if not req.complement and len(req.values) == 1
        }

    def has_min_values(self) -> bool:
        return any(req.min_values is not None for req in self._items.values())

    def to_manifest(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = []
        for key in sorted(self._items):
            result.extend(self._items[key].to_manifest())
        return result

    def __str__(self) -> str:
        return ", ".join(
            str(self._items[key]) for key in sorted(self._items) if key not in RESTRICTED_LABELS
        )

    def __repr__(self) -> str:
        return f"Requirements({self})"


def _merge_into(items: dict[str, Requirement], requirements: Iterable[Requirement]) -> None:
    for requirement in requirements:
        existing = items.get(requirement.key)
        items[requirement.key] = requirement if existing is None else requirement.intersection(existing)


def _suffix(key: str) -> str:
    return key.partition("/")[2] or key


def _typo_hint(key: str, defined: Mapping[str, Requirement], allow_undefined: frozenset[str]) -> str:
    for candidate in (*sorted(allow_undefined), *sorted(defined)):
        if key in candidate or candidate.endswith(_suffix(key)):
            return f' (typo of "{candidate}"?)'
    return ""


EMPTY_REQUIREMENTS = Requirements()

# Undefined well-known keys are allowed when matching a pod against a NodePool: instance types resolve them.
ALLOW_UNDEFINED_WELL_KNOWN = frozenset(wk.WELL_KNOWN_LABELS)


@functools.lru_cache(maxsize=8192)
def _requirements_from_labels(items: tuple[tuple[str, str], ...]) -> Requirements:
    return Requirements.of(*(Requirement.single(key, value) for key, value in items))
