"""Fixtures for the AWS provider tests: one in-process moto server per session, reset per test."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from aws_harness import ACTIVE, CLUSTER, FaultPlan, install_patches, make_provider

from reconciler.cloud.aws.offline import OfflineAWS, start_offline_aws
from reconciler.cloud.aws.provider import AWSCloudProvider

# ``tests/support`` holds shared test helpers (the IAM policy evaluator); make ``import support...`` work.
_TESTS_DIR = str(Path(__file__).resolve().parents[2])
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)


@pytest.fixture(scope="session")
def moto_env() -> Iterator[OfflineAWS]:
    install_patches()
    environment = start_offline_aws(cluster=CLUSTER, faithful_fleet_security_groups=False)
    yield environment
    environment.stop()


_clusters = itertools.count(1)


@pytest.fixture
def aws(moto_env: OfflineAWS) -> Iterator[OfflineAWS]:
    """A cluster of its own in the shared moto (own VPC, subnets, SG, role; ownership tags keep it apart)."""
    ACTIVE.plan = None
    yield moto_env.for_cluster(f"{CLUSTER}-{next(_clusters)}")
    ACTIVE.plan = None


@pytest.fixture
def faults() -> Iterator[FaultPlan]:
    plan = FaultPlan()
    ACTIVE.plan = plan
    yield plan
    ACTIVE.plan = None


@pytest.fixture
def provider(aws: OfflineAWS) -> Iterator[AWSCloudProvider]:
    """The AWS provider, every call it makes authorized against the stack's generated controller policies
    (a denied call fails as it would in AWS, and fails the test)."""
    from support.controller_iam import enforce_on_provider, enforcement

    created = make_provider(aws)
    guard = enforce_on_provider(enforcement(aws), created)
    yield created
    created.close()
    assert not guard.denials, "calls the generated controller policies deny:\n" + guard.denied_report()
