"""The ``slow`` marker: registered, and on every end-to-end module, so ``pytest -m "not slow"`` is the fast set."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_slow_is_a_registered_marker() -> None:
    markers = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    assert any(m.startswith("slow:") for m in markers)


def test_every_end_to_end_module_is_slow() -> None:
    modules = sorted((REPO / "tests" / "e2e").glob("test_*.py"))
    assert modules
    for path in modules:
        tree = ast.parse(path.read_text())
        marks = [
            ast.unparse(node.value) for node in tree.body
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets)
        ]
        assert marks == ["pytest.mark.slow"], path.name
