"""Fault tests: the real ``App`` behind a ``FaultProxy`` (tests/support/fault_proxy.py), with moto for AWS.

The API server is a fixture parameter (``apiserver``): today only the project's fake API server (``fake``);
a real control plane plugs in by adding a parameter that yields an ``ApiServer`` with its URL, a token, an
admin client and the stand-ins that play kubelets, kube-scheduler and workload controllers. Tests talk to the
server only through ``ApiServer.admin`` (a ``KubeAPI``) and to the reconciler only through its proxy.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parents[2]
for _path in (str(_TESTS), str(_TESTS / "controllers"), str(_TESTS / "e2e"), str(Path(__file__).parent)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from fault_rig import ApiServer, fake_apiserver  # noqa: E402

SERVERS = ("fake",)


@pytest.fixture(params=SERVERS)
async def apiserver(request: pytest.FixtureRequest) -> AsyncIterator[ApiServer]:
    """The API server under test (see the module docstring for adding a real one)."""
    async with fake_apiserver() as server:
        yield server
