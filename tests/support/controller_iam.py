"""The stack's generated controller policies for a moto-seeded cluster, enforced on the reconciler's clients.

``components.policies.controller_policies`` is what ``pulumi up`` attaches to the reconciler's
role; here it is rendered for the seeded account (``OfflineAWS``: account 123456789012, the
cluster's region, node role ``KarpenterNodeRole-<cluster>``) and enforced with
``support.aws_authz`` on every client the reconciler uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from support.aws_authz import AuthorizationModel, AwsState, IamEnforcement
from support.iam_policy import PolicyDocument

from components.policies import AwsScope, controller_policies
from reconciler.cloud.aws.offline import ACCOUNT_ID, CREDENTIALS, OfflineAWS

# Every client the reconciler builds (AwsClients, plus eks for DescribeCluster at start-up).
RECONCILER_SERVICES = ("ec2", "ssm", "iam", "sqs", "pricing")


def node_role_arn(env: OfflineAWS) -> str:
    return f"arn:aws:iam::{ACCOUNT_ID}:role/{env.node_role}"


def queue_arn(env: OfflineAWS, name: str) -> str:
    return f"arn:aws:sqs:{env.region}:{ACCOUNT_ID}:{name}"


def generated_policies(
    env: OfflineAWS, *, queue: str | None = None, kms_key_arn: str | None = None, ssm_parameters: tuple[str, ...] = ()
) -> dict[str, PolicyDocument]:
    """What the stack attaches to the controller role, for this seeded cluster."""
    scope = AwsScope(partition="aws", region=env.region, account_id=ACCOUNT_ID)
    return controller_policies(
        scope, env.cluster, node_role_arn(env), queue_arn(env, queue) if queue else None, kms_key_arn, ssm_parameters
    )


def enforcement(
    env: OfflineAWS, policies: Mapping[str, PolicyDocument] | None = None, *, enforce: bool = True
) -> IamEnforcement:
    model = AuthorizationModel(AwsState(env.endpoint_url, env.region, CREDENTIALS), ACCOUNT_ID)
    documents = list((policies if policies is not None else generated_policies(env)).values())
    return IamEnforcement(documents, model, enforce=enforce)


def enforce_on_provider(guard: IamEnforcement, provider: Any) -> IamEnforcement:
    """Attach to every client of an ``AWSCloudProvider`` (built eagerly so none escapes)."""
    for service in RECONCILER_SERVICES:
        guard.attach(provider.clients.client(service))
    return guard
