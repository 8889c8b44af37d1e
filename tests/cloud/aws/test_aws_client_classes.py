"""``support.boto_classes``: clients of one session and service share a class and nothing else."""

from __future__ import annotations

from typing import Any

import boto3
from moto import mock_aws
from support import boto_classes


def test_clients_of_a_session_share_their_class_but_not_their_handlers_or_endpoint() -> None:
    boto_classes.install()
    with mock_aws():
        session = boto3.session.Session(region_name="us-east-1", aws_access_key_id="testing",
                                        aws_secret_access_key="testing")
        first = session.client("ec2")
        second = session.client("ec2", region_name="eu-west-1")
        other_session = boto3.session.Session(region_name="us-east-1", aws_access_key_id="testing",
                                              aws_secret_access_key="testing").client("ec2")
        assert type(first) is type(second), "the class was built again for the same session and service"
        assert type(other_session) is not type(first)
        assert type(session.client("sqs")) is not type(first)

        seen: list[str] = []

        def record(model: Any, **_: Any) -> None:
            seen.append(model.name)

        first.meta.events.register("before-call.ec2", record)
        assert second.meta.events is not first.meta.events
        second.describe_vpcs()
        assert seen == []
        first.describe_vpcs()
        assert seen == ["DescribeVpcs"]
        assert first.meta.region_name == "us-east-1" and second.meta.region_name == "eu-west-1"
        assert {v["CidrBlock"] for v in second.describe_vpcs()["Vpcs"]} == {"172.31.0.0/16"}


def test_an_offline_aws_keeps_its_clients_per_credentials_and_shares_them_with_its_clusters(aws: Any) -> None:
    ec2 = aws.client("ec2")
    assert aws.client("ec2") is ec2
    sibling = aws.for_cluster(aws.cluster + "-sibling")
    assert sibling.client("ec2") is ec2
    assert sibling.client("iam") is not ec2
    subnets = ec2.describe_subnets(SubnetIds=list(sibling.subnet_ids.values()))["Subnets"]
    assert sorted(s["SubnetId"] for s in subnets) == sorted(sibling.subnet_ids.values())
    sibling.credentials = {"aws_access_key_id": "other", "aws_secret_access_key": "other"}
    assert sibling.client("ec2") is not ec2, "a client of other credentials was reused"
    assert sibling.client("ec2").meta.region_name == aws.region
