"""Turn a pydantic model's JSON schema into a structural OpenAPI v3 schema for a CRD.

apiextensions.k8s.io/v1 requires *structural* schemas: every node states its
``type`` (or is int-or-string / preserve-unknown-fields), no ``$ref``, ``anyOf``
only for int-or-string, no ``additionalProperties`` next to ``properties``,
no ``title``/``const``/``propertyNames``. Optional fields are just not
``required``; they are deliberately not ``nullable`` so the API server prunes a
null and applies the default, which is also how the models treat null.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

_DROPPED_KEYS = ("title", "propertyNames")
_VALIDATIONS = "x-kubernetes-validations"


def inline_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema with references inlined and made structural."""
    generated = model.model_json_schema(by_alias=True, mode="validation")
    definitions = generated.pop("$defs", {})
    return _Converter(definitions).convert(generated)


@functools.cache
def _cached_inline_schema(model: type[BaseModel]) -> Mapping[str, Any]:
    return inline_schema(model)


def error_schema(model: type[BaseModel]) -> Mapping[str, Any]:
    """A shared (do not modify) inlined schema of ``model``, for naming error paths."""
    return _cached_inline_schema(model)


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The openAPIV3Schema for a top-level API object model."""
    schema = inline_schema(model)
    properties = schema["properties"]
    # The API server owns these: ObjectMeta is validated by the server itself, never by the CRD schema.
    properties["apiVersion"] = {"type": "string"}
    properties["kind"] = {"type": "string"}
    properties["metadata"] = {"type": "object"}
    schema["required"] = [name for name in schema.get("required", []) if name not in ("apiVersion", "kind", "metadata")]
    return schema


class _Converter:
    def __init__(self, definitions: dict[str, Any]) -> None:
        self._definitions = definitions

    def convert(self, node: dict[str, Any]) -> dict[str, Any]:
        node = self._inline(node)
        result: dict[str, Any] = {}
        for key, value in node.items():
            if key in _DROPPED_KEYS or (key == "default" and value is None):
                continue
            if key == "const":
                result["enum"] = [value]
            elif key == "properties":
                result[key] = {name: self.convert(child) for name, child in value.items()}
            elif key in ("items", "additionalProperties") and isinstance(value, dict):
                result[key] = self.convert(value)
            else:
                result[key] = value
        if result.get("additionalProperties") is True or result.get("additionalProperties") is False:
            # true: an open map or preserve-unknown object; false: pruning already drops unknown fields.
            del result["additionalProperties"]
            if "properties" not in result and not result.get("x-kubernetes-preserve-unknown-fields"):
                result["x-kubernetes-preserve-unknown-fields"] = True
        if "properties" in result and "additionalProperties" in result:
            del result["additionalProperties"]
        if not result.get("required", True):
            del result["required"]
        _assert_structural(result)
        return result

    def _inline(self, node: dict[str, Any]) -> dict[str, Any]:
        """Resolve ``$ref``/single ``allOf``/``anyOf [X, null]`` into one plain node, keeping sibling keys."""
        while True:
            if "$ref" in node:
                target = self._definitions[node["$ref"].rsplit("/", 1)[-1]]
                node = _merge(target, {k: v for k, v in node.items() if k != "$ref"})
            elif "allOf" in node and len(node["allOf"]) == 1:
                node = _merge(node["allOf"][0], {k: v for k, v in node.items() if k != "allOf"})
            elif "anyOf" in node and not node.get("x-kubernetes-int-or-string"):
                variants = [variant for variant in node["anyOf"] if variant != {"type": "null"}]
                rest = {k: v for k, v in node.items() if k != "anyOf"}
                if len(variants) == 1 or all(variant.get("x-kubernetes-int-or-string") for variant in variants[:1]):
                    node = _merge(variants[0], rest)
                else:
                    raise ValueError(f"cannot express a union as a structural schema: {node['anyOf']}")
            else:
                return node


def _merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    merged = {**base, **overrides}
    if _VALIDATIONS in base and _VALIDATIONS in overrides:
        merged[_VALIDATIONS] = [*base[_VALIDATIONS], *overrides[_VALIDATIONS]]
    return merged


def _assert_structural(node: dict[str, Any]) -> None:
    if "$ref" in node or "allOf" in node or "oneOf" in node:
        raise ValueError(f"non-structural schema node: {sorted(node)}")
    if "anyOf" in node and not node.get("x-kubernetes-int-or-string"):
        raise ValueError(f"anyOf outside int-or-string: {node['anyOf']}")
    if "type" not in node and not (
        node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")
    ):
        raise ValueError(f"schema node without a type: {sorted(node)}")
