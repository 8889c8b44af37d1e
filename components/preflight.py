"""Checks against the AWS account that must fail ``pulumi preview`` before any resource is registered.

Stack config can be well-formed and still wrong for the account it runs in; ``pulumi up`` would then fail
only after IAM roles, the ECR repository, the image push, the queue and the KMS key exist. So, before the
program registers anything:

* ids and account numbers copied from documentation (this repository's examples and AWS's) are refused;
* ``deployerRoleArn`` and ``previewRoleArn`` must be roles of the account the stack deploys to (the caller's,
  ``aws.get_caller_identity``);
* with ``network.mode: existing``, the VPC and every subnet must exist in the region (``aws.ec2.get_vpc`` /
  ``get_subnet``), the subnets must be in that VPC, and the private ones in at least two zones (EKS).

Every problem names its config path, as ``components.config`` does. The look-ups are behind ``Lookups`` so
the rules are tested as plain functions; ``PulumiLookups`` makes them data-source invokes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from components.config import NAMESPACE, ConfigError, StackConfig
from reconciler.api.errors import Problem

# Account numbers and resource ids from documentation. 123456789012 is left out on purpose: it is also the
# account of every offline test double (moto, the Pulumi mocks); a real caller's account check catches it.
DOCUMENTED_EXAMPLE_ACCOUNTS = frozenset({"111122223333", "444455556666", "777788889999", "555555555555"})
_DOCUMENTED_EXAMPLE_ID = re.compile(r"(vpc|subnet)-(0a1b2c3d4e5f6\d{4}|1234567890abcdef0|0123456789abcdef0)")
_ROLE_ARN = re.compile(r"arn:[^:]+:iam::(\d{12}):role/(?:[\w+=,.@/-]*/)?([\w+=,.@-]+)")
_ASSUMED_ROLE_ARN = re.compile(r"arn:[^:]+:sts::(\d{12}):assumed-role/([\w+=,.@-]+)/.+")
_ROLE_KEYS = (("deployerRoleArn", "deployer_role_arn"), ("previewRoleArn", "preview_role_arn"))


@dataclass(slots=True, frozen=True)
class Caller:
    """Who runs the program: ``aws.get_caller_identity``."""

    account_id: str
    arn: str

    def is_role(self, role_arn: str | None) -> bool:
        """Whether the caller is a session of this role (the assumed-role ARN drops the role's path)."""
        role = _ROLE_ARN.fullmatch(role_arn or "")
        session = _ASSUMED_ROLE_ARN.fullmatch(self.arn)
        return bool(role and session and role.groups() == session.groups())


@dataclass(slots=True, frozen=True)
class Subnet:
    vpc_id: str
    zone: str


class Lookups(Protocol):
    def caller(self) -> Caller: ...

    def vpc_exists(self, vpc_id: str) -> bool: ...

    def subnet(self, subnet_id: str) -> Subnet | None: ...


def _path(key: str) -> str:
    return f"{NAMESPACE}:{key}"


def placeholder_problems(config: StackConfig) -> list[Problem]:
    """Documentation's example ids and accounts left in the stack (no AWS call needed)."""
    problems = []
    network = config.network
    ids = [("network.vpcId", network.vpc_id)] + [
        (f"network.{key}[{index}]", subnet)
        for key, subnets in (("privateSubnetIds", network.private_subnet_ids),
                             ("publicSubnetIds", network.public_subnet_ids))
        for index, subnet in enumerate(subnets)
    ]
    for key, value in ids:
        if value and _DOCUMENTED_EXAMPLE_ID.fullmatch(value):
            problems.append(Problem(_path(key), f"{value!r} is an example id from the documentation; "
                                                "set the id of your own resource"))
    arns = [(key, getattr(config, attribute)) for key, attribute in _ROLE_KEYS]
    arns.append(("interruption.kmsKeyArn", config.interruption.kms_key_arn))
    for key, arn in arns:
        account = (arn or "").split(":")[4] if arn and arn.count(":") >= 5 else ""
        if account in DOCUMENTED_EXAMPLE_ACCOUNTS:
            problems.append(Problem(_path(key), f"account {account} in {arn!r} is an example account from the "
                                                "documentation; use your account's ARN"))
    return problems


def account_problems(config: StackConfig, caller: Caller) -> list[Problem]:
    """Roles the stack grants cluster access must live in the account it deploys to."""
    problems = []
    for key, attribute in _ROLE_KEYS:
        arn = getattr(config, attribute)
        role = _ROLE_ARN.fullmatch(arn or "")
        if arn and role and role.group(1) != caller.account_id:
            problems.append(Problem(_path(key), f"role is in account {role.group(1)}, but the stack deploys to "
                                                f"account {caller.account_id} (the caller's, {caller.arn})"))
    return problems


def network_problems(config: StackConfig, lookups: Lookups) -> list[Problem]:
    network = config.network
    if network.mode != "existing" or not network.vpc_id:
        return []
    if not lookups.vpc_exists(network.vpc_id):
        return [Problem(_path("network.vpcId"), f"VPC {network.vpc_id} does not exist in this account and region")]
    problems = []
    private_zones = set()
    for key, subnets in (("privateSubnetIds", network.private_subnet_ids),
                         ("publicSubnetIds", network.public_subnet_ids)):
        for index, subnet_id in enumerate(subnets):
            found = lookups.subnet(subnet_id)
            path = _path(f"network.{key}[{index}]")
            if found is None:
                problems.append(Problem(path, f"subnet {subnet_id} does not exist in this account and region"))
            elif found.vpc_id != network.vpc_id:
                problems.append(Problem(path, f"subnet {subnet_id} is in {found.vpc_id}, not in {network.vpc_id}"))
            elif key == "privateSubnetIds":
                private_zones.add(found.zone)
    if not problems and len(private_zones) < 2:
        problems.append(Problem(_path("network.privateSubnetIds"),
                                f"all in {', '.join(sorted(private_zones))}; EKS needs subnets in two zones"))
    return problems


def preflight(config: StackConfig, lookups: Lookups) -> Caller:
    """Raise ``ConfigError`` naming every problem; returns the caller for the program to use."""
    problems = placeholder_problems(config)
    if problems:
        raise ConfigError(problems)  # looking example ids up would only add "does not exist"
    caller = lookups.caller()
    problems = account_problems(config, caller) + network_problems(config, lookups)
    if problems:
        raise ConfigError(problems)
    return caller


class PulumiLookups:
    """The look-ups as AWS provider data sources (blocking invokes, so nothing is registered before them)."""

    def caller(self) -> Caller:
        import pulumi_aws as aws

        identity = aws.get_caller_identity()
        return Caller(account_id=str(identity.account_id), arn=str(identity.arn))

    def vpc_exists(self, vpc_id: str) -> bool:
        import pulumi_aws as aws

        try:
            return bool(aws.ec2.get_vpc(id=vpc_id).id)
        except Exception:  # the provider raises "no matching EC2 VPC found"
            return False

    def subnet(self, subnet_id: str) -> Subnet | None:
        import pulumi_aws as aws

        try:
            found = aws.ec2.get_subnet(id=subnet_id)
        except Exception:
            return None
        return Subnet(vpc_id=str(found.vpc_id), zone=str(found.availability_zone))

