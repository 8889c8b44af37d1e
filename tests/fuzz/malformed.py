"""Seeded mutations of shipped, valid inputs: wrong types, missing keys, huge and negative quantities,
deep nesting, odd names. Deterministic for a given seed so a failure names a reproducible case."""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Iterator
from typing import Any

Path = tuple[Any, ...]

ODD_VALUES: list[Any] = [
    None, "", "x", "-1", -1, 0, 1.5, 10**30, 1e30, "1e30", "1e999999", "999999999999999999999Gi", "-5Gi",
    math.nan, math.inf, True, [], {}, ["a", "b"], {"a": 1}, "9999-12-31T23:59:59-05:00", "\x00\udcff",
    "2024-13-45T99:99:99Z", "10000-01-01T00:00:00Z", [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
]


def paths(node: Any, prefix: Path = ()) -> Iterator[Path]:
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from paths(value, (*prefix, index))


def _parent(document: Any, path: Path) -> Any:
    for step in path[:-1]:
        document = document[step]
    return document


def deep(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


def mutate(document: Any, rng: random.Random) -> tuple[Any, str]:
    """One mutation of a copy of ``document``; returns it and a description."""
    mutated = copy.deepcopy(document)
    candidates = [p for p in paths(mutated) if p]
    path = rng.choice(candidates)
    parent = _parent(mutated, path)
    operation = rng.choice(["replace", "replace", "replace", "delete", "deep", "name-list", "quantity"])
    if operation == "delete" and isinstance(parent, dict):
        del parent[path[-1]]
        return mutated, f"delete {path}"
    if operation == "deep":
        parent[path[-1]] = deep(rng.choice([50, 400, 3000]))
        return mutated, f"deep nesting at {path}"
    if operation == "name-list":
        parent[path[-1]] = [rng.choice(["a", "b"])]
        return mutated, f"list at {path}"
    if operation == "quantity":
        value = rng.choice(["1e999999", "-3", "1e30", "0.0000000001m", "12345678901234567890Ei", "1.5.5", "Gi"])
        parent[path[-1]] = value
        return mutated, f"quantity {value!r} at {path}"
    value = copy.deepcopy(rng.choice(ODD_VALUES))
    parent[path[-1]] = value
    return mutated, f"{value!r:.40} at {path}"
