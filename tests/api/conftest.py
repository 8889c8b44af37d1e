"""Fixtures for the API tests."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.api.crds import generate_crds


@pytest.fixture(scope="session")
def crds() -> list[dict[str, Any]]:
    return generate_crds()
