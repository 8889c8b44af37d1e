"""Error formatting: one ``path: message`` line per problem, map keys bracketed, prefixes for config paths."""

from __future__ import annotations

import pytest
from api_manifests import changed
from pydantic import ValidationError

from reconciler.api import NodePool, ValidationFailure, format_validation_error, parse_object
from reconciler.api.errors import Problem, format_loc
from reconciler.api.schema import error_schema


def test_prefix_is_joined_to_every_path() -> None:
    manifest = changed("NodePool", "spec.weight", 0)
    manifest["spec"]["template"]["spec"]["requirements"][0]["operator"] = "Maybe"
    with pytest.raises(ValidationFailure) as caught:
        parse_object(manifest, prefix="adze:nodePools[1]")
    lines = str(caught.value).splitlines()
    assert len(lines) == 2
    assert all(line.startswith("adze:nodePools[1].spec.") for line in lines)


def test_format_validation_error_accepts_pydantic_errors() -> None:
    manifest = changed("NodePool", "spec.disruption.budgets[1]", {"nodes": "1", "schedule": "@daily"})
    with pytest.raises(ValidationError) as caught:
        NodePool.model_validate(manifest)
    text = format_validation_error(caught.value, prefix="adze:nodePools[0]")
    assert text == "adze:nodePools[0].spec.disruption.budgets[1]: schedule and duration must be set together"


def test_format_validation_error_reprefixes_failures() -> None:
    failure = ValidationFailure([Problem("spec.weight", "too big"), Problem("[2].name", "missing")])
    assert format_validation_error(failure, "cfg") == "cfg.spec.weight: too big\ncfg[2].name: missing"


def test_map_keys_are_bracketed_using_the_schema() -> None:
    schema = error_schema(NodePool)
    loc = ("spec", "template", "metadata", "labels", "team")
    assert format_loc(loc, schema) == "spec.template.metadata.labels[team]"
    assert format_loc(("spec", "limits", "cpu"), schema) == "spec.limits[cpu]"
    assert format_loc(("spec", "template", "spec", "requirements", 3, "values", 0), schema) == (
        "spec.template.spec.requirements[3].values[0]"
    )
    # Without a schema only non-identifier keys can be recognised.
    assert (
        format_loc(("metadata", "labels", "karpenter.sh/foo", "[key]")) == "metadata.labels[karpenter.sh/foo]"
    )


def test_non_mapping_input_is_reported_cleanly() -> None:
    with pytest.raises(ValidationFailure, match="expected an object, got list"):
        parse_object([])  # type: ignore[arg-type]
    with pytest.raises(ValidationFailure) as caught:
        parse_object({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "spec": "oops"})
    assert str(caught.value).startswith("spec: ")


def test_type_errors_read_plainly() -> None:
    manifest = changed("NodePool", "spec.weight", "ten")
    manifest["spec"]["template"]["spec"]["requirements"] = {}
    manifest["spec"]["template"]["spec"]["taints"][0]["timeAdded"] = "yesterday"
    with pytest.raises(ValidationFailure) as caught:
        parse_object(manifest)
    assert sorted(str(caught.value).splitlines()) == [
        "spec.template.spec.requirements: must be a list, got {}",
        "spec.template.spec.taints[0].timeAdded: must be an RFC 3339 date-time, got 'yesterday'",
        "spec.weight: must be an integer, got 'ten'",
    ]
