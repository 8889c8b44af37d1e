"""End-to-end fixtures: the fake Kubernetes API server (HTTP) and moto (the real AWS provider's endpoint)."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parents[1]
for _path in (str(_TESTS), str(_TESTS / "controllers")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from support.slow_dirs import mark_slow_under  # noqa: E402

from reconciler.cloud.aws.offline import OfflineAWS, start_offline_aws  # noqa: E402

_clusters = itertools.count(1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here starts processes or servers (the ``slow`` set: ``pytest -m "not slow"`` skips them)."""
    mark_slow_under(Path(__file__).resolve().parent, items)


@pytest.fixture(scope="session")
def moto_server() -> Iterator[OfflineAWS]:
    environment = start_offline_aws(cluster="e2e-seed")
    yield environment
    environment.stop()


@pytest.fixture
def aws(moto_server: OfflineAWS) -> OfflineAWS:
    """A cluster of its own in the shared moto (own VPC, subnets, security group, role)."""
    return moto_server.for_cluster(f"e2e-{next(_clusters)}")
