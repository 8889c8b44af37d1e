"""``plan`` with a proposed EC2NodeClass change: the nodes of that class drift and are replaced, others stay.

The cluster is the example one with the ``gpu`` NodePool moved to its own (identical) EC2NodeClass, run in
the simulator and snapshotted, so its NodeClaims carry the hashes Adze stamps at launch.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from insight_support import example_cluster, find, run_cli, write_snapshot, write_yaml

from reconciler.provisioning.drift_hashes import NODECLASS_HASH_ANNOTATION, nodeclass_hash

Edit = Callable[[dict[str, Any]], None]


def cluster_with_gpu_class() -> dict[str, Any]:
    document = example_cluster()
    gpu_class = copy.deepcopy(find(document, "EC2NodeClass", "default"))
    gpu_class["metadata"]["name"] = "gpu"
    document["objects"].insert(1, gpu_class)
    find(document, "NodePool", "gpu")["spec"]["template"]["spec"]["nodeClassRef"]["name"] = "gpu"
    return document


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_snapshot(tmp_path_factory.mktemp("nodeclass"), cluster_with_gpu_class())


def snapshot_nodes(snapshot: Path) -> dict[str, str]:
    """Node name -> NodePool."""
    return {
        o["metadata"]["name"]: o["metadata"]["labels"]["karpenter.sh/nodepool"]
        for o in yaml.safe_load(snapshot.read_text())["objects"]
        if o["kind"] == "Node"
    }


def plan_with_default_class(capsys: Any, snapshot: Path, tmp_path: Path, edit: Edit) -> dict[str, Any]:
    """``plan`` for the cluster's own NodePools and EC2NodeClasses with ``edit`` applied to class ``default``."""
    document = cluster_with_gpu_class()
    default = copy.deepcopy(find(document, "EC2NodeClass", "default"))
    edit(default)
    pools = [copy.deepcopy(o) for o in document["objects"] if o["kind"] == "NodePool"]
    proposal = write_yaml(tmp_path, "proposal.yaml", [default, *pools])
    code, out, err = run_cli(capsys, "plan", "--snapshot", str(snapshot), "--nodepools", str(proposal), "--json")
    assert code == 0, err
    return dict(json.loads(out))


def test_the_simulated_snapshot_carries_the_nodeclass_hash(snapshot: Path) -> None:
    objects = yaml.safe_load(snapshot.read_text())["objects"]
    classes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "EC2NodeClass"}
    claims = [o for o in objects if o["kind"] == "NodeClaim"]
    assert len(claims) == len(snapshot_nodes(snapshot)) >= 4
    for claim in claims:
        klass = classes[claim["spec"]["nodeClassRef"]["name"]]
        assert claim["metadata"]["annotations"][NODECLASS_HASH_ANNOTATION] == nodeclass_hash(klass)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("userData", "#!/bin/bash\necho tuned"),
        ("tags", {"team": "platform"}),
        ("blockDeviceMappings", [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100Gi", "volumeType": "gp3"}}]),
    ],
)
def test_a_hashed_field_change_drifts_and_replaces_every_node_of_the_class(
    capsys: Any, snapshot: Path, tmp_path: Path, field: str, value: Any
) -> None:
    plan = plan_with_default_class(capsys, snapshot, tmp_path, lambda c: c["spec"].__setitem__(field, value))

    assert plan["nodeclasses"] == [{"name": "default", "change": "changed", "fields": [field]}]
    assert {c["name"]: c["change"] for c in plan["nodepools"]} == {"general": "unchanged", "gpu": "unchanged"}
    general = sorted(name for name, pool in snapshot_nodes(snapshot).items() if pool == "general")
    assert len(general) >= 2
    assert sorted(d["node"] for d in plan["drift"]) == general  # the gpu nodes use the other class
    for drifted in plan["drift"]:
        assert drifted["driftReason"] == "NodeClassDrifted"
        assert "EC2NodeClass default changed" in drifted["detail"]
        (replacement,) = drifted["replacements"]
        assert replacement["instanceType"] and replacement["price"] > 0
    assert plan["churn"]["nodesDisrupted"] == plan["churn"]["nodesLaunched"] == len(general)
    assert plan["unschedulable"] == {"new": {}, "stillPending": {}}
    assert plan["proposed"]["nodes"] == plan["current"]["nodes"]


def test_a_new_ami_alias_version_is_predicted_as_ami_drift_of_the_class(
    capsys: Any, snapshot: Path, tmp_path: Path
) -> None:
    plan = plan_with_default_class(
        capsys, snapshot, tmp_path, lambda c: c["spec"].__setitem__("amiSelectorTerms", [{"alias": "al2023@v20250601"}])
    )
    general = sorted(name for name, pool in snapshot_nodes(snapshot).items() if pool == "general")
    assert sorted(d["node"] for d in plan["drift"]) == general
    for drifted in plan["drift"]:
        assert drifted["driftReason"] == "AMIDrift"
        assert "amiSelectorTerms changed" in drifted["detail"] and "predicted" in drifted["detail"]
        assert len(drifted["replacements"]) == 1
    # The replacements run the new AMI: they are not drifted again.
    assert plan["churn"]["nodesDisrupted"] == len(general)


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda c: c["spec"].__setitem__("subnetSelectorTerms", [{"id": "subnet-0abc"}]), id="subnets"),
        pytest.param(
            lambda c: c["spec"].__setitem__("securityGroupSelectorTerms", [{"name": "nodes"}]), id="security-groups"
        ),
        pytest.param(
            lambda c: c.__setitem__("status", {"amis": [{"id": "ami-1", "name": "x", "requirements": []}]}), id="status"
        ),
        pytest.param(lambda c: c["spec"].__setitem__("metadataOptions", {"httpTokens": "required"}), id="default"),
    ],
)
def test_a_change_outside_the_hash_drifts_nothing(capsys: Any, snapshot: Path, tmp_path: Path, edit: Edit) -> None:
    plan = plan_with_default_class(capsys, snapshot, tmp_path, edit)
    assert plan["drift"] == []
    assert plan["churn"]["nodesDisrupted"] == 0
