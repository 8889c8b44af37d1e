"""Shared fixtures. Test files have unique basenames (no __init__.py packages)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import boto_classes

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"

boto_classes.install()  # a boto3 client's class is built once per session and service, not per client


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip("../shared is not present next to the repository")
    return SHARED
