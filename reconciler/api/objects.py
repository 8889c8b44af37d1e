"""Parse any Karpenter API object from a manifest dict, with clean field-path errors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from .ec2nodeclass import EC2NodeClass
from .errors import Problem, ValidationFailure, failure_from
from .nodeclaim import NodeClaim
from .nodeoverlay import NodeOverlay
from .nodepool import NodePool
from .schema import error_schema

KarpenterObject = NodePool | NodeClaim | EC2NodeClass | NodeOverlay

KINDS: dict[tuple[str, str], type[NodePool] | type[NodeClaim] | type[EC2NodeClass] | type[NodeOverlay]] = {
    ("karpenter.sh/v1", "NodePool"): NodePool,
    ("karpenter.sh/v1", "NodeClaim"): NodeClaim,
    ("karpenter.k8s.aws/v1", "EC2NodeClass"): EC2NodeClass,
    ("karpenter.sh/v1alpha1", "NodeOverlay"): NodeOverlay,
}


def is_karpenter_manifest(manifest: Mapping[str, Any]) -> bool:
    return (manifest.get("apiVersion"), manifest.get("kind")) in KINDS


def parse_object(manifest: Mapping[str, Any], prefix: str = "") -> KarpenterObject:
    """Validate ``manifest`` as a NodePool, NodeClaim, EC2NodeClass or NodeOverlay (by apiVersion and kind).

    Raises :class:`ValidationFailure` with one ``path: message`` line per problem; ``prefix``
    (e.g. ``adze:nodePools[1]``) is put in front of every path.
    """
    if not isinstance(manifest, Mapping):
        raise ValidationFailure([Problem(prefix, f"expected an object, got {type(manifest).__name__}")])
    key = (manifest.get("apiVersion"), manifest.get("kind"))
    model = KINDS.get(key)  # type: ignore[arg-type]
    if model is None:
        known = ", ".join(f"{api_version} {kind}" for api_version, kind in KINDS)
        path = f"{prefix}.kind" if prefix else "kind"
        raise ValidationFailure([Problem(path, f"unsupported apiVersion/kind {key[0]!r}/{key[1]!r}; expected {known}")])
    try:
        return model.model_validate(dict(manifest))
    except ValidationError as err:
        raise failure_from(err, prefix, error_schema(model)) from None
