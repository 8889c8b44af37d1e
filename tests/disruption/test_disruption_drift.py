from __future__ import annotations

import copy
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from disruption_factories import NOW, ts

from reconciler.cloud.types import InstanceType, Offering
from reconciler.disruption.drift_detection import (
    INSTANCE_TYPE_NOT_FOUND,
    NODECLASS_DRIFTED,
    NODEPOOL_DRIFTED,
    REQUIREMENTS_DRIFTED,
    drift_reason,
)
from reconciler.model.node import NodeClaim
from reconciler.model.nodepool import NodePool
from reconciler.model.resources import Resources
from reconciler.provisioning.drift_hashes import (
    NODEPOOL_HASH_VERSION,
    nodeclass_hash,
    nodeclass_hash_annotations,
    nodepool_hash,
    nodepool_hash_annotations,
)


def nodepool() -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {
                "metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        {
                            "key": "karpenter.sh/capacity-type",
                            "operator": "In",
                            "values": ["on-demand", "spot"],
                        },
                    ],
                    "taints": [
                        {"key": "a", "effect": "NoSchedule"},
                        {"key": "b", "value": "1", "effect": "NoExecute"},
                    ],
                    "expireAfter": "720h",
                },
            },
            "disruption": {"consolidateAfter": "0s", "budgets": [{"nodes": "10%"}]},
        },
    }


def nodeclass() -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "role": "NodeRole",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
            "tags": {"team": "a"},
            "metadataOptions": {"httpTokens": "required"},
        },
    }


def nodeclaim(pool: dict[str, Any], klass: dict[str, Any] | None = None, **labels: str) -> dict[str, Any]:
    annotations = nodepool_hash_annotations(pool)
    if klass is not None:
        annotations.update(nodeclass_hash_annotations(klass))
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": "default-abc",
            "creationTimestamp": ts(NOW - timedelta(hours=3)),
            "annotations": annotations,
            "labels": {
                "karpenter.sh/nodepool": "default",
                "node.kubernetes.io/instance-type": "m5.large",
                "topology.kubernetes.io/zone": "us-east-1a",
                "karpenter.sh/capacity-type": "on-demand",
                "kubernetes.io/arch": "amd64",
                **labels,
            },
        },
        "spec": {"expireAfter": "720h"},
        "status": {"conditions": [{"type": "Launched", "status": "True"}]},
    }


M5_LARGE = InstanceType(
    name="m5.large",
    capacity=Resources.of(cpu="2", memory="8Gi", pods="29"),
    offerings=(Offering("us-east-1a", "on-demand", 0.096), Offering("us-east-1a", "spot", 0.04)),
    labels={
        "node.kubernetes.io/instance-type": "m5.large",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
    },
)


def reason(pool: dict, claim: dict, klass: dict | None = None, types: list | None = None) -> str | None:
    found = drift_reason(
        NodePool.from_manifest(pool),
        NodeClaim.from_manifest(claim),
        instance_types=types or [M5_LARGE],
        nodeclass=klass,
        now=NOW,
    )
    return None if found is None else found[0]


def test_fresh_nodeclaim_is_not_drifted() -> None:
    pool, klass = nodepool(), nodeclass()
    assert reason(pool, nodeclaim(pool, klass), klass) is None


def test_hash_ignores_requirements_budgets_taint_order_and_empty_values() -> None:
    pool = nodepool()
    base = nodepool_hash(pool)
    changed = copy.deepcopy(pool)
    changed["spec"]["template"]["spec"]["requirements"].append(
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5"]}
    )
    changed["spec"]["disruption"]["budgets"] = [{"nodes": "0"}]
    changed["spec"]["template"]["spec"]["taints"].reverse()
    changed["spec"]["template"]["spec"]["startupTaints"] = []
    changed["spec"]["template"]["spec"]["expireAfter"] = "43200m"  # same duration, other spelling
    assert nodepool_hash(changed) == base
    defaulted = copy.deepcopy(pool)
    del defaulted["spec"]["template"]["spec"]["expireAfter"]  # CRD default 720h
    assert nodepool_hash(defaulted) == base


