"""``install_tag_lookup_patch``: moto finds a resource's tags by its ID, with the answer of its own tag scan."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ec2.models import ec2_backends
from moto.ec2.models.tags import TagBackend

from reconciler.cloud.aws.moto_patches import install_tag_lookup_patch

REGION = "us-east-1"


def _scanned(backend: Any, resource_id: str) -> list[dict[str, str]]:
    """moto's own answer: its tag scan filtered on the resource ID."""
    return TagBackend.describe_tags(backend, filters={"resource-id": [resource_id]})


def test_tags_by_id_equal_moto_scan_and_need_no_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    install_tag_lookup_patch()
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        # Prefix-sharing IDs and tags with the same key on several resources: a loose match would mix them up.
        subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24")["Subnet"]["SubnetId"] for i in range(3)]
        ec2.create_tags(Resources=subnets[:2], Tags=[{"Key": "Name", "Value": "shared"}])
        ec2.create_tags(Resources=[subnets[0]], Tags=[{"Key": "only", "Value": "first"}, {"Key": "b", "Value": ""}])
        group = ec2.create_security_group(GroupName="g", Description="d", VpcId=vpc,
                                          TagSpecifications=[{"ResourceType": "security-group",
                                                              "Tags": [{"Key": "k", "Value": "v"}]}])["GroupId"]
        backend = ec2_backends[DEFAULT_ACCOUNT_ID][REGION]
        resources = [*backend.describe_subnets(), *backend.describe_security_groups(), *backend.describe_vpcs()]
        assert {subnets[0], subnets[2], group, vpc} <= {r.id for r in resources}

        scans: list[Any] = []
        original = TagBackend.describe_tags
        monkeypatch.setattr(TagBackend, "describe_tags",
                            lambda self, filters=None: scans.append(filters) or original(self, filters))
        answers = {r.id: r.get_tags() for r in resources}
        assert scans == [], "tags were looked up by a scan of every tag"
        monkeypatch.setattr(TagBackend, "describe_tags", original)

        for resource in resources:
            assert answers[resource.id] == _scanned(backend, resource.id), resource.id
        assert answers[subnets[0]] == [
            {"resource_id": subnets[0], "key": "Name", "value": "shared", "resource_type": "subnet"},
            {"resource_id": subnets[0], "key": "only", "value": "first", "resource_type": "subnet"},
            {"resource_id": subnets[0], "key": "b", "value": "", "resource_type": "subnet"},
        ]
        assert answers[subnets[2]] == []
        assert answers[group] == [{"resource_id": group, "key": "k", "value": "v", "resource_type": "security-group"}]
        # Filtering on tags (which reads them through get_tags) still selects by value.
        named = ec2.describe_subnets(Filters=[{"Name": "tag:Name", "Values": ["shared"]}])["Subnets"]
        assert sorted(s["SubnetId"] for s in named) == sorted(subnets[:2])
