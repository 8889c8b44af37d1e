"""Fixtures for the Kubernetes adapter tests: a fake API server and a live client on it."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

# ``tests/support`` holds shared test helpers; make ``import support...`` work from any rootdir layout.
_TESTS_DIR = str(Path(__file__).resolve().parents[1])
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)

from support.fake_apiserver import FakeApiServer  # noqa: E402

from reconciler.kube.live import LiveKube  # noqa: E402


@pytest.fixture
async def server() -> AsyncIterator[FakeApiServer]:
    """A fake API server; the test fails if anything written to it was schema-invalid."""
    async with FakeApiServer(bookmark_interval=0.05) as fake:
        yield fake
    assert not fake.violations, f"invalid objects were sent: {fake.violations}"


@pytest.fixture
async def live(server: FakeApiServer) -> AsyncIterator[LiveKube]:
    async with LiveKube.for_url(server.url, token="t", watch_timeout=5) as client:
        yield client
