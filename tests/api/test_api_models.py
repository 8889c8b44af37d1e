"""Defaults, accessors and round-trips of the NodePool, NodeClaim and EC2NodeClass models."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from api_manifests import EC2NODECLASS, NODECLAIM, NODEPOOL, changed
from pydantic import ValidationError

from reconciler.api import EC2NodeClass, NodeClaim, NodePool, parse_object
from reconciler.api.crd_validation import apply_defaults, crd_schema, find_crd
from reconciler.api.nodepool import Budget
from reconciler.disruption.budgets import UNLIMITED, allowance, parse_budgets
from reconciler.model.resources import Resources

MINIMAL_NODEPOOL = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "minimal"},
    "spec": {
        "template": {
            "spec": {
                "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            }
        }
    },
}


def _nodepool(manifest: dict[str, Any]) -> NodePool:
    parsed = parse_object(manifest)
    assert isinstance(parsed, NodePool)
    return parsed


def test_nodepool_defaults_match_karpenter() -> None:
    pool = _nodepool(MINIMAL_NODEPOOL)
    assert pool.spec.template.spec.expire_after == "720h"
    assert pool.expire_after_seconds == 720 * 3600
    assert pool.spec.disruption.consolidate_after == "0s"
    assert pool.consolidate_after_seconds == 0
    assert pool.consolidation_policy == "WhenEmptyOrUnderutilized"
    assert [budget.nodes for budget in pool.budgets] == ["10%"]
    assert pool.weight_or_zero == 0
    assert pool.termination_grace_period_seconds is None
    assert pool.limits_resources() == Resources()
    assert not pool.is_static


@pytest.mark.parametrize(
    "manifest", [MINIMAL_NODEPOOL, NODEPOOL, NODECLAIM, EC2NODECLASS], ids=lambda m: m["kind"]
)
def test_model_defaults_equal_api_server_defaulting(
    manifest: dict[str, Any], crds: list[dict[str, Any]]
) -> None:
    crd = find_crd(manifest, crds)
    assert crd is not None
    assert parse_object(manifest).to_manifest() == apply_defaults(crd_schema(crd), manifest)


def test_never_durations_are_none() -> None:
    manifest = changed("NodePool", "spec.template.spec.expireAfter", "Never")
    manifest["spec"]["disruption"]["consolidateAfter"] = "Never"
    manifest["spec"]["template"]["spec"]["terminationGracePeriod"] = "1h30m"
    pool = _nodepool(manifest)
    assert pool.expire_after_seconds is None
    assert pool.consolidate_after_seconds is None
    assert pool.termination_grace_period_seconds == 5400


def test_nodepool_accessors() -> None:
    pool = _nodepool(changed("NodePool", "spec.weight", 40))
    assert pool.name == "default"
    assert pool.weight_or_zero == 40
    assert pool.limits_resources() == Resources.of(cpu="1000", memory="1000Gi")
    assert pool.requirements[1].integer_value == 2
    assert pool.requirements[0].integer_value is None


def test_null_fields_are_treated_as_absent() -> None:
    manifest = changed("NodePool", "spec.template.spec.expireAfter", None)
    manifest["spec"]["weight"] = None
    pool = _nodepool(manifest)
    assert pool.spec.template.spec.expire_after == "720h"
    assert pool.spec.weight is None


def test_legacy_label_keys_are_normalised() -> None:
    manifest = changed(
        "NodePool",
        "spec.template.spec.requirements[0]",
        {"key": "beta.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
    )
    requirement = _nodepool(manifest).requirements[0]
    assert requirement.key == "beta.kubernetes.io/instance-type"  # stored as written
    assert requirement.normalized_key == "node.kubernetes.io/instance-type"


def test_well_known_and_custom_keys_are_allowed() -> None:
    manifest = copy.deepcopy(MINIMAL_NODEPOOL)
    manifest["spec"]["template"]["spec"]["requirements"] += [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
        {"key": "karpenter.k8s.aws/instance-family", "operator": "Exists", "minValues": 5},
        {"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["us-east-1a"]},
        {"key": "node.kubernetes.io/custom", "operator": "DoesNotExist"},
        {"key": "example.com/team", "operator": "In", "values": ["a", "b"], "minValues": 2},
        {"key": "karpenter.k8s.aws/instance-memory", "operator": "Lte", "values": ["65536"]},
    ]
    manifest["spec"]["template"]["metadata"] = {
        "labels": {"node.kubernetes.io/role": "worker", "k8s.io/x": "y"}
    }
    assert len(_nodepool(manifest).requirements) == 7


def test_runtime_problems_flag_unknown_capacity_types() -> None:
    manifest = changed(
        "NodePool",
        "spec.template.spec.requirements[0]",
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["preemptible"]},
    )
    assert _nodepool(manifest).runtime_problems() == [
        "spec.template.spec.requirements[0]: none of ['preemptible'] is a known value of karpenter.sh/capacity-type "
        "(expected one of ['on-demand', 'reserved', 'spot'])"
    ]
    assert _nodepool(NODEPOOL).runtime_problems() == []


def _allowed(pool: NodePool, now: datetime, node_count: int, reason: str) -> int:
    """What the disruption engine allows for a validated NodePool model (the one budget evaluator)."""
    return allowance(pool.name, parse_budgets(pool.budgets), reason, node_count=node_count, disrupting=0, now=now).limit


def test_budgets_follow_their_schedule_in_utc() -> None:
    pool = _nodepool(NODEPOOL)  # 10% always; 0 nodes on weekdays 09:00-17:00 UTC
    monday_morning = datetime(2024, 1, 1, 10, 0, tzinfo=UTC)
    monday_evening = datetime(2024, 1, 1, 17, 0, tzinfo=UTC)
    sunday_morning = datetime(2023, 12, 31, 10, 0, tzinfo=UTC)
    assert _allowed(pool, monday_morning, 25, "Underutilized") == 0
    assert _allowed(pool, monday_evening, 25, "Underutilized") == 3  # ceil(10% of 25)
    assert _allowed(pool, sunday_morning, 25, "Drifted") == 3


def test_budget_reasons_limit_what_they_apply_to() -> None:
    manifest = changed(
        "NodePool", "spec.disruption.budgets", [{"nodes": "0", "reasons": ["Drifted"]}, {"nodes": "5"}]
    )
    pool = _nodepool(manifest)
    now = datetime(2024, 1, 1, tzinfo=UTC)
    assert _allowed(pool, now, 100, "Drifted") == 0
    assert _allowed(pool, now, 100, "Empty") == 5
    assert _allowed(_nodepool(changed("NodePool", "spec.disruption.budgets", [])), now, 9, "Empty") == UNLIMITED


def test_budget_model_window_is_read_by_the_engine() -> None:
    [budget] = parse_budgets([Budget(nodes="0", schedule="@daily", duration="10m")])
    assert budget.duration == 600
    assert budget.is_active(datetime(2024, 1, 1, 0, 0, tzinfo=UTC))
    assert budget.is_active(datetime(2024, 1, 1, 0, 9, 59, tzinfo=UTC))
    assert not budget.is_active(datetime(2024, 1, 1, 0, 10, tzinfo=UTC))


def test_nodeclaim_accessors_and_status_round_trip() -> None:
    manifest = copy.deepcopy(NODECLAIM)
    manifest["status"] = {
        "nodeName": "ip-10-0-0-1.ec2.internal",
        "providerID": "aws:///us-east-1a/i-0123456789abcdef0",
        "imageID": "ami-0123",
        "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
        "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
        "lastPodEventTime": "2024-01-01T00:00:00Z",
        "conditions": [
            {
                "type": "Launched",
                "status": "True",
                "reason": "Launched",
                "lastTransitionTime": "2024-01-01T00:00:00Z",
            },
            {
                "type": "Ready",
                "status": "False",
                "reason": "NotInitialized",
                "message": "waiting",
                "lastTransitionTime": "2024-01-01T00:00:00Z",
                "observedGeneration": 1,
            },
        ],
    }
    claim = parse_object(manifest)
    assert isinstance(claim, NodeClaim)
    assert claim.nodepool_name == "default"
    assert claim.requests() == Resources.of(cpu="1500m", memory="3Gi", pods=7)
    assert claim.capacity()["memory"] == 8 * 2**30 * 1000
    assert claim.is_condition_true("Launched") and not claim.is_condition_true("Ready")
    assert claim.expire_after_seconds == 720 * 3600
    assert claim.status is not None and claim.status.provider_id == manifest["status"]["providerID"]
    dumped = claim.to_manifest()
    assert dumped["status"]["lastPodEventTime"] == "2024-01-01T00:00:00Z"
    assert dumped["status"]["providerID"] == manifest["status"]["providerID"]
    assert parse_object(dumped) == claim


def test_nodepool_status_round_trip() -> None:
    manifest = copy.deepcopy(NODEPOOL)
    manifest["status"] = {
        "resources": {"cpu": "16", "memory": "64Gi", "nodes": "4"},
        "nodes": 4,
        "nodeClassObservedGeneration": 2,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Ready",
                "lastTransitionTime": "2024-01-01T00:00:00Z",
            }
        ],
    }
    pool = _nodepool(manifest)
    assert pool.status is not None and pool.status.is_true("Ready") and pool.status.nodes == 4
    assert parse_object(pool.to_manifest()) == pool
    assert parse_object(pool.model_dump(by_alias=True, exclude_none=True)) == pool


def test_ec2nodeclass_defaults_and_family() -> None:
    nodeclass = parse_object(EC2NODECLASS)
    assert isinstance(nodeclass, EC2NodeClass)
    options = nodeclass.spec.metadata_options
    assert (
        options.http_endpoint,
        options.http_protocol_ipv6,
        options.http_put_response_hop_limit,
        options.http_tokens,
    ) == (
        "enabled",
        "disabled",
        1,
        "required",
    )
    assert nodeclass.spec.resolved_ami_family == "AL2023"
    assert nodeclass.spec.ami_selector_terms[0].alias_version == "latest"


def test_ec2nodeclass_custom_family_needs_ami_family() -> None:
    manifest = changed(
        "EC2NodeClass", "spec.amiSelectorTerms", [{"id": "ami-123"}, {"name": "my-ami", "owner": "self"}]
    )
    manifest["spec"]["amiFamily"] = "Custom"
    nodeclass = parse_object(manifest)
    assert isinstance(nodeclass, EC2NodeClass)
    assert nodeclass.spec.resolved_ami_family == "Custom"


def test_ec2nodeclass_full_spec_round_trips() -> None:
    manifest = copy.deepcopy(EC2NODECLASS)
    manifest["spec"].update(
        {
            "instanceProfile": "KarpenterNodeInstanceProfile",
            "subnetSelectorTerms": [{"tags": {"Name": "*private*"}}, {"id": "subnet-0abc"}],
            "securityGroupSelectorTerms": [{"name": "eks-cluster-sg"}, {"id": "sg-0abc"}],
            "capacityReservationSelectorTerms": [{"tags": {"team": "ml"}, "ownerID": "123456789012"}],
            "placementGroupSelector": {"name": "my-pg"},
            "associatePublicIPAddress": False,
            "ipPrefixCount": 1,
            "userData": "echo hi",
            "tags": {"team": "payments"},
            "kubelet": {
                "maxPods": 110,
                "podsPerCore": 4,
                "systemReserved": {"cpu": "100m", "memory": "100Mi"},
                "kubeReserved": {"cpu": "200m"},
                "evictionHard": {"memory.available": "5%", "nodefs.available": "10Gi"},
                "evictionSoft": {"memory.available": "10%"},
                "evictionSoftGracePeriod": {"memory.available": "1m30s"},
                "imageGCHighThresholdPercent": 85,
                "imageGCLowThresholdPercent": 80,
                "cpuCFSQuota": True,
                "clusterDNS": ["10.100.0.10"],
                "containerLogMaxSize": "50Mi",
            },
            "blockDeviceMappings": [
                {
                    "deviceName": "/dev/xvda",
                    "rootVolume": True,
                    "ebs": {
                        "volumeSize": "100Gi",
                        "volumeType": "gp3",
                        "iops": 3000,
                        "throughput": 125,
                        "encrypted": True,
                        "kmsKeyID": "arn:aws:kms:us-east-1:1:key/x",
                        "deleteOnTermination": True,
                    },
                },
                {"deviceName": "/dev/xvdb", "ebs": {"snapshotID": "snap-1", "volumeInitializationRate": 200}},
            ],
            "instanceStorePolicy": "RAID0",
            "networkInterfaces": [
                {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
                {"networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "efa-only"},
            ],
            "detailedMonitoring": True,
            "metadataOptions": {"httpTokens": "optional"},
            "connectionTracking": {"tcpEstablishedTimeout": 600},
            "context": "cfr-123",
            "cpuOptions": {"nestedVirtualization": "enabled"},
        }
    )
    del manifest["spec"]["role"]
    nodeclass = parse_object(manifest)
    assert isinstance(nodeclass, EC2NodeClass)
    assert nodeclass.spec.metadata_options.http_tokens == "optional"
    assert nodeclass.spec.metadata_options.http_put_response_hop_limit == 1  # defaulted inside the object
    assert nodeclass.spec.kubelet is not None and nodeclass.spec.kubelet.model_extra == {
        "containerLogMaxSize": "50Mi"
    }
    dumped = nodeclass.to_manifest()
    assert dumped["spec"]["kubelet"]["containerLogMaxSize"] == "50Mi"
    assert dumped["spec"]["blockDeviceMappings"][0]["ebs"]["kmsKeyID"].startswith("arn:")
    assert parse_object(dumped) == nodeclass


def test_quantities_keep_their_written_form() -> None:
    manifest = changed("NodePool", "spec.limits", {"cpu": 100, "memory": "512Gi", "nvidia.com/gpu": 0.5})
    pool = _nodepool(manifest)
    assert pool.spec.limits == {"cpu": 100, "memory": "512Gi", "nvidia.com/gpu": "0.5"}
    assert pool.limits_resources()["nvidia.com/gpu"] == 500


def test_models_are_immutable() -> None:
    pool = _nodepool(NODEPOOL)
    with pytest.raises(ValidationError):
        pool.spec.weight = 5  # type: ignore[misc]
    updated = pool.model_copy(update={"metadata": pool.metadata.model_copy(update={"name": "other"})})
    assert updated.name == "other" and pool.name == "default"


def test_models_accept_python_field_names() -> None:
    budget = Budget.model_validate({"nodes": "1", "schedule": "@hourly", "duration": "30m"})
    assert Budget(nodes="1", schedule="@hourly", duration="30m") == budget
    assert NodePool.model_validate(MINIMAL_NODEPOOL).model_dump(by_alias=True, exclude_none=True)["spec"][
        "template"
    ]["spec"]["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def test_unknown_metadata_keys_are_kept() -> None:
    manifest = changed("EC2NodeClass", "metadata", {"name": "x", "futureField": {"a": 1}, "uid": "123"})
    nodeclass = parse_object(manifest)
    assert nodeclass.to_manifest()["metadata"] == {"name": "x", "futureField": {"a": 1}, "uid": "123"}
