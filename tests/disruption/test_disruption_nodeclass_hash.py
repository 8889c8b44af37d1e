"""EC2NodeClass drift through the stamped hash, and the hash memos that keep drift checks cheap."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from disruption_factories import MEDIUM, NOW, cluster, node_of, nodepool, pod, run_decide

from reconciler.api import parse_object
from reconciler.api.ec2_launch import METADATA_OPTIONS_DEFAULT as API_METADATA_OPTIONS_DEFAULT
from reconciler.disruption.drift_detection import NODECLASS_DRIFTED, drift_reason
from reconciler.model.node import NodeClaim
from reconciler.model.nodepool import NodePool
from reconciler.provisioning import drift_hashes as hashes
from reconciler.provisioning.drift_hashes import (
    METADATA_OPTIONS_DEFAULT,
    NODECLASS_HASH_ANNOTATION,
    NODECLASS_HASH_VERSION_ANNOTATION,
    nodeclass_hash,
    nodeclass_hash_annotations,
    nodepool_hash,
    nodepool_hash_annotations,
)


def nodeclass(**spec: Any) -> dict[str, Any]:
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
            **spec,
        },
    }


def claim(annotations: dict[str, str]) -> NodeClaim:
    return NodeClaim.from_manifest(
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {
                "name": "default-abc",
                "annotations": annotations,
                "labels": {"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "on-demand"},
            },
            "spec": {},
            "status": {"conditions": [{"type": "Launched", "status": "True"}]},
        }
    )


def reason(annotations: dict[str, str], klass: dict[str, Any]) -> str | None:
    pool = nodepool()
    stamped = {**nodepool_hash_annotations(pool), **annotations}
    found = drift_reason(NodePool.from_manifest(pool), claim(stamped), now=NOW, nodeclass=klass)
    return None if found is None else found[0]


# -- drift_reason ------------------------------------------------------------------------------------------


def test_a_claim_without_the_nodeclass_hash_is_not_drifted_by_a_class_edit() -> None:
    edited = nodeclass(userData="echo changed")
    assert reason({}, edited) is None  # e.g. launched before Adze stamped the hash: unknown is not drift


def test_a_claim_whose_stamp_differs_from_the_class_is_drifted() -> None:
    launched_with = nodeclass()
    stamp = nodeclass_hash_annotations(launched_with)
    assert reason(stamp, launched_with) is None
    assert reason(stamp, nodeclass(userData="echo changed")) == NODECLASS_DRIFTED
    assert reason({**stamp, NODECLASS_HASH_ANNOTATION: "0000"}, launched_with) == NODECLASS_DRIFTED
    upstream = {**stamp, NODECLASS_HASH_VERSION_ANNOTATION: "v6"}  # stamped by Karpenter: not comparable
    assert reason(upstream, nodeclass(userData="echo changed")) is None


def test_decide_replaces_a_node_whose_class_changed() -> None:
    klass = nodeclass()
    stamped = {**nodepool_hash_annotations(nodepool()), **nodeclass_hash_annotations(klass)}
    edited = nodeclass(blockDeviceMappings=[{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "200Gi"}}])
    state = cluster(nodepool(budgets=[{"nodes": "100%"}]), edited, node_of("n1", MEDIUM, claim_annotations=stamped),
                    pod("a", node="n1", cpu="1"))
    command = run_decide(state).command
    assert command is not None and command.reason == "Drifted" and command.node_names == ["n1"]
    assert [r.pods for r in command.replacements] == [("default/a",)]


def test_drift_replacements_carry_the_current_nodeclass_hash() -> None:
    klass = nodeclass()
    stamped = {**nodepool_hash_annotations(nodepool()), **nodeclass_hash_annotations(klass)}
    edited = nodeclass(userData="echo changed")
    state = cluster(nodepool(budgets=[{"nodes": "100%"}]), edited, node_of("n1", MEDIUM, claim_annotations=stamped),
                    pod("a", node="n1", cpu="1"))
    command = run_decide(state).command
    assert command is not None and command.replacements
    annotations = command.replacements[0].manifest["metadata"]["annotations"]
    assert annotations[NODECLASS_HASH_ANNOTATION] == nodeclass_hash(edited)


# -- the hashes --------------------------------------------------------------------------------------------


def test_metadata_options_equal_to_the_crd_default_hash_as_absent() -> None:
    assert dict(METADATA_OPTIONS_DEFAULT) == API_METADATA_OPTIONS_DEFAULT  # one default, two layers
    plain = nodeclass()
    assert nodeclass_hash(nodeclass(metadataOptions=dict(METADATA_OPTIONS_DEFAULT))) == nodeclass_hash(plain)
    assert nodeclass_hash(nodeclass(metadataOptions={"httpTokens": "required"})) == nodeclass_hash(plain)
    assert nodeclass_hash(nodeclass(metadataOptions={"httpTokens": "optional"})) != nodeclass_hash(plain)


def test_a_spec_as_the_api_server_stores_it_hashes_like_the_file_it_came_from() -> None:
    raw = nodeclass(
        userData="#!/bin/bash\necho hi",
        kubelet={"maxPods": 110, "systemReserved": {"cpu": "100m", "memory": "100Mi"}},
        blockDeviceMappings=[
            {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "100Gi", "volumeType": "gp3"}}
        ],
        detailedMonitoring=True,
        associatePublicIPAddress=False,
    )
    stored = parse_object(raw).model_dump(mode="json", by_alias=True, exclude_none=True)
    assert stored["spec"] != raw["spec"]  # defaults were filled in
    assert nodeclass_hash(stored) == nodeclass_hash(raw)


def test_the_nodeclass_memo_never_returns_a_stale_hash_for_an_edited_spec() -> None:
    klass = nodeclass()
    original = nodeclass_hash(klass)
    assert nodeclass_hash(klass) == original  # served by the memo
    klass["spec"]["userData"] = "echo edited"  # in place: same dict objects
    edited = nodeclass_hash(klass)
    assert edited != original and edited == nodeclass_hash(copy.deepcopy(klass))
    klass["spec"]["tags"]["team"] = "b"  # nested in-place edit
    assert nodeclass_hash(klass) not in (original, edited)
    klass["spec"]["tags"]["team"] = "a"
    del klass["spec"]["userData"]
    assert nodeclass_hash(klass) == original
    klass["spec"] = {**klass["spec"], "role": "Other"}  # a new spec object in the same manifest
    assert nodeclass_hash(klass) != original


def test_the_nodepool_memo_is_per_object_and_a_changed_pool_gets_a_new_hash() -> None:
    pool = NodePool.from_manifest(nodepool(labels={"team": "a"}))
    first = nodepool_hash(pool)
    assert nodepool_hash(pool) == first
    assert nodepool_hash(NodePool.from_manifest(nodepool(labels={"team": "a"}))) == first  # equal value
    relabelled = replace(pool, labels={"team": "b"})
    assert nodepool_hash(relabelled) != first
    assert nodepool_hash(relabelled) == nodepool_hash(nodepool(labels={"team": "b"}))  # the manifest path agrees


def test_the_memos_are_bounded_and_stay_correct_after_eviction() -> None:
    classes = [nodeclass(userData=f"echo {i}") for i in range(hashes._MEMO_SIZE + 50)]
    first = [nodeclass_hash(k) for k in classes]
    assert len(set(first)) == len(classes)
    assert len(hashes._nodeclass_memo._entries) <= hashes._MEMO_SIZE
    assert [nodeclass_hash(k) for k in classes] == first
