"""The reconciler's start-up EC2 check calls only actions the generated controller policies grant
(issue 15: it called ec2:DescribeAvailabilityZones, which no policy allows, so both replicas would have
crash-looped in a real account)."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

from components.policies import AwsScope, controller_policies
from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.cloud.aws.provider import AWSCloudProvider
from reconciler.controllers.operator.cloud_from_settings import check_ec2_access


def granted_actions() -> list[str]:
    scope = AwsScope(partition="aws", region="us-east-1", account_id="123456789012")
    policies = controller_policies(scope, "dev", "arn:aws:iam::123456789012:role/node",
                                   "arn:aws:sqs:us-east-1:123456789012:q")
    actions: list[str] = []
    for document in policies.values():
        for statement in document["Statement"]:
            if statement["Effect"] == "Allow":
                listed = statement["Action"]
                actions.extend([listed] if isinstance(listed, str) else listed)
    return actions


async def test_the_start_up_check_calls_only_granted_ec2_actions(aws: OfflineAWS,
                                                                  provider: AWSCloudProvider) -> None:
    called: list[str] = []

    def record(model: Any, **_: Any) -> None:
        called.append(f"ec2:{model.name}")

    provider.clients.ec2.meta.events.register("before-call.ec2", record)
    await check_ec2_access(provider)
    assert called == ["ec2:DescribeInstanceTypes"]
    allowed = granted_actions()
    denied = [action for action in called if not any(fnmatchcase(action, pattern) for pattern in allowed)]
    assert denied == [], f"the start-up check calls actions no controller policy grants: {denied}"
