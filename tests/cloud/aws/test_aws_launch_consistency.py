"""Launching through EC2's eventual consistency: one NodeClaim never gets a second instance.

New instances are left out of tag-filtered DescribeInstances answers for a while (``set_tag_search_delay``,
moto patched to play EC2's lag), so finding a NodeClaim's instance by its tag right after a launch fails.
A repeated launch of the same attempt carries the same ``ClientToken`` and EC2 (moto patched to honour it as
EC2 does) answers with the first instance; a repeat with other parameters is refused and waits for it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_aws_provider_moto import request

from reconciler.cloud.aws.moto_patches import set_tag_search_delay
from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.cloud.aws.provider import AWSCloudProvider
from reconciler.cloud.types import LaunchPendingError


@pytest.fixture
def lagging_tags() -> Iterator[None]:
    set_tag_search_delay(3600)
    yield
    set_tag_search_delay(0)


def instances_of(aws: OfflineAWS, nodeclaim: str) -> list[str]:
    """Every live instance tagged for ``nodeclaim``, looked up without a tag filter (which would lag)."""
    pages = aws.client("ec2").get_paginator("describe_instances").paginate()  # the shared moto holds >100
    reservations = [r for page in pages for r in page["Reservations"]]
    return sorted(i["InstanceId"] for r in reservations for i in r["Instances"]
                  if i["State"]["Name"] in ("pending", "running")
                  and {"Key": "karpenter.sh/nodeclaim", "Value": nodeclaim} in (i.get("Tags") or []))


async def test_a_repeated_launch_with_the_same_token_returns_the_first_instance(
    aws: OfflineAWS, provider: AWSCloudProvider, lagging_tags: None
) -> None:
    nodeclass = aws.nodeclass()
    first = await provider.create(request("nc-token", client_token="uid-1-1700000000000"), nodeclass)
    assert await provider._find_by_nodeclaim("nc-token") is None, "the tag search does not see it yet"
    again = await provider.create(request("nc-token", client_token="uid-1-1700000000000"), nodeclass)
    assert again.provider_id == first.provider_id
    assert instances_of(aws, "nc-token") == [first.provider_id.rsplit("/", 1)[-1]]


async def test_the_same_token_with_other_parameters_waits_instead_of_launching(
    aws: OfflineAWS, provider: AWSCloudProvider, lagging_tags: None
) -> None:
    nodeclass = aws.nodeclass()
    first = await provider.create(request("nc-other", types=("m5.large",), client_token="uid-2-1"), nodeclass)
    with pytest.raises(LaunchPendingError, match="waiting for its instance"):
        await provider.create(request("nc-other", types=("c5.large",), client_token="uid-2-1"), nodeclass)
    assert len(instances_of(aws, "nc-other")) == 1
    set_tag_search_delay(0)  # the instance becomes visible: found by its tag, adopted
    adopted = await provider.create(request("nc-other", types=("c5.large",), client_token="uid-2-1"), nodeclass)
    assert adopted.provider_id == first.provider_id


async def test_a_new_token_is_a_new_launch(aws: OfflineAWS, provider: AWSCloudProvider, lagging_tags: None) -> None:
    """Without the token (what Adze did before) the lagging tag search lets a second instance through."""
    nodeclass = aws.nodeclass()
    await provider.create(request("nc-twice", client_token="uid-3-1"), nodeclass)
    await provider.create(request("nc-twice", client_token="uid-3-2"), nodeclass)
    assert len(instances_of(aws, "nc-twice")) == 2
