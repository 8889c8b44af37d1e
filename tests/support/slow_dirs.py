"""Marking every test under a directory ``slow`` (processes, servers, control planes: ``-m "not slow"`` skips)."""

from __future__ import annotations

from pathlib import Path

import pytest


def mark_slow_under(directory: Path, items: list[pytest.Item]) -> None:
    for item in items:
        if directory in item.path.resolve().parents:
            item.add_marker(pytest.mark.slow)
