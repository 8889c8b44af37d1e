"""EC2NodeClass ``ValidationSucceeded`` by authorization dry runs, and ``DISABLE_DRY_RUN``.

The dry runs are the real calls with ``DryRun=True``: moto answers ``DryRunOperation`` when
permitted, and the generated controller policies are enforced on every call, so removing a
permission the launch path needs turns the condition False with upstream's reason.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from aws_harness import FaultPlan, Recorder, make_provider

from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.cloud.types import LaunchRequest, NodeClassNotReadyError
from reconciler.controllers.operator.cloud_from_settings import StartupError, _flag


def condition(status: dict[str, Any], kind: str = "ValidationSucceeded") -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == kind)


def launch(name: str = "nc-1") -> LaunchRequest:
    return LaunchRequest(nodeclaim=name, nodepool="default", nodeclass="default", instance_types=["m5.large"])


async def test_dry_runs_pass_once_and_are_kept(aws: OfflineAWS, provider) -> None:
    recorder = Recorder().attach(provider)
    nodeclass = aws.nodeclass(tags={"team": "a"})
    assert condition(await provider.nodeclass_status(nodeclass))["status"] == "True"
    fleet = recorder.of("CreateFleet", dry_run=True)
    run = recorder.of("RunInstances", dry_run=True)
    assert len(fleet) == 1 and len(run) == 1 and not recorder.of("CreateFleet")
    assert {o["SubnetId"] for o in fleet[0]["LaunchTemplateConfigs"][0]["Overrides"]} == set(aws.subnet_ids.values())
    assert run[0]["SubnetId"] in aws.subnet_ids.values() and run[0]["InstanceType"] == "m5.large"
    tags = {t["Key"]: t["Value"] for t in run[0]["TagSpecifications"][0]["Tags"]}
    assert tags["team"] == "a" and tags[f"kubernetes.io/cluster/{aws.cluster}"] == "owned"
    # Kept for 30 minutes: a re-resolve (the 1-minute NodeClass cache gone) makes no new dry run.
    provider._nodeclass_cache.clear()
    await provider.nodeclass_status(nodeclass)
    assert provider.validator.calls == 1 and len(recorder.of("RunInstances", dry_run=True)) == 1
    await provider.create(launch(), nodeclass)


@pytest.mark.parametrize(
    ("action", "reason"),
    [("CreateFleet", "CreateFleetAuthCheckFailed"), ("RunInstances", "RunInstancesAuthCheckFailed"),
     ("CreateLaunchTemplate", "CreateLaunchTemplateAuthCheckFailed")],
)
async def test_an_unauthorized_dry_run_keeps_the_class_not_ready(
    aws: OfflineAWS, provider, faults: FaultPlan, action: str, reason: str
) -> None:
    if action == "CreateLaunchTemplate":
        faults.whole_call_errors[action] = "UnauthorizedOperation"  # the validation's template is real
    else:
        faults.dry_run_errors[action] = "UnauthorizedOperation"
    nodeclass = aws.nodeclass()
    status = await provider.nodeclass_status(nodeclass)
    validation = condition(status)
    assert (validation["status"], validation["reason"]) == ("False", reason)
    assert f"Controller isn't authorized to call ec2:{action}" in validation["message"]
    assert condition(status, "Ready")["status"] == "False"
    with pytest.raises(NodeClassNotReadyError, match=f"Controller isn't authorized to call ec2:{action}"):
        await provider.create(launch(), nodeclass)


@pytest.mark.parametrize(
    ("removed", "reason"),
    [("ec2:CreateLaunchTemplate", "CreateLaunchTemplateAuthCheckFailed"),
     # An instant fleet launches with the caller's own permissions: without RunInstances it is refused too.
     ("ec2:RunInstances", "CreateFleetAuthCheckFailed")],
)
async def test_a_policy_without_a_launch_permission_fails_validation(aws: OfflineAWS, removed: str,
                                                                     reason: str) -> None:
    from support.controller_iam import enforce_on_provider, enforcement, generated_policies

    policies = copy.deepcopy(generated_policies(aws))
    for document in policies.values():
        for statement in document["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            statement["Action"] = [a for a in actions if a != removed] or ["ec2:DescribeImages"]
    provider = make_provider(aws)
    guard = enforce_on_provider(enforcement(aws, policies), provider)
    try:
        validation = condition(await provider.nodeclass_status(aws.nodeclass()))
    finally:
        provider.close()
    assert (validation["status"], validation["reason"]) == ("False", reason)
    assert guard.denials and all(d.check.action == removed for d in guard.denials)


async def test_throttled_dry_runs_are_retried_not_kept(aws: OfflineAWS, provider, faults: FaultPlan) -> None:
    faults.dry_run_errors["RunInstances"] = "RequestLimitExceeded"
    nodeclass = aws.nodeclass()
    validation = condition(await provider.nodeclass_status(nodeclass))
    assert (validation["status"], validation["reason"]) == ("False", "DryRunRetrying")
    faults.dry_run_errors.clear()
    assert condition(await provider.nodeclass_status(nodeclass))["status"] == "True"
    assert provider.validator.calls == 2


async def test_disable_dry_run_skips_the_checks(aws: OfflineAWS) -> None:
    provider = make_provider(aws, disable_dry_run=True)
    recorder = Recorder().attach(provider)
    try:
        status = await provider.nodeclass_status(aws.nodeclass())
    finally:
        provider.close()
    assert condition(status)["status"] == "True"
    assert not recorder.of("CreateFleet", dry_run=True) and not recorder.of("RunInstances", dry_run=True)
    assert not recorder.of("CreateLaunchTemplate")


async def test_validation_waits_for_the_class_dependencies(aws: OfflineAWS, provider) -> None:
    status = await provider.nodeclass_status(aws.nodeclass(subnetSelectorTerms=[{"tags": {"nobody": "x"}}]))
    validation = condition(status)
    assert (validation["status"], validation["reason"]) == ("False", "DependenciesNotReady")
    assert provider.validator.calls == 0


async def test_user_data_no_launch_could_use_fails_validation(aws: OfflineAWS, provider) -> None:
    nodeclass = aws.nodeclass(amiSelectorTerms=[{"alias": "bottlerocket@latest"}], userData="[settings\n")
    validation = condition(await provider.nodeclass_status(nodeclass))
    assert (validation["status"], validation["reason"]) == ("False", "InvalidUserData")
    assert "spec.userData: not valid Bottlerocket TOML" in validation["message"]


def test_disable_dry_run_setting_is_read_strictly() -> None:
    assert _flag({"DISABLE_DRY_RUN": "true"}, "DISABLE_DRY_RUN") is True
    assert _flag({}, "DISABLE_DRY_RUN") is False
    with pytest.raises(StartupError, match="DISABLE_DRY_RUN: 'yes please' must be true or false"):
        _flag({"DISABLE_DRY_RUN": "yes please"}, "DISABLE_DRY_RUN")
