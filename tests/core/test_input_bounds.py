"""Input bounds: an alias bomb is refused; a large document without aliases (a 5,000-node snapshot holds
millions of values) is read, as its size is already bounded by its file's."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.model import shape
from reconciler.model.meta import ManifestError
from reconciler.model.shape import MAX_EXPANDED_NODES, check_document_bounds


def test_an_alias_bomb_is_refused_with_a_one_line_error() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 8)]
    document = yaml.safe_load("\n".join(lines))
    with pytest.raises(ManifestError, match="once YAML aliases are expanded"):
        check_document_bounds(document)


def test_a_document_larger_than_the_alias_bound_without_aliases_is_read() -> None:
    document = {"objects": [{"values": list(range(1000))} for _ in range(MAX_EXPANDED_NODES // 1000 + 10)]}
    check_document_bounds(document)  # no error: nothing is expanded


def test_moderate_alias_use_is_fine_and_depth_is_still_bounded() -> None:
    shared = {"labels": {"app": "x"}}
    check_document_bounds({"objects": [{"metadata": shared} for _ in range(1000)]})
    deep: dict = {}
    node = deep
    for _ in range(70):
        node["x"] = {}
        node = node["x"]
    with pytest.raises(ManifestError, match="nested deeper"):
        check_document_bounds(deep)


def _outcome(document: object) -> str:
    try:
        check_document_bounds(document)
    except ManifestError as err:
        return str(err)
    return "ok"


def _exact_outcome(document: object, monkeypatch: pytest.MonkeyPatch) -> str:
    with monkeypatch.context() as patch:
        patch.setattr(shape, "_plainly_within_bounds", lambda _document: False)
        return _outcome(document)


def _nested(depth: int, leaf: object) -> dict:
    document: dict = {}
    node = document
    for _ in range(depth - 1):
        node["x"] = {}
        node = node["x"]
    node["x"] = leaf
    return document


@pytest.mark.parametrize("depth", [63, 64, 65, 66])
@pytest.mark.parametrize("leaf", ["a", 1, {}, [], {"k": "v"}, ["v"], "\ud800", "é"])
def test_the_one_level_walk_decides_as_the_exact_walk_at_the_depth_bound(
        depth: int, leaf: object, monkeypatch: pytest.MonkeyPatch) -> None:
    document = _nested(depth, leaf)
    assert _outcome(document) == _exact_outcome(document, monkeypatch)


values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3) | st.sampled_from(["\udc80", "ü"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=2), children, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(values, st.booleans())
def test_the_one_level_walk_decides_as_the_exact_walk(document: object, share: bool) -> None:
    if share and isinstance(document, dict | list):
        document = {"a": document, "b": [document, {"c": document}]}  # a subtree met three times, as an alias
    with pytest.MonkeyPatch.context() as patch:
        assert _outcome(document) == _exact_outcome(document, patch)
