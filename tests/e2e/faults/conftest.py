"""Fault tests: the real ``App`` behind a ``FaultProxy`` (tests/support/fault_proxy.py), with moto for AWS.

The API server is a fixture parameter (``apiserver``):

- ``fake``: the project's fake API server, with ``ctrl_cluster.FakeCluster`` playing kubelets, scheduler and
  workload controllers;
- ``real``: the real control plane (docs/control-plane.md; one per test session, a namespace per test) with
  kube-scheduler, kube-controller-manager and kwok, and ``support.eks_nodes`` registering a Node per running
  moto instance as its kubelet would. Replicas present the token of the reconciler's ServiceAccount, bound to
  the RBAC the Pulumi program deploys (``support.reconciler_process``); each replica's proxy speaks plain HTTP
  to it and TLS (the plane's CA) to kube-apiserver, passing the bearer token through. A request the
  authorizer refused fails the test (``ApiServer.violations``). Skipped only where the control-plane binaries
  are not built and Go is absent.

Tests talk to the server only through ``ApiServer.admin`` (a ``KubeAPI``) and to the reconciler only through
its proxy.
"""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parents[2]
for _path in (str(_TESTS), str(_TESTS / "controllers"), str(_TESTS / "e2e"), str(Path(__file__).parent)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from fault_rig import ApiServer, fake_apiserver, real_apiserver  # noqa: E402
from support.adze_cluster import prepared_control_plane  # noqa: E402
from support.control_plane import ControlPlane  # noqa: E402

from reconciler.cloud.aws.offline import OfflineAWS  # noqa: E402

SERVERS = ("fake", "real")
_namespaces = itertools.count(1)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """Started when the first ``real`` test asks for it."""
    with prepared_control_plane(tmp_path_factory.mktemp("control-plane")) as plane:
        yield plane


@pytest.fixture(params=SERVERS)
async def apiserver(request: pytest.FixtureRequest, aws: OfflineAWS, tmp_path: Path) -> AsyncIterator[ApiServer]:
    """The API server under test (see the module docstring)."""
    if request.param == "fake":
        async with fake_apiserver() as server:
            yield server
        return
    plane: ControlPlane = request.getfixturevalue("control_plane")
    plane.check_alive()
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")
    namespace = f"f{next(_namespaces)}-{slug}"[:63].rstrip("-")
    async with real_apiserver(plane, aws, namespace, tmp_path) as server:
        yield server
