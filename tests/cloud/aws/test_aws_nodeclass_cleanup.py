"""What the EC2NodeClass finalizer deletes on AWS: the class's launch templates and managed instance profiles,
nothing of another class and never a profile the class only names (moto, calls enforced by the generated
controller policies)."""

from __future__ import annotations

from reconciler.cloud.aws import tags as owned
from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.cloud.types import LaunchRequest


def launch(name: str, nodeclass: str) -> LaunchRequest:
    return LaunchRequest(nodeclaim=name, nodepool="default", nodeclass=nodeclass, instance_types=["m5.large"])


def templates_of(aws: OfflineAWS, nodeclass: str) -> list[str]:
    found = aws.client("ec2").describe_launch_templates(Filters=[
        {"Name": f"tag:{owned.EKS_CLUSTER_NAME_TAG}", "Values": [aws.cluster]},
        {"Name": f"tag:{owned.NODECLASS_TAG}", "Values": [nodeclass]},
    ])["LaunchTemplates"]
    return [t["LaunchTemplateName"] for t in found]


def profiles(aws: OfflineAWS) -> set[str]:
    return {p["InstanceProfileName"] for p in aws.client("iam").list_instance_profiles()["InstanceProfiles"]}


async def test_cleanup_deletes_only_the_class_own_templates_and_profiles(aws: OfflineAWS, provider) -> None:
    first, second = aws.nodeclass("first"), aws.nodeclass("second")
    for nodeclass in (first, second):
        instance = await provider.create(launch(f"nc-{nodeclass['metadata']['name']}", nodeclass["metadata"]["name"]),
                                         nodeclass)
        await provider.delete(instance.provider_id)
    first_profile = (await provider.nodeclass_status(first))["instanceProfile"]
    second_profile = (await provider.nodeclass_status(second))["instanceProfile"]
    assert templates_of(aws, "first") and templates_of(aws, "second")

    deleted = await provider.delete_nodeclass_resources(first)
    assert deleted["instance-profiles"] == [first_profile]
    assert sorted(deleted["launch-templates"]) == sorted(set(deleted["launch-templates"])) != []
    assert templates_of(aws, "first") == []
    assert templates_of(aws, "second") != []
    assert first_profile not in profiles(aws) and second_profile in profiles(aws)
    # Idempotent: a retried finalizer pass finds nothing left and succeeds.
    assert await provider.delete_nodeclass_resources(first) == {"launch-templates": [], "instance-profiles": []}


async def test_a_profile_the_class_only_names_is_never_deleted(aws: OfflineAWS, provider) -> None:
    iam = aws.client("iam")
    iam.create_instance_profile(InstanceProfileName=f"{aws.cluster}-shared")
    nodeclass = aws.nodeclass("named", role=None, instanceProfile=f"{aws.cluster}-shared")
    nodeclass["spec"].pop("role")
    assert (await provider.nodeclass_status(nodeclass))["instanceProfile"] == f"{aws.cluster}-shared"
    # The validation dry run's launch template goes with the class; the named profile stays.
    deleted = await provider.delete_nodeclass_resources(nodeclass)
    assert deleted["instance-profiles"] == [] and len(deleted["launch-templates"]) == 1
    assert f"{aws.cluster}-shared" in profiles(aws)
