"""Input bounds: an alias bomb is refused; a large document without aliases (a 5,000-node snapshot holds
millions of values) is read, as its size is already bounded by its file's."""

from __future__ import annotations

import pytest
import yaml

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
