"""Fixtures for the infrastructure tests: whole-program runs under Pulumi mocks, shared per session."""

from __future__ import annotations

import pytest
from pulumi_harness import DEPLOYER_ROLE, PREVIEW_ROLE, ProgramRun, RunCache, run_stack

_CACHE = RunCache()


def pytest_configure(config: pytest.Config) -> None:
    # The SDKs warn about their own deprecated modules at import time; not our code.
    for module in ("pulumi_aws", "pulumi_eks"):
        config.addinivalue_line("filterwarnings", f"ignore::DeprecationWarning:{module}")


@pytest.fixture(scope="session")
def dev() -> ProgramRun:
    """Pod Identity, new VPC over two zones, one NAT gateway, SQS-managed encryption, built image."""
    return _CACHE.get("dev", lambda: run_stack("dev"))


@pytest.fixture(scope="session")
def staging() -> ProgramRun:
    """IRSA, own VPC over three zones with one NAT gateway, KMS key created for the queue, arm64 system nodes."""
    return _CACHE.get("staging", lambda: run_stack("staging"))


@pytest.fixture(scope="session")
def prod() -> ProgramRun:
    """Protected cluster, three zones with a NAT each, business-hours budgets, GPU pool."""
    return _CACHE.get("prod", lambda: run_stack("prod"))


@pytest.fixture(scope="session")
def prod_with_ci_roles() -> ProgramRun:
    """Prod with the CI roles of its account: a deployer (cluster admin) and a preview role (view only)."""
    return _CACHE.get("prod+ci", lambda: run_stack(
        "prod", **{"adze:deployerRoleArn": DEPLOYER_ROLE, "adze:previewRoleArn": PREVIEW_ROLE}))


@pytest.fixture(scope="session", params=["dev", "staging", "prod"])
def any_stack(request: pytest.FixtureRequest) -> ProgramRun:
    return _CACHE.get(request.param, lambda: run_stack(request.param))
