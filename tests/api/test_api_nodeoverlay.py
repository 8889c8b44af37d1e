"""NodeOverlay manifests: the model and the generated CRD (schema + CEL) accept and refuse the same ones."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.api import ValidationFailure, parse_object
from reconciler.api.crd_validation import validate
from reconciler.api.crds import generate_crds


def overlay(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "o"},
            "spec": {"requirements": [], **spec}}


VALID = [
    overlay(price="5.00"),
    overlay(priceAdjustment="-10%"),
    overlay(priceAdjustment="+15%"),
    overlay(priceAdjustment="-100%"),
    overlay(priceAdjustment="+0.5"),
    overlay(priceAdjustment="-7.50", weight=10000),
    overlay(capacity={"smarter-devices/fuse": 1, "hugepages-2Mi": "100Mi"}),
    overlay(requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                          {"key": "karpenter.sh/nodepool", "operator": "NotIn", "values": ["gpu"]},
                          {"key": "karpenter.k8s.aws/instance-memory", "operator": "Gt", "values": ["2048"]},
                          {"key": "team", "operator": "Exists"}], price="1"),
]
INVALID = [
    (overlay(price="1", priceAdjustment="-1%"), "cannot set both"),
    (overlay(price="-1"), "price"),
    (overlay(priceAdjustment="-101%"), "priceAdjustment"),
    (overlay(priceAdjustment="10%"), "priceAdjustment"),
    (overlay(capacity={"cpu": "1"}), "capacity"),
    (overlay(weight=0), "weight"),
    (overlay(requirements=[{"key": "kubernetes.io/hostname", "operator": "In", "values": ["a"]}]), "hostname"),
    (overlay(requirements=[{"key": "karpenter.sh/registered", "operator": "Exists"}]), "karpenter.sh"),
    (overlay(requirements=[{"key": "a", "operator": "NotIn"}]), "NotIn"),
    (overlay(requirements=[{"key": "a", "operator": "Gt", "values": ["x"]}]), "Gt"),
]


@pytest.mark.parametrize("manifest", VALID)
def test_valid_overlays_pass_the_model_and_the_crd(manifest: dict[str, Any]) -> None:
    parse_object(manifest)
    assert validate(manifest, generate_crds()) == []


@pytest.mark.parametrize(("manifest", "needle"), INVALID)
def test_invalid_overlays_fail_both_naming_the_field(manifest: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValidationFailure) as failure:
        parse_object(manifest)
    assert needle.lower() in str(failure.value).lower()
    assert validate(manifest, generate_crds()) != []
