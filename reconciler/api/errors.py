"""Validation errors as one clean line per problem, each naming its field path.

Model validators raise :func:`field_error`; a problem found by a validator on
an enclosing object can name the exact sub-field with ``subpath`` (for example
a duplicate taint found while looking at both taint lists). Everything is
reported through :class:`ValidationFailure`, never as a pydantic traceback.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticCustomError

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ERROR_TYPE = "adze_field"


@dataclass(frozen=True, slots=True)
class Problem:
    """One validation problem: where (dotted/indexed field path) and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ValidationFailure(ValueError):
    """An object failed validation; ``str()`` gives one ``path: message`` line per problem."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        super().__init__("\n".join(str(problem) for problem in self.problems))

    def with_prefix(self, prefix: str) -> ValidationFailure:
        return ValidationFailure([Problem(join_path(prefix, p.path), p.message) for p in self.problems])


def field_error(message: str, subpath: str = "") -> PydanticCustomError:
    """An error for a model validator; ``subpath`` (e.g. ``"startupTaints[1]"``) narrows the location."""
    return PydanticCustomError(ERROR_TYPE, "{message}", {"message": message, "subpath": subpath})


def join_path(prefix: str, path: str) -> str:
    if not prefix:
        return path
    if not path:
        return prefix
    return f"{prefix}{path}" if path.startswith("[") else f"{prefix}.{path}"


def format_loc(loc: Iterable[str | int], schema: Mapping[str, Any] | None = None) -> str:
    """``("spec", "requirements", 0, "key")`` -> ``spec.requirements[0].key``; map keys go in brackets.

    With the object's (inlined) JSON schema, map keys are told from field names exactly;
    without it, keys that are not identifiers (``karpenter.sh/foo``) are bracketed.
    """
    path = ""
    node: Mapping[str, Any] | None = schema
    for part in loc:
        if part == "[key]":  # pydantic marks an error in a mapping's key this way
            continue
        is_key = False
        if node is not None:
            node, is_key = _descend(node, part)
        if isinstance(part, int) or is_key or not _IDENTIFIER.match(part):
            path += f"[{part}]"
        else:
            path = join_path(path, part)
    return path


def _descend(node: Mapping[str, Any], part: str | int) -> tuple[Mapping[str, Any] | None, bool]:
    if isinstance(part, int):
        return node.get("items"), False
    properties = node.get("properties") or {}
    if part in properties:
        return properties[part], False
    extra = node.get("additionalProperties")
    if isinstance(extra, Mapping):
        return extra, True
    return None, False


def problems_from_validation_error(
    err: ValidationError, prefix: str = "", schema: Mapping[str, Any] | None = None
) -> list[Problem]:
    """One :class:`Problem` per error; pass the model's inlined schema to bracket map keys exactly."""
    problems = []
    for detail in err.errors(include_url=False):
        ctx = detail.get("ctx") or {}
        path = format_loc(detail["loc"], schema)
        subpath = ctx.get("subpath") if detail["type"] == ERROR_TYPE else ""
        if subpath:
            path = join_path(path, subpath)
        problems.append(Problem(join_path(prefix, path), _message(detail)))
    return problems


def format_validation_error(err: ValidationError | ValidationFailure, prefix: str = "") -> str:
    """One ``path: message`` line per problem; ``prefix`` (e.g. ``adze:nodePools[1]``) starts each path."""
    if isinstance(err, ValidationFailure):
        return str(err.with_prefix(prefix))
    return "\n".join(str(problem) for problem in problems_from_validation_error(err, prefix))


def failure_from(err: ValidationError, prefix: str = "", schema: Mapping[str, Any] | None = None) -> ValidationFailure:
    return ValidationFailure(problems_from_validation_error(err, prefix, schema))


_TYPE_MESSAGES = {
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "dict_type": "must be an object",
    "list_type": "must be a list",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be a whole number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "datetime_type": "must be an RFC 3339 date-time",
    "datetime_parsing": "must be an RFC 3339 date-time",
    "datetime_from_date_parsing": "must be an RFC 3339 date-time",
}


def _message(detail: Any) -> str:
    kind = detail["type"]
    ctx = detail.get("ctx") or {}
    if kind == ERROR_TYPE:
        return str(ctx["message"])
    if kind in _TYPE_MESSAGES:
        return f"{_TYPE_MESSAGES[kind]}, got {_short(detail.get('input'))}"
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}, got {_short(detail.get('input'))}"
    if kind == "value_error":
        return str(ctx.get("error", detail["msg"]))
    message: str = detail["msg"]
    message = message[:1].lower() + message[1:]
    if kind in ("too_long", "too_short"):  # the input is a whole list or map: too long to repeat
        return message
    return f"{message} (got {_short(detail.get('input'))})"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
