"""Applying a proposal to a snapshot's objects: what counts as a change, and the fresh-provision variant."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from reconciler.insight.plan.proposal import apply_proposal, fresh_provision_objects, nodeclaims_of_pools
from reconciler.insight.sources import ProposedConfig

REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def pool(name: str, **disruption: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"nodeClassRef": REF, "requirements": []}}}
    if disruption:
        spec["disruption"] = disruption
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def nodeclass(**extra: Any) -> dict[str, Any]:
    spec = {
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "c"}}],
        **extra,
    }
    return {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
            "spec": spec}  # fmt: skip


def live(manifest: dict[str, Any], uid: str) -> dict[str, Any]:
    """As the API server returns it: CRD defaults filled in, a uid and a status."""
    from reconciler.insight.plan.proposal import normalized_spec

    served = copy.deepcopy(manifest)
    served["spec"] = normalized_spec(manifest)
    served["metadata"]["uid"] = uid
    served["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    return served


def test_defaults_and_stack_filled_role_are_not_changes() -> None:
    objects = [live(pool("general"), "u1"), live(pool("batch"), "u2"), live(nodeclass(role="NodeRole"), "u3")]
    proposed = ProposedConfig(
        [pool("general", consolidateAfter="0s"), pool("batch", consolidateAfter="10m"), pool("new")],
        [nodeclass()],  # role omitted: the stack fills it in at deploy time
        "proposal.yaml",
    )
    applied = apply_proposal(objects, proposed)
    changes = {c.name: (c.change, c.fields) for c in applied.pool_changes}
    assert changes == {
        "general": ("unchanged", ()),
        "batch": ("changed", ("disruption.consolidateAfter",)),
        "new": ("added", ()),
    }
    assert [(c.name, c.change) for c in applied.nodeclass_changes] == [("default", "unchanged")]
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in applied.objects}
    assert by_name[("NodePool", "general")] is objects[0]  # untouched live object
    assert by_name[("NodePool", "batch")]["metadata"]["uid"] == "u2"  # an in-place update
    assert "status" not in by_name[("NodePool", "batch")]
    assert by_name[("EC2NodeClass", "default")] is objects[2]


def test_removed_pools_and_changed_nodeclass() -> None:
    claim = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
             "metadata": {"name": "batch-x1", "labels": {"karpenter.sh/nodepool": "batch"}}}  # fmt: skip
    objects = [live(pool("general"), "u1"), live(pool("batch"), "u2"), live(nodeclass(role="R"), "u3"), claim]
    applied = apply_proposal(objects, ProposedConfig([pool("general")], [nodeclass(tags={"team": "a"})], "p"))
    assert applied.removed_pools == ["batch"]
    assert nodeclaims_of_pools(applied.objects, applied.removed_pools) == ["batch-x1"]
    assert not [o for o in applied.objects if o["kind"] == "NodePool" and o["metadata"]["name"] == "batch"]
    (change,) = applied.nodeclass_changes
    assert (change.change, change.fields) == ("changed", ("tags",))
    merged = next(o for o in applied.objects if o["kind"] == "EC2NodeClass")
    assert merged["spec"]["role"] == "R" and merged["spec"]["tags"] == {"team": "a"}


def test_fresh_provision_keeps_unmanaged_capacity_and_re_pends_the_rest() -> None:
    now = datetime(2026, 1, 5, 10, tzinfo=UTC)

    def node(name: str, managed: bool) -> dict[str, Any]:
        labels = {"karpenter.sh/nodepool": "general"} if managed else {}
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}

    def pod(name: str, node_name: str, owner: str = "ReplicaSet") -> dict[str, Any]:
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default",
                         "ownerReferences": [{"kind": owner, "name": "o"}]},
            "spec": {"nodeName": node_name, "containers": []}, "status": {"phase": "Running"},
        }  # fmt: skip

    objects = [
        node("managed", True), node("system", False),
        pod("app", "managed"), pod("agent", "managed", "DaemonSet"), pod("mirror", "managed", "Node"),
        pod("coredns", "system"),
        {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "managed"}},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
         "metadata": {"name": "p", "namespace": "default"}},
    ]  # fmt: skip
    fresh = {(o["kind"], o["metadata"]["name"]): o for o in fresh_provision_objects(objects, now)}
    assert set(fresh) == {
        ("Node", "system"),
        ("Pod", "app"),
        ("Pod", "coredns"),
        ("PodDisruptionBudget", "p"),
    }
    assert "nodeName" not in fresh[("Pod", "app")]["spec"]
    assert fresh[("Pod", "app")]["status"]["conditions"][0]["reason"] == "Unschedulable"
    assert fresh[("Pod", "coredns")]["spec"]["nodeName"] == "system"
