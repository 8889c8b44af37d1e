"""Fixtures for the end-to-end tests on a real control plane (docs/control-plane.md).

``control_plane`` (session): etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok built by
``scripts/control-plane.sh``, with Adze's CRDs and a kube-dns Service; skipped only when the binaries are not
built and Go is absent. ``moto_server`` (session): moto seeded like an EKS account. ``adze`` (per test): an
``AdzeCluster`` (own namespace, own moto cluster, nodes joining from its instances); after the test it fails
the test if the API server refused any request of the reconciler's ServiceAccount (an RBAC rule the Pulumi
code lacks), then cleans up.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.adze_cluster import AdzeCluster, adze_cluster, prepared_control_plane
from support.control_plane import ControlPlane
from support.slow_dirs import mark_slow_under

from reconciler.cloud.aws.offline import OfflineAWS, start_offline_aws

_clusters = itertools.count(1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here starts a control plane and processes (the ``slow`` set)."""
    mark_slow_under(Path(__file__).resolve().parent, items)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with prepared_control_plane(tmp_path_factory.mktemp("control-plane")) as plane:
        yield plane


@pytest.fixture(scope="session")
def moto_server() -> Iterator[OfflineAWS]:
    environment = start_offline_aws(cluster="cp-seed", kubernetes_version="1.33")
    yield environment
    environment.stop()


@pytest.fixture
def adze(control_plane: ControlPlane, moto_server: OfflineAWS, request: pytest.FixtureRequest,
         tmp_path: Path) -> Iterator[AdzeCluster]:
    number = next(_clusters)
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")
    namespace = f"t{number}-{slug}"[:63].rstrip("-")
    control_plane.check_alive()
    with adze_cluster(control_plane, moto_server.for_cluster(f"cp-{number}"), namespace, tmp_path) as cluster:
        yield cluster
        denied = cluster.denied_requests()
        assert not denied, (
            f"the API server refused {len(denied)} request(s) of the reconciler's ServiceAccount "
            f"(RBAC the Pulumi program does not grant): {sorted(set(denied))}"
        )