def test_every_template_field_drifts() -> None:
    edits = [
        lambda s: s["metadata"]["labels"].update(team="b"),
        lambda s: s["metadata"]["annotations"].update(note="y"),
        lambda s: s["spec"]["taints"].append({"key": "c", "effect": "NoSchedule"}),
        lambda s: s["spec"].update(startupTaints=[{"key": "boot", "effect": "NoSchedule"}]),
        lambda s: s["spec"]["nodeClassRef"].update(name="other"),
        lambda s: s["spec"].update(expireAfter="24h"),
        lambda s: s["spec"].update(terminationGracePeriod="1h"),
    ]
    for edit in edits:
        pool = nodepool()
        claim = nodeclaim(pool)
        edit(pool["spec"]["template"])
        assert reason(pool, claim) == NODEPOOL_DRIFTED


def test_hash_versions_must_match_to_compare() -> None:
    pool = nodepool()
    claim = nodeclaim(pool)
    claim["metadata"]["annotations"]["karpenter.sh/nodepool-hash-version"] = "v3"  # stamped by upstream Karpenter
    pool["spec"]["template"]["metadata"]["labels"]["team"] = "b"
    assert reason(pool, claim) is None
    assert NODEPOOL_HASH_VERSION != "v3"


@pytest.mark.slow  # a second interpreter
def test_hash_is_stable_across_processes() -> None:
    code = (
        "import json,sys; from reconciler.provisioning.drift_hashes import nodepool_hash;"
        "print(nodepool_hash(json.loads(sys.argv[1])))"
    )
    import json

    pool = nodepool()
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(pool)],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123", "PATH": ""},
    )
    assert out.stdout.strip() == nodepool_hash(pool)


def test_requirement_drift_only_when_labels_no_longer_satisfy() -> None:
    pool = nodepool()
    claim = nodeclaim(pool)
    pool["spec"]["template"]["spec"]["requirements"][1]["values"] = ["on-demand"]
    assert reason(pool, claim) is None  # still satisfied: no drift
    pool["spec"]["template"]["spec"]["requirements"][1]["values"] = ["spot"]
    assert reason(pool, claim) == REQUIREMENTS_DRIFTED


def test_requirement_on_a_well_known_label_uses_the_instance_type_labels() -> None:
    pool = nodepool()
    claim = nodeclaim(pool)  # no os label on the NodeClaim itself
    pool["spec"]["template"]["spec"]["requirements"].append(
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}
    )
    assert reason(pool, claim) is None
    pool["spec"]["template"]["spec"]["requirements"][-1] = {
        "key": "example.com/team",
        "operator": "Exists",
    }
    assert reason(pool, claim) == REQUIREMENTS_DRIFTED


def test_numeric_requirements() -> None:
    pool = nodepool()
    claim = nodeclaim(pool, **{"karpenter.k8s.aws/instance-cpu": "2"})
    pool["spec"]["template"]["spec"]["requirements"].append(
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["1"]}
    )
    assert reason(pool, claim) is None
    pool["spec"]["template"]["spec"]["requirements"][-1]["operator"] = "Gt"
    pool["spec"]["template"]["spec"]["requirements"][-1]["values"] = ["2"]
    assert reason(pool, claim) == REQUIREMENTS_DRIFTED


