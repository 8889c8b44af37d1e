"""Validate a manifest the way the API server would with our CRDs: defaulting, schema, CEL rules.

For tests and the in-process fake API server. It needs the test dependencies
``jsonschema`` and ``cel-python`` (imported lazily, so the reconciler image
does not need them). Transition rules (those using ``oldSelf``) run only when
an old object is given, as on an update.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator, Mapping
from typing import Any

from .errors import format_loc


def crd_schema(crd: Mapping[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def find_crd(manifest: Mapping[str, Any], crds: list[dict[str, Any]]) -> dict[str, Any] | None:
    group = str(manifest.get("apiVersion", "")).partition("/")[0]
    for crd in crds:
        if crd["spec"]["group"] == group and crd["spec"]["names"]["kind"] == manifest.get("kind"):
            return crd
    return None


def apply_defaults(schema: Mapping[str, Any], value: Any) -> Any:
    """Structural defaulting: fill absent properties that have a ``default``, recursively (returns a copy)."""
    value = copy.deepcopy(value)
    _default_in_place(schema, value)
    return value


def _default_in_place(schema: Mapping[str, Any], value: Any) -> None:
    if isinstance(value, dict):
        for name, child in schema.get("properties", {}).items():
            if name not in value and "default" in child:
                value[name] = copy.deepcopy(child["default"])
            if name in value:
                _default_in_place(child, value[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            for item in value.values():
                _default_in_place(extra, item)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            _default_in_place(schema["items"], item)


def to_json_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAPI v3 structural schema as plain JSON Schema; unknown fields become errors (strict validation)."""
    result: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "properties":
            result[key] = {name: to_json_schema(child) for name, child in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, Mapping):
            result[key] = to_json_schema(value)
        elif key == "anyOf":
            result[key] = [to_json_schema(variant) for variant in value]
        elif not key.startswith("x-kubernetes-") and key != "nullable":
            result[key] = value
    if schema.get("nullable") and "type" in result:
        result["type"] = [result["type"], "null"]
    if schema.get("x-kubernetes-int-or-string") and "anyOf" not in result:
        result["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if schema.get("x-kubernetes-list-type") == "set":
        result["uniqueItems"] = True
    if "properties" in result and not schema.get("x-kubernetes-preserve-unknown-fields"):
        result["additionalProperties"] = False
    return result


def schema_errors(schema: Mapping[str, Any], manifest: Any) -> list[str]:
    import jsonschema

    validator = jsonschema.Draft4Validator(to_json_schema(schema))
    return sorted(
        f"{format_loc(error.absolute_path, schema) or '<root>'}: {error.message}"
        for error in validator.iter_errors(manifest)
    )


def cel_errors(schema: Mapping[str, Any], value: Any, old: Any = None) -> list[str]:
    """Failures of ``x-kubernetes-validations`` rules, as ``path: message`` lines."""
    return [f"{path}: {message}" for path, message in _walk_cel(schema, value, old, "")]


def validate(manifest: Mapping[str, Any], crds: list[dict[str, Any]], old: Any = None) -> list[str]:
    """Default, then validate ``manifest`` against its CRD's schema and CEL rules; ``[]`` when valid."""
    crd = find_crd(manifest, crds)
    if crd is None:
        return [f"no CRD for {manifest.get('apiVersion')}/{manifest.get('kind')}"]
    schema = crd_schema(crd)
    defaulted = apply_defaults(schema, manifest)
    return schema_errors(schema, defaulted) + cel_errors(schema, defaulted, old)


def _walk_cel(schema: Mapping[str, Any], value: Any, old: Any, path: str) -> Iterator[tuple[str, str]]:
    for validation in schema.get("x-kubernetes-validations", ()):
        rule = validation["rule"]
        if "oldSelf" in rule and old is None:
            continue
        if not _evaluate(rule, value, old):
            yield path or "<root>", validation["message"]
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for name, child in value.items():
            if name in properties:
                child_schema, child_path = properties[name], f"{path}.{name}" if path else name
            elif isinstance(extra, Mapping):
                child_schema, child_path = extra, f"{path}[{name}]"
            else:
                continue
            old_child = old.get(name) if isinstance(old, dict) else None
            yield from _walk_cel(child_schema, child, old_child, child_path)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            # Only map-keyed lists correlate items with the old object; positional lists do not.
            yield from _walk_cel(schema["items"], item, None, f"{path}[{index}]")


def _evaluate(rule: str, value: Any, old: Any) -> bool:
    import celpy

    activation = {"self": celpy.json_to_cel(value)}
    if old is not None:
        activation["oldSelf"] = celpy.json_to_cel(old)
    try:
        return bool(_program(rule).evaluate(activation))
    except celpy.CELEvalError:
        return False  # the API server treats an evaluation error as a failed rule


@functools.cache
def _program(rule: str) -> Any:
    import celpy

    environment = celpy.Environment()
    return environment.program(environment.compile(rule))
