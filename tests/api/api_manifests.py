"""Base manifests for the API tests and a helper to change one field."""

from __future__ import annotations

import copy
import re
from typing import Any

NODEPOOL: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "default"},
    "spec": {
        "template": {
            "metadata": {"labels": {"team": "payments"}},
            "spec": {
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
                    {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["2"]},
                ],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "taints": [{"key": "dedicated", "value": "payments", "effect": "NoSchedule"}],
            },
        },
        "disruption": {
            "budgets": [{"nodes": "10%"}, {"nodes": "0", "schedule": "0 9 * * 1-5", "duration": "8h"}]
        },
        "limits": {"cpu": 1000, "memory": "1000Gi"},
    },
}

NODECLAIM: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodeClaim",
    "metadata": {"name": "default-abcde", "labels": {"karpenter.sh/nodepool": "default"}},
    "spec": {
        "requirements": [
            {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]},
            {"key": "karpenter.k8s.aws/ec2nodeclass", "operator": "In", "values": ["default"]},
            {
                "key": "node.kubernetes.io/instance-type",
                "operator": "In",
                "values": ["m5.large", "m5.xlarge"],
            },
        ],
        "resources": {"requests": {"cpu": "1500m", "memory": "3Gi", "pods": 7}},
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
    },
}

EC2NODECLASS: dict[str, Any] = {
    "apiVersion": "karpenter.k8s.aws/v1",
    "kind": "EC2NodeClass",
    "metadata": {"name": "default"},
    "spec": {
        "role": "KarpenterNodeRole-demo",
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
    },
}

BASES = {"NodePool": NODEPOOL, "NodeClaim": NODECLAIM, "EC2NodeClass": EC2NODECLASS}

_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def changed(kind: str, path: str, value: Any) -> dict[str, Any]:
    """A copy of the base manifest of ``kind`` with ``path`` (``a.b[0].c``) set, or removed if ``value`` is DELETE."""
    manifest = copy.deepcopy(BASES[kind])
    steps: list[str | int] = [name if name else int(index) for name, index in _STEP.findall(path)]
    target: Any = manifest
    for step in steps[:-1]:
        if isinstance(target, dict) and step not in target:
            target[step] = {}
        target = target[step]
    last = steps[-1]
    if value is DELETE:
        del target[last]
    else:
        target[last] = copy.deepcopy(value)
    return manifest


DELETE = object()
