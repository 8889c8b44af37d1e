"""Shared fixtures. Test files have unique basenames (no __init__.py packages)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import croniter  # noqa: F401  # imported before the process guard: its import runs `file` (platform.architecture)
import pytest
from support import boto_classes
from support.process_guard import no_processes

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"

boto_classes.install()  # a boto3 client's class is built once per session and service, not per client


@pytest.fixture(autouse=True)
def _fast_tests_start_no_process(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("slow") is not None:
        yield
        return
    with no_processes(request.node.nodeid):
        yield


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip("../shared is not present next to the repository")
    return SHARED
