"""YAML in and out through libyaml when PyYAML has it (wheels ship it): the pure-Python loader spent
~90 % of `status` on a 300-node snapshot. Same safe constructors and resolvers either way."""

from __future__ import annotations

from typing import Any

import yaml

SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
SAFE_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def safe_load(text: str) -> Any:
    return yaml.load(text, Loader=SAFE_LOADER)


def safe_load_all(text: str) -> list[Any]:
    return list(yaml.load_all(text, Loader=SAFE_LOADER))


def safe_dump(data: Any, **options: Any) -> str:
    return yaml.dump(data, Dumper=SAFE_DUMPER, **options)
