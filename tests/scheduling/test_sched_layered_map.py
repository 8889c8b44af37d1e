"""``LayeredMap`` (the base topology's per-pod anti-affinity maps, shared between versions of the nodes): after
random writes, removals and derivations, every version reads as a dict given the same operations, and deriving
or writing a later version leaves every earlier one as it was."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.scheduling.layered_map import LayeredMap, derived

_KEYS = st.integers(0, 40)
_OPERATION = st.one_of(
    st.tuples(st.just("set"), _KEYS, st.integers()),
    st.tuples(st.just("pop"), _KEYS),
    st.tuples(st.just("setdefault"), _KEYS, st.integers()),
    st.tuples(st.just("derive")),
)


def _same(layered: LayeredMap[int, int], model: dict[int, int]) -> None:
    assert layered.as_dict() == model
    for key in range(-1, 42):
        assert layered.get(key, None) == model.get(key)
        assert (key in layered) == (key in model)
        if key in model:
            assert layered[key] == model[key]


@settings(max_examples=300, deadline=None)
@given(start=st.dictionaries(_KEYS, st.integers(), max_size=30),
       operations=st.lists(_OPERATION, max_size=200))
def test_every_version_reads_as_a_dict_with_the_same_writes(start: dict[int, int], operations: list[Any]) -> None:
    layered, model = derived(dict(start)), dict(start)
    versions: list[tuple[LayeredMap[int, int], dict[int, int]]] = []
    for operation in operations:
        if operation[0] == "set":
            layered[operation[1]] = operation[2]
            model[operation[1]] = operation[2]
        elif operation[0] == "pop":
            assert layered.pop(operation[1], None) == model.pop(operation[1], None)
        elif operation[0] == "setdefault":
            assert layered.setdefault(operation[1], operation[2]) == model.setdefault(operation[1], operation[2])
        else:
            versions.append((layered, dict(model)))
            layered = layered.derive()
        _same(layered, model)
    for version, seen in versions:  # earlier versions are as they were when derived
        _same(version, seen)


def test_a_long_chain_folds_its_writes_into_a_new_base() -> None:
    """The copies per version stay small: past the fold size, ``derive`` starts a new base (else each version
    copies every write since the first)."""
    layered: LayeredMap[int, int] = derived({key: key for key in range(1000)})
    for step in range(2000):
        layered[step % 1000] = step
        layered = layered.derive()
        assert len(layered._top) <= max(64, 180) + 1
    assert layered.as_dict() == {key: 1000 + key for key in range(1000)}
