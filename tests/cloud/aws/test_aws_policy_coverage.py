"""Policy versus code: every AWS operation the reconciler can call is exercised through the real code paths
against moto, authorized against the stack's generated controller policies (``support.aws_authz``: the ARNs
and request/resource tags the code actually sends), and must be allowed.

* The operations come from the source (every boto3 method or paginator name under ``reconciler/`` that the
  controller process can reach), so a new call site fails here until the exercise covers it.
* Each statement of the generated policies is then removed in turn and the recorded authorizations replayed:
  every statement must be needed by some call, except the two upstream statements Adze's code does not use
  (named below with the reason). So removing any statement the code needs makes this test fail, and a
  statement that stops being needed shows up too.
"""

from __future__ import annotations

import ast
import copy
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore import xform_name
from support.aws_authz import Check
from support.controller_iam import enforce_on_provider, enforcement, generated_policies
from support.iam_policy import evaluate

from reconciler.cloud.aws import clients as aws_clients
from reconciler.cloud.aws import tags as owned
from reconciler.cloud.aws.capacityreservation import CapacityReservation
from reconciler.cloud.aws.gc import collect_orphans
from reconciler.cloud.aws.nodeclass import managed_profile_path
from reconciler.cloud.aws.offline import OfflineAWS
from reconciler.cloud.aws.provider import AWSCloudProvider
from reconciler.cloud.types import LaunchRequest
from reconciler.controllers.operator.cloud_from_settings import check_ec2_access, discover_cluster
from reconciler.interruption.health import HealthPoller
from reconciler.interruption.queue_consumer import InterruptionQueueConsumer, InterruptionSettings
from reconciler.kube.memory import MemoryKube
from reconciler.settings import Settings

REPO = Path(__file__).resolve().parents[3]
# What the controller process never runs: moto tooling (offline simulation, fault patches), and the offline
# commands (insight's live catalogue reads with the user's own identity, the simulator).
NOT_THE_CONTROLLER = ("reconciler/cloud/aws/offline.py", "reconciler/cloud/aws/moto_patches.py",
                      "reconciler/insight/", "reconciler/sim/")
SERVICES = ("ec2", "iam", "ssm", "sqs", "pricing", "eks")
RESERVATION = "cr-0c0ffee000000000a"
# Upstream statements Adze keeps for parity with Karpenter's policy but its code does not need.
NOT_NEEDED = {
    "AllowScopedResourceTagging": "post-registration ec2:CreateTags: Adze tags the NodeClaim name at launch",
    "AllowScopedInstanceProfileTagActions": "re-tagging an existing instance profile: Adze never does",
}


