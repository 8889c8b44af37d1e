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


def mutate_many(document: Any, rng: random.Random, most: int = 3) -> tuple[Any, str]:
    """One to ``most`` mutations on top of each other (a path may vanish under a later one)."""
    descriptions = []
    for _ in range(rng.randint(1, most)):
        if not any(p for p in paths(document)):
            break
        document, what = mutate(document, rng)
        descriptions.append(what)
        if what.startswith("deep nesting"):
            break  # copying or walking it again would only exhaust this process's stack
    return document, "; ".join(descriptions)


def garbage(valid: bytes, rng: random.Random) -> list[tuple[str, bytes]]:
    """Bytes that are not the input a loader expects, derived from a valid file where that helps."""
    cut = rng.randrange(1, max(2, len(valid)))
    middle = len(valid) // 2
    return [
        ("empty", b""),
        ("random-16", rng.randbytes(16)),
        ("random-4k", rng.randbytes(4096)),
        ("truncated", valid[:cut]),
        ("random-tail", valid + rng.randbytes(64)),
        ("nul-inside", valid[:middle] + b"\x00" + valid[middle:]),
        ("not-utf8-inside", valid[:middle] + b"\xff\xfe\xc3(" + valid[middle:]),
        ("utf16", b"\xff\xfe" + valid.decode("utf-8", "replace").encode("utf-16-le")),
        ("bom", b"\xef\xbb\xbf" + valid),
        ("control-chars", valid[:middle] + bytes(range(1, 9)) + valid[middle:]),
        ("tab-indent", valid.replace(b"\n  ", b"\n\t")),
        ("one-long-line", b"a" * 1_000_000),
        ("deep-json", b"[" * 100_000 + b"]" * 100_000),
        ("deep-flow-yaml", b"a: " + b"{b: " * 2_000 + b"1" + b"}" * 2_000),
        ("yaml-tags", b"!!python/object/apply:os.system ['true']\n"),
        ("many-documents", b"---\n" * 10_000),
        ("scalar", b"just a string\n"),
        ("list", b"- 1\n- 2\n"),
    ]
