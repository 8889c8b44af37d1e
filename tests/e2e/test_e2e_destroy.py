"""``pulumi destroy`` end to end: nothing tagged for the cluster is left in AWS (fake API server + moto).

The deletion order is the one Pulumi derives from the program's dependencies: the dev stack runs under the
unit-test mocks (``tests/components/pulumi_harness.py``) and its registrations are replayed, in delete order,
against a live cluster whose reconciler runs with the stack's generated controller policies enforced:

* a NodePool is deleted in the foreground (its ``pulumi.com/deletionPropagationPolicy``): the API server marks
  it deleting, the garbage collector deletes the NodeClaims it owns, the NodeClaim finalizer drains them and
  terminates their instances, and the pool goes when they are gone;
* an EC2NodeClass is deleted and must go by itself: its ``karpenter.k8s.aws/termination`` finalizer deletes
  the class's launch templates and instance profiles first;
* the reconciler Deployment stops the reconciler; the controller's IAM policy attachments take their
  permissions away (so a step run too late would be denied, and leak).

Afterwards no instance, launch template or instance profile tagged for the cluster may remain.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from ctrl_harness import wait_for
from e2e_rig import E2E, e2e
from support.controller_iam import enforce_on_provider, enforcement, generated_policies

from reconciler.cloud.aws import tags as owned
from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.kube.api import EC2NODECLASS, NODECLAIM, NODEPOOL, NotFoundError
from reconciler.kube.memory import MemoryKube

_COMPONENTS = str(Path(__file__).resolve().parents[1] / "components")
FOREGROUND = "foregroundDeletion"


def dev_stack_deletion_order() -> list[Any]:
    """The dev stack's registrations in the order ``pulumi destroy`` deletes them (Pulumi mocks)."""
    if _COMPONENTS not in sys.path:
        sys.path.insert(0, _COMPONENTS)
    from pulumi_harness import run_stack

    return run_stack("dev").deletion_order()


async def gone(kube: MemoryKube, kind: Any, name: str) -> bool:
    try:
        await kube.get(kind, name)
    except NotFoundError:
        return True
    return False


async def delete_in_the_foreground(kube: MemoryKube, name: str) -> None:
    """What the API server and its garbage collector do for DELETE with propagationPolicy=Foreground."""
    pool = await kube.get(NODEPOOL, name)
    await kube.patch(NODEPOOL, name, {"metadata": {"finalizers": [*pool["metadata"].get("finalizers", []),
                                                                  FOREGROUND]}})
    await kube.delete(NODEPOOL, name)
    uid = pool["metadata"]["uid"]
    for claim in kube.objects(NODECLAIM):
        if any(owner.get("uid") == uid for owner in claim["metadata"].get("ownerReferences") or []):
            await kube.delete(NODECLAIM, claim["metadata"]["name"])

    async def dependents_gone() -> bool:
        return not any(any(o.get("uid") == uid for o in c["metadata"].get("ownerReferences") or [])
                       for c in kube.objects(NODECLAIM))

    assert await wait_for(dependents_gone, timeout=180), kube.objects(NODECLAIM)
    await kube.patch(NODEPOOL, name, {"metadata": {"finalizers": [
        f for f in (await kube.get(NODEPOOL, name))["metadata"]["finalizers"] if f != FOREGROUND]}})


def tagged_leftovers(aws: OfflineAWS) -> dict[str, list[str]]:
    ec2, iam = aws.client("ec2"), aws.client("iam")
    cluster_filter = [{"Name": f"tag:{owned.EKS_CLUSTER_NAME_TAG}", "Values": [aws.cluster]}]
    instances = [i["InstanceId"] for r in ec2.describe_instances(Filters=cluster_filter)["Reservations"]
                 for i in r["Instances"] if i["State"]["Name"] not in ("shutting-down", "terminated")]
    templates = [t["LaunchTemplateName"] for t in ec2.describe_launch_templates(Filters=cluster_filter)
                 ["LaunchTemplates"]]
    profiles = []
    for profile in iam.list_instance_profiles()["InstanceProfiles"]:
        tags = iam.get_instance_profile(InstanceProfileName=profile["InstanceProfileName"])["InstanceProfile"].get(
            "Tags", [])
        if {"Key": owned.cluster_tag(aws.cluster), "Value": "owned"} in tags:
            profiles.append(profile["InstanceProfileName"])
    return {"instances": instances, "launch-templates": templates, "instance-profiles": profiles}


async def test_destroy_in_pulumis_order_leaves_nothing_tagged_for_the_cluster(aws: OfflineAWS) -> None:
    order = await asyncio.to_thread(dev_stack_deletion_order)
    kinds = [r.inputs.get("kind") for r in order if r.typ.startswith("kubernetes:")]
    assert kinds.count("NodePool") == 1 and kinds.count("EC2NodeClass") == 1  # the dev stack's one pool and class

    policies = generated_policies(aws)
    guard = enforcement(aws, dict(policies))
    rig: E2E
    async with e2e(aws, replicas=4) as rig:
        replica = rig.replica()
        enforce_on_provider(guard, replica.cloud)
        rig.launch(replica)
        assert await wait_for(lambda: rig.converged(), timeout=180), await rig.inventory()
        before = tagged_leftovers(aws)
        assert before["instances"] and before["launch-templates"] and before["instance-profiles"], before

        kube = rig.server.kube
        pool = kube.objects(NODEPOOL)[0]["metadata"]["name"]
        nodeclass = kube.objects(EC2NODECLASS)[0]["metadata"]["name"]
        steps = []
        for registration in order:
            kind = registration.inputs.get("kind")
            if kind == "NodePool":
                await delete_in_the_foreground(kube, pool)
                steps.append("NodePool")
            elif kind == "EC2NodeClass":
                await kube.delete(EC2NODECLASS, nodeclass)
                assert await wait_for(lambda: gone(kube, EC2NODECLASS, nodeclass), timeout=90), \
                    kube.objects(EC2NODECLASS)
                steps.append("EC2NodeClass")
            elif kind == "Deployment" and registration.inputs["metadata"].get("namespace") == "adze":
                await replica.stop()
                steps.append("reconciler")
            elif registration.typ == "aws:iam/rolePolicyAttachment:RolePolicyAttachment" and \
                    registration.name.removeprefix("adze-dev-") in policies:
                guard.policies.remove(policies[registration.name.removeprefix("adze-dev-")])
                steps.append(f"policy {registration.name.removeprefix('adze-dev-')}")
        assert steps[:3] == ["NodePool", "EC2NodeClass", "reconciler"], steps
        assert len(steps) == 3 + len(policies), steps  # every controller policy was taken away, after the rest

    assert not guard.denials, guard.denied_report()
    assert tagged_leftovers(aws) == {"instances": [], "launch-templates": [], "instance-profiles": []}
