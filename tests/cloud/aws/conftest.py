"""Fixtures for the AWS provider tests: one in-process moto server per session, reset per test."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from aws_harness import ACTIVE, CLUSTER, FaultPlan, install_patches, make_provider

from reconciler.cloud.aws.offline import OfflineAWS, start_offline_aws
from reconciler.cloud.aws.provider import AWSCloudProvider


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
    created = make_provider(aws)
    yield created
    created.close()
