"""Requirement lists are validated once per distinct list (NodeClaims repeat ~450 instance types); a repeat
gets the same result and a bad list fails every time, naming its path."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from reconciler.api.requirements import NodeClaimRequirement, NodePoolRequirement
from reconciler.model.requirements import Requirement, RequirementError

TYPES = [f"c6a.{size}xlarge" for size in range(2, 40)]


def test_a_repeated_requirement_validates_to_an_equal_model() -> None:
    raw = {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(TYPES), "minValues": 2}
    first = NodeClaimRequirement.model_validate(raw)
    again = NodeClaimRequirement.model_validate({**raw, "values": list(TYPES)})
    assert again == first and again.values == TYPES and again.min_values == 2


@pytest.mark.parametrize("bad", [
    {"values": [*TYPES, "not a label value"]},
    {"values": []},
    {"minValues": 100},
    {"operator": "Gte", "values": ["x"]},
    {"values": [*TYPES, 3]},
    {"extra": 1},
])
def test_a_bad_requirement_fails_every_time(bad: dict) -> None:
    good = {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(TYPES)}
    NodeClaimRequirement.model_validate(good)
    for _ in range(2):
        with pytest.raises(ValidationError):
            NodeClaimRequirement.model_validate({**good, **bad})


def test_the_model_class_is_part_of_what_is_remembered() -> None:
    raw = {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["general"]}
    assert NodeClaimRequirement.model_validate(raw).values == ["general"]
    with pytest.raises(ValidationError, match=r"karpenter\.sh/nodepool"):
        NodePoolRequirement.model_validate(raw)  # reserved in a NodePool, though a claim may name it


def test_engine_requirements_from_a_repeated_list_equal_fresh_ones() -> None:
    raw = {"key": "node.kubernetes.io/instance-type", "operator": "NotIn", "values": list(TYPES)}
    assert Requirement.from_manifest(raw) == Requirement.new(raw["key"], "NotIn", TYPES)
    assert Requirement.from_manifest(dict(raw)) == Requirement.new(raw["key"], "NotIn", TYPES)
    numbers = {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": [5]}
    assert Requirement.from_manifest(numbers).gte == 6
    for _ in range(2):
        with pytest.raises(RequirementError, match=r"r\[0\]\.values: operator Gt needs exactly one integer"):
            Requirement.from_manifest({**numbers, "values": ["5", "6"]}, path="r[0]")
