"""No import cycle under reconciler/: every import counts, function-local and TYPE_CHECKING ones included.

A cycle that only works because one side imports late (inside a function or
under TYPE_CHECKING) is still two modules that cannot be understood, tested or
moved apart; the graph is read from the source with ``ast``, so nothing is
imported to check it.

The same holds one level up: no cycle between reconciler's packages, so the layers
(``model`` at the bottom, then ``api``, ``cloud``, ``scheduling``, ``provisioning``,
``disruption`` ... up to ``controllers``, ``sim``, ``insight`` and ``cli``) can be read
from the bottom. A package is a first-level subpackage (``reconciler.disruption``
holds ``reconciler.disruption.candidates`` and ``reconciler.disruption.x.y``); a top-level
module (``reconciler.settings``, ``reconciler.cli``) and the root package are
nodes of their own.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "reconciler"


def module_files(root: Path = PACKAGE_ROOT, package: str = PACKAGE) -> dict[str, Path]:
    files = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    return files


def _targets(node: ast.AST, module: str, is_package: bool, known: Mapping[str, Path]) -> Iterator[str]:
    """The known modules one import statement names (``from a import b`` names ``a.b`` when that is a module)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            name = alias.name
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                yield name
        return
    if not isinstance(node, ast.ImportFrom):
        return
    base = node.module or ""
    if node.level:
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    for alias in node.names:
        submodule = f"{base}.{alias.name}"
        if submodule in known:
            yield submodule
        elif base in known:
            yield base


def import_graph(files: Mapping[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        is_package = path.name == "__init__.py"
        edges = {
            target
            for node in ast.walk(tree)  # every statement: module level, in functions, under TYPE_CHECKING
            for target in _targets(node, module, is_package, files)
        }
        edges.discard(module)
        graph[module] = edges
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(start: str) -> None:
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


def package_of(module: str) -> str:
    """The package node of a module: ``root.first`` (``reconciler.disruption.candidates`` -> ``reconciler.disruption``;
    ``reconciler.settings`` and ``reconciler`` are their own)."""
    return ".".join(module.split(".")[:2])


def package_edges(graph: Mapping[str, set[str]]) -> dict[str, dict[str, set[tuple[str, str]]]]:
    """package -> package it imports -> the module imports (importer, imported) that make that edge."""
    edges: dict[str, dict[str, set[tuple[str, str]]]] = {}
    for module, targets in graph.items():
        source = edges.setdefault(package_of(module), {})
        for target in targets:
            if package_of(target) != package_of(module):
                source.setdefault(package_of(target), set()).add((module, target))
    return edges


def package_cycles(graph: Mapping[str, set[str]]) -> list[str]:
    """Each package cycle, with the module imports between its packages (what to move to break it)."""
    edges = package_edges(graph)
    found = []
    for component in cycles({package: set(targets) for package, targets in edges.items()}):
        members = set(component)
        lines = [
            f"  {source} -> {target}: " + ", ".join(f"{a} -> {b}" for a, b in sorted(imports))
            for source in component
            for target, imports in sorted(edges[source].items())
            if target in members
        ]
        found.append(" <-> ".join(component) + "\n" + "\n".join(lines))
    return found


@pytest.fixture(scope="module")
def reconciler_graph() -> Mapping[str, set[str]]:
    """The package's import graph, parsed once for the tests that only read it (a parse of every module)."""
    return import_graph(module_files())


def test_no_import_cycle_under_reconciler(reconciler_graph: Mapping[str, set[str]]) -> None:
    graph = reconciler_graph
    assert len(graph) > 100  # the whole package was read
    found = cycles(graph)
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_no_import_cycle_between_reconcilers_packages(reconciler_graph: Mapping[str, set[str]]) -> None:
    graph = reconciler_graph
    assert {"reconciler.model", "reconciler.disruption", "reconciler.state"} <= set(package_edges(graph))
    found = package_cycles(graph)
    assert not found, "package import cycles:\n" + "\n".join(found)


def test_the_checker_sees_local_type_checking_and_relative_imports(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from pkg import b\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub.c import X\n")
    (package / "sub" / "c.py").write_text("from .. import a\n")
    (package / "d.py").write_text("import pkg.a\n")
    graph = import_graph(module_files(tmp_path, "pkg"))
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.sub.c"} and graph["pkg.sub.c"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]
    (package / "sub" / "c.py").write_text("X = 1\n")
    assert cycles(import_graph(module_files(tmp_path, "pkg"))) == []


def test_a_package_cycle_is_found_without_a_module_cycle_and_names_its_imports(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    for sub in ("low", "high", "high/deep"):
        (package / sub).mkdir(parents=True, exist_ok=True)
        (package / sub / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "low" / "a.py").write_text("from pkg.high.deep.c import X\n")
    (package / "high" / "deep" / "c.py").write_text("X = 1\n")
    (package / "high" / "b.py").write_text("def f():\n    from pkg.low import a\n")
    (package / "state.py").write_text("from pkg.low import a\n")
    graph = import_graph(module_files(tmp_path, "pkg"))
    assert cycles(graph) == []  # a -> c and b -> a: no module cycle
    assert package_of("pkg.high.deep.c") == "pkg.high" and package_of("pkg.state") == "pkg.state"
    assert package_cycles(graph) == [
        "pkg.high <-> pkg.low\n  pkg.high -> pkg.low: pkg.high.b -> pkg.low.a\n"
        "  pkg.low -> pkg.high: pkg.low.a -> pkg.high.deep.c"
    ]
    (package / "low" / "a.py").write_text("X = 2\n")
    assert package_cycles(import_graph(module_files(tmp_path, "pkg"))) == []
