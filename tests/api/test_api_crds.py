"""The generated CRDs: golden file, apiextensions schema, structural-schema rules, CEL and RE2 syntax."""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import kubernetes_validate
import pytest
import re2
import yaml

from reconciler.api.crd_validation import crd_schema, to_json_schema
from reconciler.api.crds import crds_yaml, generate_crds

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "crds.yaml"
SCHEMA_TYPES = {"object", "array", "string", "integer", "number", "boolean"}
FORBIDDEN_KEYS = {"$ref", "$defs", "definitions", "allOf", "oneOf", "not", "const", "title", "propertyNames"}


def test_crds_yaml_matches_golden_file() -> None:
    generated = crds_yaml()
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(generated)
    expected = GOLDEN.read_text() if GOLDEN.exists() else ""
    if generated != expected:
        diff = "".join(
            list(
                difflib.unified_diff(
                    expected.splitlines(True), generated.splitlines(True), "golden", "generated"
                )
            )[:60]
        )
        pytest.fail(
            f"{GOLDEN} is out of date with reconciler.api. If the change is intended, regenerate it with\n"
            f"    UPDATE_GOLDEN=1 pytest tests/api/test_api_crds.py\nand review the diff:\n{diff}"
        )


def test_crds_yaml_is_deterministic_and_parses_back() -> None:
    text = crds_yaml()
    assert text == crds_yaml()
    assert list(yaml.safe_load_all(text)) == generate_crds()


@pytest.mark.parametrize("kubernetes_version", ["1.30.0", kubernetes_validate.latest_version()])
def test_crds_are_valid_apiextensions_v1_objects(kubernetes_version: str) -> None:
    for crd in generate_crds():
        kubernetes_validate.validate(crd, kubernetes_version, strict=True)


def test_crd_identity_scope_and_subresources() -> None:
    crds = {crd["metadata"]["name"]: crd for crd in generate_crds()}
    assert sorted(crds) == [
        "ec2nodeclasses.karpenter.k8s.aws",
        "nodeclaims.karpenter.sh",
        "nodeoverlays.karpenter.sh",
        "nodepools.karpenter.sh",
    ]
    for name, crd in crds.items():
        spec = crd["spec"]
        assert name == f"{spec['names']['plural']}.{spec['group']}"
        assert spec["scope"] == "Cluster"
        [version] = spec["versions"]
        expected = "v1alpha1" if name == "nodeoverlays.karpenter.sh" else "v1"
        assert (version["name"], version["served"], version["storage"]) == (expected, True, True)
        assert version["subresources"]["status"] == {}
    assert crds["nodepools.karpenter.sh"]["spec"]["versions"][0]["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.nodes",
    }
    assert "scale" not in crds["nodeclaims.karpenter.sh"]["spec"]["versions"][0]["subresources"]
    assert crds["ec2nodeclasses.karpenter.k8s.aws"]["spec"]["names"]["shortNames"] == ["ec2nc", "ec2ncs"]
    assert crds["nodeoverlays.karpenter.sh"]["spec"]["names"]["shortNames"] == ["overlays"]


KARPENTER_COLUMNS = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "karpenter" / "printer-columns.json").read_text())


def test_printer_columns_are_karpenters() -> None:
    """Identical to Karpenter's v1 CRDs (name, jsonPath, type, priority, order): ``kubectl get nodeclaims``
    shows READY from the Ready condition, ``kubectl get nodepools`` NODES from ``.status.nodes``."""
    crds = {crd["spec"]["names"]["kind"]: crd for crd in generate_crds()}
    for kind in ("NodeClaim", "NodePool", "EC2NodeClass", "NodeOverlay"):
        assert crds[kind]["spec"]["versions"][0]["additionalPrinterColumns"] == KARPENTER_COLUMNS[kind], kind


def _nodes(schema: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    yield path or "<root>", schema
    for name, child in schema.get("properties", {}).items():
        yield from _nodes(child, f"{path}.{name}")
    if isinstance(schema.get("items"), Mapping):
        yield from _nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), Mapping):
        yield from _nodes(schema["additionalProperties"], f"{path}{{}}")


ALL_NODES = [
    (f"{crd['spec']['names']['kind']}{path}", node)
    for crd in generate_crds()
    for path, node in _nodes(crd_schema(crd))
]


def test_schemas_are_structural() -> None:
    problems = []
    for path, node in ALL_NODES:
        int_or_string = node.get("x-kubernetes-int-or-string") is True
        preserve = node.get("x-kubernetes-preserve-unknown-fields") is True
        if node.get("type") not in SCHEMA_TYPES and not (int_or_string or preserve):
            problems.append(f"{path}: no type")
        if int_or_string and "type" in node:
            problems.append(f"{path}: int-or-string must not state a type")
        if "anyOf" in node and node["anyOf"] != [{"type": "integer"}, {"type": "string"}]:
            problems.append(f"{path}: anyOf is only allowed for int-or-string")
        if FORBIDDEN_KEYS & set(node):
            problems.append(f"{path}: forbidden keys {sorted(FORBIDDEN_KEYS & set(node))}")
        if "properties" in node and "additionalProperties" in node:
            problems.append(f"{path}: properties and additionalProperties together")
        if "additionalProperties" in node and not isinstance(node["additionalProperties"], Mapping):
            problems.append(f"{path}: additionalProperties must be a schema")
        if "default" in node and node["default"] is None:
            problems.append(f"{path}: null default")
        missing = set(node.get("required", ())) - set(node.get("properties", {}))
        if missing:
            problems.append(f"{path}: required fields without a schema {sorted(missing)}")
        if node.get("x-kubernetes-list-type") == "map":
            keys = node.get("x-kubernetes-list-map-keys") or []
            if not keys or not set(keys) <= set(node["items"].get("required", ())):
                problems.append(f"{path}: list-type map needs required map keys")
    assert not problems, "\n".join(problems)


def test_metadata_is_left_to_the_api_server() -> None:
    for crd in generate_crds():
        schema = crd_schema(crd)
        assert schema["properties"]["metadata"] == {"type": "object"}
        assert schema["properties"]["apiVersion"] == {"type": "string"}
        assert schema["required"] == ["spec"]


def test_defaults_are_valid_for_their_own_schema() -> None:
    checked = 0
    for path, node in ALL_NODES:
        if "default" in node:
            errors = list(jsonschema.Draft4Validator(to_json_schema(node)).iter_errors(node["default"]))
            assert not errors, f"{path}: default {node['default']!r} is invalid: {errors[0].message}"
            checked += 1
    assert checked >= 10


def test_patterns_are_re2_compatible() -> None:
    patterns = [(path, node["pattern"]) for path, node in ALL_NODES if "pattern" in node]
    assert len(patterns) > 20
    for path, pattern in patterns:
        try:
            re2.compile(pattern)
        except re2.error as err:  # pragma: no cover - failure path
            pytest.fail(f"{path}: pattern {pattern!r} is not RE2: {err}")


def test_cel_rules_compile() -> None:
    environment = celpy.Environment()
    rules = [
        (path, validation)
        for path, node in ALL_NODES
        for validation in node.get("x-kubernetes-validations", ())
    ]
    assert len(rules) > 40
    for path, validation in rules:
        assert set(validation) == {"rule", "message"}, path
        environment.compile(validation["rule"])


def test_cel_rules_on_unbounded_lists_have_limits() -> None:
    # The API server refuses CEL rules whose cost it cannot bound; list rules need maxItems.
    for path, node in ALL_NODES:
        if node.get("type") == "array" and node.get("x-kubernetes-validations"):
            assert "maxItems" in node, f"{path}: CEL on a list without maxItems"
