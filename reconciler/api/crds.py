"""CustomResourceDefinitions for NodePool, NodeClaim, EC2NodeClass and NodeOverlay, generated from the models.

``python -m reconciler crds`` prints :func:`crds_yaml`; the Pulumi component
applies :func:`generate_crds`.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml
from pydantic import BaseModel

from .ec2nodeclass import EC2NodeClass
from .nodeclaim import NodeClaim
from .nodeoverlay import NodeOverlay
from .nodepool import NodePool
from .schema import structural_schema

_READY = '.status.conditions[?(@.type=="Ready")].status'
_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def _column(name: str, json_path: str, column_type: str = "string", priority: int = 0) -> dict[str, Any]:
    column: dict[str, Any] = {"name": name, "type": column_type, "jsonPath": json_path}
    if priority:
        column["priority"] = priority
    return column


NODEPOOL_COLUMNS = [
    _column("NodeClass", ".spec.template.spec.nodeClassRef.name"),
    _column("Nodes", ".status.nodes"),
    _column("Ready", _READY),
    _AGE,
    _column("Weight", ".spec.weight", "integer", priority=1),
    _column("CPU", ".status.resources.cpu", priority=1),
    _column("Memory", ".status.resources.memory", priority=1),
]
NODECLAIM_COLUMNS = [
    _column("Type", ".metadata.labels.node\\.kubernetes\\.io/instance-type"),
    _column("Capacity", ".metadata.labels.karpenter\\.sh/capacity-type"),
    _column("Zone", ".metadata.labels.topology\\.kubernetes\\.io/zone"),
    _column("Node", ".status.nodeName"),
    _column("Ready", _READY),
    _AGE,
    _column("ImageID", ".status.imageID", priority=1),
    _column("ID", ".status.providerID", priority=1),
    _column("NodePool", ".metadata.labels.karpenter\\.sh/nodepool", priority=1),
    _column("NodeClass", ".spec.nodeClassRef.name", priority=1),
    _column("Drifted", '.status.conditions[?(@.type=="Drifted")].status', priority=1),
]
NODEOVERLAY_COLUMNS = [
    _column("Ready", _READY),
    _AGE,
    _column("Weight", ".spec.weight", "integer", priority=1),
]
EC2NODECLASS_COLUMNS = [
    _column("Ready", _READY),
    _AGE,
    _column("Role", ".spec.role", priority=1),
]


def _crd(
    model: type[BaseModel],
    *,
    group: str,
    plural: str,
    columns: list[dict[str, Any]],
    short_names: list[str] | None = None,
    scale: bool = False,
    version: str = "v1",
) -> dict[str, Any]:
    kind = str(model.model_fields["kind"].default)
    names: dict[str, Any] = {
        "categories": ["karpenter"],
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": kind.lower(),
    }
    if short_names:
        names["shortNames"] = short_names
    subresources: dict[str, Any] = {"status": {}}
    if scale:
        subresources["scale"] = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.nodes"}
    schema = structural_schema(model)
    schema["required"] = ["spec"]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": names,
            "scope": "Cluster",
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "additionalPrinterColumns": columns,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": subresources,
                }
            ],
        },
    }


def generate_crds() -> list[dict[str, Any]]:
    """The four CRDs (NodePool, NodeClaim, EC2NodeClass, NodeOverlay) as plain dicts, fresh copies on every call."""
    crds = [
        _crd(NodePool, group="karpenter.sh", plural="nodepools", columns=NODEPOOL_COLUMNS, scale=True),
        _crd(NodeClaim, group="karpenter.sh", plural="nodeclaims", columns=NODECLAIM_COLUMNS),
        _crd(
            EC2NodeClass,
            group="karpenter.k8s.aws",
            plural="ec2nodeclasses",
            columns=EC2NODECLASS_COLUMNS,
            short_names=["ec2nc", "ec2ncs"],
        ),
        _crd(NodeOverlay, group="karpenter.sh", plural="nodeoverlays", columns=NODEOVERLAY_COLUMNS,
             short_names=["overlays"], version="v1alpha1"),
    ]
    return copy.deepcopy(crds)


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def crds_yaml() -> str:
    """All CRDs as one multi-document YAML string (keys sorted, so the output is stable)."""
    return yaml.dump_all(
        generate_crds(), Dumper=_Dumper, sort_keys=True, explicit_start=True, width=120, allow_unicode=True
    )
