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