def operations_in_source() -> set[str]:
    """``service:Operation`` for every operation name the controller's source mentions (method or paginator)."""
    session = botocore.session.get_session()
    by_name: dict[str, set[str]] = {}
    for service in SERVICES:
        model = session.get_service_model(service)
        for operation in model.operation_names:
            by_name.setdefault(xform_name(operation), set()).add(f"{model.signing_name}:{operation}")
    found: set[str] = set()
    for path in sorted((REPO / "reconciler").rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        if relative.startswith(NOT_THE_CONTROLLER):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            name = node.attr if isinstance(node, ast.Attribute) else (
                node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None)
            if name in by_name:
                operations = by_name[name]
                assert len(operations) == 1, f"{relative}: {name} is ambiguous across services {operations}"
                found |= operations
    return found


def launch(name: str, capacity_type: str) -> LaunchRequest:
    return LaunchRequest(nodeclaim=name, nodepool="general", nodeclass="default",
                         instance_types=["m5.large", "c5.large"], capacity_types=[capacity_type])


async def exercise(aws: OfflineAWS, provider: AWSCloudProvider, queue: str, monkeypatch: pytest.MonkeyPatch,
                   attach: Any) -> None:
    """Every path of the controller that calls AWS, the way the controllers call it."""
    # Start-up: the EC2 check and the cluster discovery (its own eks client).
    await check_ec2_access(provider)
    aws.client("eks").create_cluster(name=aws.cluster, version="1.32", roleArn="arn:aws:iam::123456789012:role/eks",
                                     resourcesVpcConfig={"subnetIds": list(aws.subnet_ids.values())})
    real_session = aws_clients.new_session

    class AttachedSession:  # the discovery's session, whose clients the guard sees
        def __init__(self, **options: Any) -> None:
            self.session = real_session(**options)

        def client(self, *a: Any, **kw: Any) -> Any:
            return attach(self.session.client(*a, **kw))

    monkeypatch.setattr(aws_clients, "new_session", AttachedSession)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    settings = Settings(cluster_name=aws.cluster, aws_region=aws.region, interruption_queue=queue)
    await discover_cluster(settings, {"AWS_ENDPOINT_URL": aws.endpoint_url}, MemoryKube())
    monkeypatch.setattr(aws_clients, "new_session", real_session)

    # The node class (subnets, security groups, AMIs through SSM, the managed instance profile), then a
    # role change on an existing profile (the stale role is removed, the node role added).
    nodeclass = aws.nodeclass()
    status = await provider.nodeclass_status(nodeclass)
    assert status["instanceProfile"], status
    iam = aws.client("iam")
    iam.create_role(RoleName=f"{aws.cluster}-old", AssumeRolePolicyDocument="{}")
    stale = f"{aws.cluster}_stale"
    iam.create_instance_profile(InstanceProfileName=stale, Path=managed_profile_path(aws.cluster, aws.region, "x"),
                                Tags=[{"Key": k, "Value": v} for k, v in {
                                    owned.cluster_tag(aws.cluster): "owned", owned.EKS_CLUSTER_NAME_TAG: aws.cluster,
                                    owned.NODECLASS_TAG: "old", owned.REGION_TAG: aws.region}.items()])
    iam.add_role_to_instance_profile(InstanceProfileName=stale, RoleName=f"{aws.cluster}-old")
    await provider.nodeclasses.ensure_instance_profile(stale, aws.node_role, "old", "x", {})
    # A class in a placement group (resolved by name).
    aws.client("ec2").create_placement_group(GroupName=f"{aws.cluster}-pg", Strategy="cluster")
    grouped = await provider.nodeclass_status(aws.nodeclass(placementGroupSelector={"name": f"{aws.cluster}-pg"}))
    assert all(c["status"] == "True" for c in grouped["conditions"]), grouped["conditions"]

    # Instance types, offerings and prices (moto has no Pricing API: the call is authorized, then fails).
    await provider.instance_types(nodeclass)
    await provider.refresh_prices()

    # Launches (spot and on-demand: launch templates, CreateFleet), reads, drift, termination, orphans.
    spot = await provider.create(launch("spot-1", "spot"), nodeclass)
    on_demand = await provider.create(launch("od-1", "on-demand"), nodeclass)
    assert (spot.capacity_type, on_demand.capacity_type) == ("spot", "on-demand")
    # Capacity reservations: resolved (DescribeCapacityReservations), launched into (the reservation's ARN is
    # used by the fleet), described again for capacity-block expiry.
    aws.add_capacity_reservation(CapacityReservation(
        id=RESERVATION, instance_type="m5.large", zone=aws.zones[0], owner_id=aws.account_id, available=1, total=1,
        tags={"team": aws.cluster}))
    reserved_class = aws.nodeclass("reserved", capacityReservationSelectorTerms=[{"tags": {"team": aws.cluster}}])
    reserved = await provider.create(launch("reserved-1", "reserved"), reserved_class)
    assert reserved.capacity_type == "reserved"
    assert list(await provider.capacity_reservations([RESERVATION])) == [RESERVATION]
    await provider.get(spot.provider_id)
    await provider.list()
    await provider.is_drifted(spot, nodeclass)
    await provider.delete(spot.provider_id)
    orphans = await collect_orphans(provider, [], datetime.now(UTC) + timedelta(hours=1))
    assert sorted(orphans) == sorted([on_demand.provider_id, reserved.provider_id])

    # The interruption queue and the instance-status poller.
    kube = MemoryKube()
    consumer = InterruptionQueueConsumer(kube, provider.clients.client("sqs"),
                                         InterruptionSettings(queue, wait_seconds=0),
                                         caller=provider.caller, unavailable=provider.unavailable)
    aws.client("sqs").send_message(QueueUrl=await consumer.queue_url(), MessageBody="not an event")
    assert await consumer.poll_once() == 1  # received, and the malformed message deleted
    await HealthPoller(kube, provider.clients.ec2, provider.caller).poll_once()

    # Launch-template upkeep, the EC2NodeClass finalizer's cleanup, and instance-profile garbage collection.
    provider.launch_templates.clock = lambda: float("inf")  # every cached template has expired
    await provider.launch_templates.delete_unused(aws.cluster)
    await provider.delete_nodeclass_resources(nodeclass)
    await provider.nodeclasses.garbage_collect_instance_profiles(set())


def needed_statements(policies: dict[str, dict[str, Any]], checks: list[Check]) -> dict[str, str]:
    """Sid -> the first recorded authorization that only it allows."""
    needed: dict[str, str] = {}
    for name, document in policies.items():
        for index, statement in enumerate(document["Statement"]):
            mutated = copy.deepcopy(policies)
            del mutated[name]["Statement"][index]
            for check in checks:
                if not evaluate(mutated.values(), check.request()).allowed:
                    needed[statement["Sid"]] = check.describe()
                    break
    return needed


async def test_every_aws_call_of_the_reconciler_is_allowed_and_every_statement_is_needed(
        aws: OfflineAWS, monkeypatch: pytest.MonkeyPatch) -> None:
    from aws_harness import make_provider

    queue = f"{aws.cluster}-interruption"
    kms = aws.client("kms").create_key(Description="interruption queue")["KeyMetadata"]
    aws.client("sqs").create_queue(QueueName=queue, Attributes={"KmsMasterKeyId": kms["KeyId"]})
    policies = generated_policies(aws, queue=queue, kms_key_arn=kms["Arn"])
    guard = enforcement(aws, policies)
    provider = make_provider(aws)
    enforce_on_provider(guard, provider)
    failure: Exception | None = None
    try:
        await exercise(aws, provider, queue, monkeypatch, guard.attach)
    except Exception as err:  # a denied call usually derails the exercise: report the denial first
        failure = err
    finally:
        provider.close()

    assert not guard.denials, "calls the generated controller policies deny:\n" + guard.denied_report()
    if failure is not None:
        raise failure
    in_source = operations_in_source()
    assert in_source - guard.operations == set(), "operations the exercise does not reach; extend it"
    assert guard.operations - in_source == set(), "calls the source scan cannot see; fix the scan"

    needed = needed_statements(policies, guard.checks)
    every = {s["Sid"] for document in policies.values() for s in document["Statement"]}
    assert every - set(needed) == set(NOT_NEEDED), {sid: needed.get(sid) for sid in every}


@pytest.mark.parametrize("declared", [True, False])
async def test_a_node_class_ssm_parameter_is_readable_only_when_the_stack_declares_it(aws: OfflineAWS,
                                                                                       declared: bool) -> None:
    """``amiSelectorTerms[].ssmParameter`` outside AWS's public parameters: the stack adds its ARN to the policy
    (components.karpenter_config.ami_ssm_parameters), else the reconciler could not resolve the class's AMIs."""
    from aws_harness import make_provider

    name = f"/{aws.cluster}/ami"
    aws.client("ssm").put_parameter(Name=name, Value=aws.ami_ids["amd64/standard"], Type="String")
    guard = enforcement(aws, generated_policies(aws, ssm_parameters=(name,) if declared else ()))
    provider = make_provider(aws)
    enforce_on_provider(guard, provider)
    try:
        status = await provider.nodeclass_status(aws.nodeclass(amiSelectorTerms=[{"ssmParameter": name}]))
    finally:
        provider.close()
    ready = {c["type"]: c["status"] for c in status["conditions"]}["AMIsReady"]
    if declared:
        assert not guard.denials and ready == "True"
    else:
        assert [d.check.action for d in guard.denials] == ["ssm:GetParameter"] and ready == "False"


async def test_a_reserved_launch_needs_the_capacity_reservation_resource(aws: OfflineAWS) -> None:
    """``capacity-reservation/*`` in AllowScopedEC2InstanceAccessActions is what lets a fleet launch into a
    reservation: without it the targeted launch is denied (with it, the exercise above passes)."""
    from aws_harness import make_provider

    policies = generated_policies(aws)
    for document in policies.values():
        for statement in document["Statement"]:
            if statement["Sid"] == "AllowScopedEC2InstanceAccessActions":
                statement["Resource"] = [r for r in statement["Resource"] if "capacity-reservation" not in r]
    guard = enforcement(aws, policies)
    provider = make_provider(aws)
    enforce_on_provider(guard, provider)
    aws.add_capacity_reservation(CapacityReservation(
        id=RESERVATION, instance_type="m5.large", zone=aws.zones[0], owner_id=aws.account_id, available=1, total=1,
        tags={"team": aws.cluster}))
    try:
        with pytest.raises(Exception, match=r"UnauthorizedOperation|AccessDenied|denied"):
            await provider.create(launch("reserved-1", "reserved"),
                                  aws.nodeclass(capacityReservationSelectorTerms=[{"id": RESERVATION}]))
    finally:
        provider.close()
    assert {(d.check.action, d.check.resource.rsplit(":", 1)[-1]) for d in guard.denials} >= {
        ("ec2:CreateFleet", f"capacity-reservation/{RESERVATION}")}
