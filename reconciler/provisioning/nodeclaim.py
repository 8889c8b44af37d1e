"""``PlannedNodeClaim``: a scheduled claim with a name, written out as a karpenter.sh/v1 NodeClaim manifest.

The manifest carries the static drift hashes of what it was planned from: the NodePool template
(``karpenter.sh/nodepool-hash``) and, when known, the pool's EC2NodeClass
(``karpenter.k8s.aws/ec2nodeclass-hash``), so a later edit of either drifts the node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.model import labels as wk
from reconciler.provisioning.drift_hashes import nodeclass_hash_annotations, nodepool_hash_annotations
from reconciler.scheduling.results import ScheduledClaim

API_VERSION = "karpenter.sh/v1"


@dataclass(slots=True)
class PlannedNodeClaim:
    name: str
    claim: ScheduledClaim
    # The EC2NodeClass manifest the pool references (``ClusterState.nodeclass``); None when it is not known.
    nodeclass: Mapping[str, Any] | None = None

    @property
    def nodepool(self) -> str:
        return self.claim.nodepool.name

    @property
    def pods(self) -> list[str]:
        return self.claim.pod_keys

    @property
    def instance_type_options(self) -> list[str]:
        """Instance type names, cheapest available compatible offering first."""
        return self.claim.instance_type_names

    def manifest(self) -> dict[str, Any]:
        claim = self.claim
        pool = claim.nodepool
        annotations = dict(pool.annotations)
        annotations.update(nodepool_hash_annotations(pool))
        if self.nodeclass is not None:
            annotations.update(nodeclass_hash_annotations(self.nodeclass))
        if claim.requirements.has_min_values() or claim.min_values_relaxed:
            annotations[wk.MIN_VALUES_RELAXED] = "true" if claim.min_values_relaxed else "false"
        # NodeOverlays shaped the plan: the launch orders its offerings by the overlaid prices (AWS: prioritized).
        if any(it.price_overlaid for it in claim.instance_types):
            annotations[wk.PRICE_OVERLAY_APPLIED] = "true"
        if any(it.capacity_overlaid for it in claim.instance_types):
            annotations[wk.CAPACITY_OVERLAY_APPLIED] = "true"
        spec: dict[str, Any] = {
            "requirements": claim.requirements.to_manifest(),
            "resources": {"requests": claim.requests.to_manifest()},
            "nodeClassRef": dict(pool.node_class_ref),
            "expireAfter": pool.expire_after,
        }
        if claim.taints:
            spec["taints"] = [t.to_manifest() for t in claim.taints]
        if claim.startup_taints:
            spec["startupTaints"] = [t.to_manifest() for t in claim.startup_taints]
        if pool.termination_grace_period:
            spec["terminationGracePeriod"] = pool.termination_grace_period
        owner: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": "NodePool",
            "name": pool.name,
            "blockOwnerDeletion": True,
        }
        if pool.uid:
            owner["uid"] = pool.uid
        return {
            "apiVersion": API_VERSION,
            "kind": "NodeClaim",
            "metadata": {
                "name": self.name,
                "labels": dict(sorted(claim.labels.items())),
                "annotations": dict(sorted(annotations.items())),
                "ownerReferences": [owner],
            },
            "spec": spec,
        }
