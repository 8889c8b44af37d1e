"""What the AWS side keeps in memory: botocore's models as plain dicts on one shared loader, instance types read
in pages and converted as each page arrives."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

import pytest
from aws_harness import make_provider
from botocore.exceptions import ClientError

from reconciler.cloud.aws.clients import AwsCaller, AwsClients, ClientOptions, new_session, shared_loader
from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.cloud.aws.typeprovider import DESCRIBE_PAGE_SIZE


def _description(client: Any) -> Any:
    return client.meta.service_model._service_description


def test_clients_share_one_loader_and_its_models_are_plain_dicts(aws: OfflineAWS) -> None:
    options = ClientOptions(region=aws.region, endpoint_url=aws.endpoint_url, access_key_id="testing",
                            secret_access_key="testing")
    first, second = AwsClients(options), AwsClients(options)
    ec2 = first.ec2
    assert _description(ec2) is _description(second.ec2)  # read once for the process
    assert type(_description(ec2)) is dict and type(_description(ec2)["shapes"]) is dict
    assert not isinstance(shared_loader().load_data("endpoints"), OrderedDict)
    # ... and they work: a real call through moto.
    assert ec2.describe_availability_zones()["AvailabilityZones"]
    eks = new_session(region_name=aws.region, aws_access_key_id="testing", aws_secret_access_key="testing")
    assert _description(eks.client("eks", endpoint_url=aws.endpoint_url)) is _description(first.client("eks"))


def test_discover_cluster_does_not_build_boto3s_default_session(aws: OfflineAWS, monkeypatch: Any) -> None:
    import boto3

    from reconciler.controllers.operator.cloud_from_settings import _describe_cluster
    from reconciler.settings import Settings

    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    for key, value in aws.credentials.items():
        monkeypatch.setenv(key.upper(), value)
    settings = Settings.from_env({"CLUSTER_NAME": aws.cluster, "AWS_REGION": aws.region})
    with pytest.raises(ClientError, match="ResourceNotFoundException"):  # moto has no EKS cluster by that name
        _describe_cluster(settings, {"AWS_ENDPOINT_URL": aws.endpoint_url})
    assert boto3.DEFAULT_SESSION is None  # no second copy of the models and endpoint data kept for good


async def test_instance_types_are_asked_in_pages_of_100_and_converted_per_page(aws: OfflineAWS) -> None:
    provider = make_provider(aws)
    asked: list[dict[str, Any]] = []
    provider.clients.ec2.meta.events.register(
        "before-parameter-build.ec2.DescribeInstanceTypes", lambda params, **_: asked.append(dict(params)))
    try:
        await provider.instance_type_provider.refresh()
    finally:
        provider.close()
    assert asked and all(p.get("MaxResults") == DESCRIBE_PAGE_SIZE for p in asked)
    assert provider.instance_type_provider.infos  # converted and kept


class _Pages:
    def __init__(self, pages: list[list[int]]) -> None:
        self.pages = pages

    def get_paginator(self, _operation: str) -> Any:
        return self

    def paginate(self, **_: Any) -> Any:
        for page in self.pages:
            yield {"Items": list(page)}


async def test_paginate_converts_each_page_and_drops_none() -> None:
    caller = AwsCaller()
    try:
        seen: list[int] = []

        def convert(item: int) -> str | None:
            seen.append(item)
            return None if item % 2 else f"#{item}"

        items = await caller.paginate(_Pages([[1, 2], [3, 4], [6]]), "op", "Items", convert=convert)
        assert items == ["#2", "#4", "#6"] and seen == [1, 2, 3, 4, 6]
        assert await caller.paginate(_Pages([[1], [2]]), "op", "Items") == [1, 2]
    finally:
        caller.close()
    await asyncio.sleep(0)
