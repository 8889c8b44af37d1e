"""Fail ``pulumi preview`` early, before any resource exists: documentation's example ids, roles of another
account, a VPC or subnets the account does not have; and the read-only preview identity."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pulumi_harness import (
    ACCOUNT_ID,
    DEPLOYER_ROLE,
    EXISTING_VPC,
    PREVIEW_ROLE,
    REPO_ROOT,
    ProgramRun,
    run_failing_program,
    run_stack,
    stack_file_config,
)

from components.config import ConfigError, load_stack_config
from components.preflight import (
    Caller,
    Subnet,
    account_problems,
    network_problems,
    placeholder_problems,
    preflight,
)

# What Pulumi.staging.yaml held before: AWS-documentation-style ids and account, well-formed and valid.
DOCUMENTED_NETWORK = {
    "mode": "existing",
    "vpcId": "vpc-0a1b2c3d4e5f60718",
    "privateSubnetIds": ["subnet-0a1b2c3d4e5f60001", "subnet-0a1b2c3d4e5f60002", "subnet-0a1b2c3d4e5f60003"],
    "publicSubnetIds": ["subnet-0a1b2c3d4e5f60101"],
}
CALLER = Caller(ACCOUNT_ID, f"arn:aws:sts::{ACCOUNT_ID}:assumed-role/deployer/ci")


def config(**keys: Any) -> Any:
    raw = {k.removeprefix("adze:"): v for k, v in stack_file_config("dev").items() if k.startswith("adze:")}
    raw.pop("network")
    return load_stack_config({**raw, **keys})


class FakeAccount:
    def __init__(self, vpcs: set[str], subnets: dict[str, Subnet]) -> None:
        self.vpcs, self.subnets, self.calls = vpcs, subnets, 0

    def caller(self) -> Caller:
        self.calls += 1
        return CALLER

    def vpc_exists(self, vpc_id: str) -> bool:
        return vpc_id in self.vpcs

    def subnet(self, subnet_id: str) -> Subnet | None:
        return self.subnets.get(subnet_id)


def test_documented_example_ids_and_accounts_are_refused_with_their_paths() -> None:
    stack = config(network=DOCUMENTED_NETWORK, deployerRoleArn="arn:aws:iam::111122223333:role/adze-k8s-admin",
                   interruption={"encryption": "kms", "kmsKeyArn": "arn:aws:kms:us-west-2:444455556666:key/k"})
    paths = [p.path for p in placeholder_problems(stack)]
    assert paths == ["adze:network.vpcId", "adze:network.privateSubnetIds[0]", "adze:network.privateSubnetIds[1]",
                     "adze:network.privateSubnetIds[2]", "adze:network.publicSubnetIds[0]", "adze:deployerRoleArn",
                     "adze:interruption.kmsKeyArn"]
    account = FakeAccount(set(), {})
    with pytest.raises(ConfigError):
        preflight(stack, account)
    assert account.calls == 0  # refused before any look-up


def test_the_guides_existing_vpc_example_would_be_refused() -> None:
    guide = (REPO_ROOT / "docs" / "deploying.md").read_text()
    block = next(b for b in guide.split("```yaml\n")[1:] if "mode: existing" in b.split("```")[0])
    raw = {k.removeprefix("adze:"): v for k, v in yaml.safe_load(block.split("```")[0])["config"].items()}
    paths = [p.path for p in placeholder_problems(config(**raw))]
    assert paths[:2] == ["adze:network.vpcId", "adze:network.privateSubnetIds[0]"]


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_the_repository_stacks_hold_no_documentation_placeholders(stack: str) -> None:
    raw = {k.removeprefix("adze:"): v for k, v in stack_file_config(stack).items() if k.startswith("adze:")}
    assert placeholder_problems(load_stack_config(raw)) == []


def test_roles_of_another_account_are_refused() -> None:
    stack = config(deployerRoleArn="arn:aws:iam::210987654321:role/admin", previewRoleArn=PREVIEW_ROLE)
    [problem] = account_problems(stack, CALLER)
    assert problem.path == "adze:deployerRoleArn"
    assert "account 210987654321" in problem.message and f"account {ACCOUNT_ID}" in problem.message


def test_an_existing_network_must_exist_in_the_account() -> None:
    subnets = {"subnet-0000000000000000a": Subnet(EXISTING_VPC, "us-west-2a"),
               "subnet-0000000000000000b": Subnet(EXISTING_VPC, "us-west-2a"),
               "subnet-0000000000000000c": Subnet("vpc-0000000000000000f", "us-west-2b")}
    account = FakeAccount({EXISTING_VPC}, subnets)
    network = {"mode": "existing", "vpcId": EXISTING_VPC,
               "privateSubnetIds": ["subnet-0000000000000000a", "subnet-0000000000000000d"],
               "publicSubnetIds": ["subnet-0000000000000000c"]}
    problems = network_problems(config(network=network), account)
    assert [(p.path, p.message) for p in problems] == [
        ("adze:network.privateSubnetIds[1]", "subnet subnet-0000000000000000d does not exist in this account and "
                                             "region"),
        ("adze:network.publicSubnetIds[0]", f"subnet subnet-0000000000000000c is in vpc-0000000000000000f, not in "
                                            f"{EXISTING_VPC}"),
    ]
    one_zone = {**network, "privateSubnetIds": ["subnet-0000000000000000a", "subnet-0000000000000000b"],
                "publicSubnetIds": []}
    [problem] = network_problems(config(network=one_zone), account)
    assert problem.path == "adze:network.privateSubnetIds" and "two zones" in problem.message
    [problem] = network_problems(config(network={**network, "vpcId": "vpc-0000000000000000e"}), account)
    assert problem.path == "adze:network.vpcId"


def test_a_caller_is_a_session_of_a_role_whatever_the_roles_path() -> None:
    session = Caller(ACCOUNT_ID, f"arn:aws:sts::{ACCOUNT_ID}:assumed-role/adze-prod-preview/github-123")
    assert session.is_role(PREVIEW_ROLE)  # arn:...:role/ci/adze-prod-preview
    assert not session.is_role(DEPLOYER_ROLE)
    assert not Caller("210987654321", "arn:aws:sts::210987654321:assumed-role/adze-prod-preview/x").is_role(
        PREVIEW_ROLE)
    assert not Caller(ACCOUNT_ID, f"arn:aws:iam::{ACCOUNT_ID}:user/adze-prod-preview").is_role(PREVIEW_ROLE)


# --- the program, under mocks: failures come before any registration ---------------------------------------


def assert_fails_before_any_resource(overrides: dict[str, Any], *expected: str) -> None:
    error, run = run_failing_program({**stack_file_config("staging"), **overrides}, stack="staging")
    message = str(error)
    assert "Traceback" not in message
    for line in expected:
        assert line in message, message
    assert run.registrations == [], [r.typ for r in run.registrations]


def test_preview_fails_on_documented_ids_before_creating_anything() -> None:
    assert_fails_before_any_resource({"adze:network": DOCUMENTED_NETWORK},
                                     "adze:network.vpcId: 'vpc-0a1b2c3d4e5f60718' is an example id",
                                     "adze:network.privateSubnetIds[2]:")


def test_preview_fails_on_a_deployer_role_of_another_account_before_creating_anything() -> None:
    assert_fails_before_any_resource({"adze:deployerRoleArn": "arn:aws:iam::210987654321:role/admin"},
                                     "adze:deployerRoleArn: role is in account 210987654321, but the stack deploys "
                                     f"to account {ACCOUNT_ID}")


def test_preview_fails_on_subnets_the_account_lacks_before_creating_anything() -> None:
    network = {"mode": "existing", "vpcId": EXISTING_VPC,
               "privateSubnetIds": ["subnet-0b5e1e9d7c3a2f10a", "subnet-0123456789abcdef1"]}
    assert_fails_before_any_resource({"adze:network": network},
                                     "adze:network.privateSubnetIds[1]: subnet subnet-0123456789abcdef1 does not exist")


# --- the read-only preview identity ------------------------------------------------------------------------


def test_the_preview_role_gets_a_view_only_cluster_wide_access_entry(prod_with_ci_roles: ProgramRun,
                                                                     prod: ProgramRun) -> None:
    run = prod_with_ci_roles
    entry = run.one("aws:eks/accessEntry:AccessEntry", "-preview")
    assert (entry.inputs["principalArn"], entry.inputs["type"]) == (PREVIEW_ROLE, "STANDARD")
    view = run.one("aws:eks/accessPolicyAssociation:AccessPolicyAssociation", "-preview-view")
    assert view.inputs["policyArn"] == "arn:aws:eks::aws:cluster-access-policy/AmazonEKSAdminViewPolicy"
    assert view.inputs["accessScope"] == {"type": "cluster"}  # Nodes and the Karpenter objects are cluster-scoped
    assert view.inputs["principalArn"] == PREVIEW_ROLE
    assert not [e for e in prod.of_type("aws:eks/accessEntry:AccessEntry") if e.name.endswith("-preview")]


def test_a_preview_run_reads_the_cluster_as_the_preview_role_not_the_deployer() -> None:
    roles = {"adze:deployerRoleArn": DEPLOYER_ROLE, "adze:previewRoleArn": PREVIEW_ROLE}
    as_preview = run_stack("prod", caller_arn=f"arn:aws:sts::{ACCOUNT_ID}:assumed-role/adze-prod-preview/gha-1",
                           **roles)
    # Its own credentials: the preview role may not assume the deployer role (that would make it an admin).
    assert "providerCredentialOpts" not in as_preview.one("eks:index:Cluster").inputs
    as_deployer = run_stack("prod", **roles)
    assert as_deployer.one("eks:index:Cluster").inputs["providerCredentialOpts"] == {"roleArn": DEPLOYER_ROLE}


def test_the_preview_role_must_differ_from_the_deployer_role() -> None:
    with pytest.raises(ConfigError) as raised:
        config(deployerRoleArn=DEPLOYER_ROLE, previewRoleArn=DEPLOYER_ROLE)
    assert [p.path for p in raised.value.problems] == ["adze:previewRoleArn"]
