"""Resource lists: resource name -> exact milli-unit amount.

``Resources`` is an immutable mapping. Arithmetic returns new objects; a
resource absent from a list counts as zero.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from typing import Any

from reconciler.model.quantity import format_quantity, parse_quantity

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"


class Resources(Mapping[str, int]):
    __slots__ = ("_amounts", "_hash")

    def __init__(self, amounts: Mapping[str, int] | Iterable[tuple[str, int]] = ()) -> None:
        items = amounts.items() if isinstance(amounts, Mapping) else amounts
        self._amounts: dict[str, int] = {name: value for name, value in items if value}
        self._hash: int | None = None

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any] | None, *, path: str = "resources") -> Resources:
        """Build from a Kubernetes resource list such as ``{"cpu": "100m", "memory": "1Gi"}``."""
        if not manifest:
            return EMPTY
        if not isinstance(manifest, Mapping):
            raise ValueError(f"{path}: expected a map of resource name to quantity")
        amounts = {}
        for name, value in manifest.items():
            try:
                amounts[str(name)] = parse_quantity(value)
            except ValueError as err:
                raise ValueError(f"{path}.{name}: {err}") from None
            if amounts[str(name)] < 0:
                raise ValueError(f"{path}.{name}: {value!r} must not be negative")
        return cls(amounts)

    @classmethod
    def of(cls, **quantities: str | int | float) -> Resources:
        """Shorthand for tests and catalogues: ``Resources.of(cpu="2", memory="4Gi")``."""
        return cls({name.replace("_", "-"): parse_quantity(value) for name, value in quantities.items()})

    def to_manifest(self) -> dict[str, str]:
        return {name: format_quantity(value, name) for name, value in sorted(self._amounts.items())}

    # Mapping protocol; missing resources read as zero through ``get``/``amount``.
    def __getitem__(self, name: str) -> int:
        return self._amounts[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._amounts)

    def __len__(self) -> int:
        return len(self._amounts)

    # The Mapping mixins go through __getitem__/__iter__ in Python; the dict answers the same, in C (hot in
    # scheduling and disruption). The views are read-only: nothing changes ``_amounts`` after __init__.
    def get(self, name: str, default: Any = None) -> Any:
        return self._amounts.get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self._amounts

    def keys(self) -> KeysView[str]:
        return self._amounts.keys()

    def items(self) -> ItemsView[str, int]:
        return self._amounts.items()

    def values(self) -> ValuesView[int]:
        return self._amounts.values()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Resources):
            return self._amounts == other._amounts
        if isinstance(other, Mapping):
            return self._amounts == {k: v for k, v in other.items() if v}
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._amounts.items()))
        return self._hash

    def __repr__(self) -> str:
        return f"Resources({self.to_manifest()})"

    def amount(self, name: str) -> int:
        return self._amounts.get(name, 0)

    def __add__(self, other: Mapping[str, int]) -> Resources:
        merged = dict(self._amounts)
        for name, value in other.items():
            merged[name] = merged.get(name, 0) + value
        return Resources(merged)

    def __sub__(self, other: Mapping[str, int]) -> Resources:
        merged = dict(self._amounts)
        for name, value in other.items():
            merged[name] = merged.get(name, 0) - value
        return Resources(merged)

    def fits_in(self, available: Mapping[str, int]) -> bool:
        """True when every requested amount is at most what ``available`` offers."""
        return all(value <= available.get(name, 0) for name, value in self._amounts.items() if value > 0)

    def exceeding(self, available: Mapping[str, int]) -> list[str]:
        """Names of the resources whose request is larger than ``available``."""
        return sorted(name for name, value in self._amounts.items() if value > available.get(name, 0))

    def max(self, other: Mapping[str, int]) -> Resources:
        names = set(self._amounts) | set(other)
        return Resources({name: max(self.amount(name), other.get(name, 0)) for name in names})

    def clamp_non_negative(self) -> Resources:
        return Resources({name: value for name, value in self._amounts.items() if value > 0})

    def only(self, names: Iterable[str]) -> Resources:
        wanted = set(names)
        return Resources({name: value for name, value in self._amounts.items() if name in wanted})


EMPTY = Resources()


def total(lists: Iterable[Mapping[str, int]]) -> Resources:
    summed: dict[str, int] = {}
    for resources in lists:
        for name, value in resources.items():
            summed[name] = summed.get(name, 0) + value
    return Resources(summed)