def test_nodeclass_static_fields_drift_but_selector_terms_do_not() -> None:
    pool, klass = nodepool(), nodeclass()
    claim = nodeclaim(pool, klass)
    dynamic = copy.deepcopy(klass)
    dynamic["spec"]["subnetSelectorTerms"] = [{"id": "subnet-1"}]
    dynamic["spec"]["amiSelectorTerms"] = [{"alias": "al2023@v20240807"}]  # same family: AMI drift is dynamic
    assert reason(pool, claim, dynamic) is None
    for field, value in [
        ("userData", "echo hi"),
        ("tags", {"team": "b"}),
        ("metadataOptions", {"httpTokens": "optional"}),
        ("blockDeviceMappings", [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100Gi"}}]),
        ("role", "OtherRole"),
    ]:
        edited = copy.deepcopy(klass)
        edited["spec"][field] = value
        assert reason(pool, claim, edited) == NODECLASS_DRIFTED, field
    family = copy.deepcopy(klass)
    family["spec"]["amiSelectorTerms"] = [{"alias": "bottlerocket@latest"}]
    assert nodeclass_hash(family) != nodeclass_hash(klass)


def test_instance_type_gone_only_after_an_hour() -> None:
    pool = nodepool()
    claim = nodeclaim(pool)
    other = InstanceType(
        name="c5.large", capacity=Resources.of(cpu="2"), offerings=(Offering("us-east-1a", "spot", 0.03),)
    )
    assert reason(pool, claim, types=[other]) == INSTANCE_TYPE_NOT_FOUND
    claim["metadata"]["creationTimestamp"] = ts(NOW - timedelta(minutes=30))
    assert reason(pool, claim, types=[other]) is None
    claim["metadata"]["creationTimestamp"] = ts(NOW - timedelta(hours=2))
    claim["metadata"]["labels"]["topology.kubernetes.io/zone"] = "us-east-1f"  # no offering there any more
    assert reason(pool, claim) == INSTANCE_TYPE_NOT_FOUND


def test_cloud_provider_drift_condition_is_honoured_and_unlaunched_claims_never_drift() -> None:
    pool = nodepool()
    claim = nodeclaim(pool)
    claim["status"]["conditions"].append({"type": "Drifted", "status": "True", "reason": "AMIDrift", "message": "ami"})
    assert reason(pool, claim) == "AMIDrift"
    claim["status"]["conditions"][0]["status"] = "False"
    assert reason(pool, claim) is None


def test_hashes_are_pinned_across_releases() -> None:
    """Literal values: a change to hashing canonicalisation would mark every running node drifted after an
    upgrade, so it must show up here (and come with a hash-version bump) rather than in production."""
    assert nodepool_hash(nodepool()) == "fd2c08080bc9e9c5"
    assert nodeclass_hash(nodeclass()) == "bb6a548151df5c36"


# Karpenter's own example manifests (../shared/data/karpenter-examples/v1): what each hashes to today. A
# NodePool's name is not hashed, so pools with the same template share a hash.
PINNED_EXAMPLE_HASHES = [
    ("general-purpose.yaml", "NodePool", "f3f5e7af98657d57"),
    ("general-purpose.yaml", "EC2NodeClass", "a4a542aafbabae37"),
    ("max-node-lifetime.yaml", "NodePool", "f6d5b2f86c7f1fad"),  # expireAfter 168h, terminationGracePeriod 24h
    ("windows-2022.yaml", "NodePool", "67e4f879095d0148"),
    ("windows-2022.yaml", "EC2NodeClass", "cc323f965caf578b"),
    ("bottlerocket.yaml", "EC2NodeClass", "2578165d7137e140"),
    ("multiple-ebs.yaml", "EC2NodeClass", "79ae7091b57870eb"),  # several blockDeviceMappings
    ("al2023-custom-userdata.yaml", "EC2NodeClass", "3de12825159d69b8"),  # userData
    ("instance-store-ephemeral-storage.yaml", "EC2NodeClass", "fd86fe5fb591ea9b"),  # instanceStorePolicy
]


@pytest.mark.parametrize(("example", "kind", "pinned"), PINNED_EXAMPLE_HASHES)
def test_hashes_of_karpenters_examples_are_pinned(shared_dir: Path, example: str, kind: str, pinned: str) -> None:
    [document] = [
        d for d in yaml.safe_load_all((shared_dir / "data/karpenter-examples/v1" / example).read_text())
        if d and d.get("kind") == kind
    ]
    assert (nodepool_hash if kind == "NodePool" else nodeclass_hash)(document) == pinned


def test_hashes_of_hand_made_pools_and_classes_are_pinned() -> None:
    """Edge cases the examples lack: startupTaints, terminationGracePeriod, expireAfter Never, durations that
    are equal lengths of time, a defaulted expireAfter, kubelet-free classes with non-default options."""
    pool = nodepool()
    spec = pool["spec"]["template"]["spec"]
    spec.update(startupTaints=[{"key": "cni", "effect": "NoSchedule"}], terminationGracePeriod="1h")
    assert nodepool_hash(pool) == "02edae10cac2b960"
    spec["terminationGracePeriod"] = "60m"  # the same length of time hashes the same
    assert nodepool_hash(pool) == "02edae10cac2b960"
    spec["expireAfter"] = "Never"
    assert nodepool_hash(pool) == "0a1e8d06a12e0118"
    bare = nodepool()
    del bare["spec"]["template"]["spec"]["expireAfter"]  # the 720h default hashes like the explicit value
    assert nodepool_hash(bare) == nodepool_hash(nodepool()) == "fd2c08080bc9e9c5"
    klass = nodeclass()
    klass["spec"].update(
        metadataOptions={"httpTokens": "optional", "httpPutResponseHopLimit": 2},
        detailedMonitoring=True,
        associatePublicIPAddress=False,
    )
    assert nodeclass_hash(klass) == "6b2499b73d0de0af"
