"""A small IAM policy evaluator for identity-based policies in one account.

moto's IAM enforcement matches actions only (of the condition keys it reads just
``sts:ExternalId``), so the generated controller policies are checked here instead,
following AWS's evaluation logic as documented in the IAM User Guide ("Policy
evaluation logic", "IAM JSON policy elements: Condition operators"):

* an explicit ``Deny`` wins over any ``Allow``; no matching ``Allow`` is an implicit deny;
* ``Action``/``NotAction`` match case-insensitively with ``*`` and ``?``;
* ``Resource``/``NotResource`` match segment by segment (``arn:partition:service:region:account:resource``),
  case-sensitively, wildcards never spanning a ``:`` between segments; ``*`` alone matches anything;
* every operator of a ``Condition`` block, every key under it, must hold (AND); the values listed
  for one key are alternatives (OR). Condition key names are case-insensitive.
* a key missing from the request makes positive operators false, negated ones (``StringNotEquals``...)
  true, ``...IfExists`` true, ``Null: true`` true; ``ForAllValues`` holds on a missing key,
  ``ForAnyValue`` does not.

Anything outside this subset (policy variables, numeric/date/IP operators, ``Principal``) raises
``UnsupportedPolicy`` rather than guessing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

PolicyDocument = Mapping[str, Any]
ContextValue = str | Sequence[str]

_STRING_OPERATORS = {
    "StringEquals": (lambda value, pattern: value == pattern, False),
    "StringNotEquals": (lambda value, pattern: value == pattern, True),
    "StringEqualsIgnoreCase": (lambda value, pattern: value.lower() == pattern.lower(), False),
    "StringNotEqualsIgnoreCase": (lambda value, pattern: value.lower() == pattern.lower(), True),
    "StringLike": (lambda value, pattern: _glob(pattern).fullmatch(value) is not None, False),
    "StringNotLike": (lambda value, pattern: _glob(pattern).fullmatch(value) is not None, True),
    "ArnEquals": (lambda value, pattern: _arn_matches(pattern, value), False),
    "ArnLike": (lambda value, pattern: _arn_matches(pattern, value), False),
    "ArnNotEquals": (lambda value, pattern: _arn_matches(pattern, value), True),
    "ArnNotLike": (lambda value, pattern: _arn_matches(pattern, value), True),
    "Bool": (lambda value, pattern: value.lower() == pattern.lower(), False),
}


class UnsupportedPolicy(ValueError):
    """The policy uses IAM syntax this evaluator does not implement."""


@dataclass(slots=True, frozen=True)
class Request:
    """One authorization: an action on a resource with the request context's condition keys."""

    action: str
    resource: str
    context: Mapping[str, ContextValue] = field(default_factory=dict)

    def values(self, key: str) -> tuple[str, ...] | None:
        """The context values of ``key`` (case-insensitive), None when the key is absent."""
        lowered = key.lower()
        for name, value in self.context.items():
            if name.lower() == lowered:
                return (value,) if isinstance(value, str) else tuple(value)
        return None


@dataclass(slots=True, frozen=True)
class Decision:
    outcome: Literal["allow", "explicit-deny", "implicit-deny"]
    statements: tuple[str, ...] = ()  # Sids (or positions) of the deciding statements

    @property
    def allowed(self) -> bool:
        return self.outcome == "allow"


def evaluate(policies: Iterable[PolicyDocument], request: Request) -> Decision:
    """Explicit deny > allow > implicit deny over every statement of every policy."""
    allows: list[str] = []
    denies: list[str] = []
    for policy_index, policy in enumerate(policies):
        for statement_index, statement in enumerate(_statements(policy)):
            if _statement_applies(statement, request):
                sid = str(statement.get("Sid") or f"policy[{policy_index}].Statement[{statement_index}]")
                (denies if statement["Effect"] == "Deny" else allows).append(sid)
    if denies:
        return Decision("explicit-deny", tuple(denies))
    if allows:
        return Decision("allow", tuple(allows))
    return Decision("implicit-deny")


def _statements(policy: PolicyDocument) -> list[Mapping[str, Any]]:
    statements = policy.get("Statement", [])
    statements = [statements] if isinstance(statements, Mapping) else list(statements)
    for statement in statements:
        if statement.get("Effect") not in ("Allow", "Deny"):
            raise UnsupportedPolicy(f"statement {statement.get('Sid', '?')}: Effect must be Allow or Deny")
        if "Principal" in statement or "NotPrincipal" in statement:
            raise UnsupportedPolicy(f"statement {statement.get('Sid', '?')}: resource policies are not evaluated")
        if ("Action" in statement) == ("NotAction" in statement):
            raise UnsupportedPolicy(f"statement {statement.get('Sid', '?')}: exactly one of Action and NotAction")
        if ("Resource" in statement) == ("NotResource" in statement):
            raise UnsupportedPolicy(f"statement {statement.get('Sid', '?')}: exactly one of Resource and NotResource")
    return statements


def _as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else [str(v) for v in value]


def _statement_applies(statement: Mapping[str, Any], request: Request) -> bool:
    if "Action" in statement:
        if not any(_action_matches(pattern, request.action) for pattern in _as_list(statement["Action"])):
            return False
    elif any(_action_matches(pattern, request.action) for pattern in _as_list(statement["NotAction"])):
        return False
    if "Resource" in statement:
        if not any(_arn_matches(pattern, request.resource) for pattern in _as_list(statement["Resource"])):
            return False
    elif any(_arn_matches(pattern, request.resource) for pattern in _as_list(statement["NotResource"])):
        return False
    return conditions_hold(statement.get("Condition") or {}, request)


def _action_matches(pattern: str, action: str) -> bool:
    return _glob(pattern.lower()).fullmatch(action.lower()) is not None


@lru_cache(maxsize=4096)
def _glob(pattern: str) -> re.Pattern[str]:
    """IAM wildcards: ``*`` any run of characters (``/`` included), ``?`` exactly one."""
    if "${" in pattern:
        raise UnsupportedPolicy(f"policy variables are not supported: {pattern!r}")
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.DOTALL)


def _arn_matches(pattern: str, arn: str) -> bool:
    if pattern == "*":
        return True
    if arn == "*":  # an action without resource-level permissions is authorized against "*" only
        return False
    wanted, actual = pattern.split(":", 5), arn.split(":", 5)
    if len(wanted) != 6 or len(actual) != 6:
        return False
    return all(_glob(w).fullmatch(a) is not None for w, a in zip(wanted, actual, strict=True))


def conditions_hold(block: Mapping[str, Mapping[str, Any]], request: Request) -> bool:
    return all(
        _condition_holds(operator, key, _as_list(values), request)
        for operator, body in block.items()
        for key, values in body.items()
    )


def _condition_holds(operator: str, key: str, wanted: list[str], request: Request) -> bool:
    qualifier, _, name = operator.rpartition(":")
    if qualifier not in ("", "ForAllValues", "ForAnyValue"):
        raise UnsupportedPolicy(f"condition operator {operator!r}")
    if_exists = name.endswith("IfExists")
    name = name.removesuffix("IfExists")
    present = request.values(key)
    if name == "Null":
        if qualifier or if_exists:
            raise UnsupportedPolicy(f"condition operator {operator!r}")
        absent = present is None or len(present) == 0
        return any((w.lower() == "true") == absent for w in wanted)
    if name not in _STRING_OPERATORS:
        raise UnsupportedPolicy(f"condition operator {operator!r}")
    match, negated = _STRING_OPERATORS[name]

    def one(value: str) -> bool:
        hit = any(match(value, pattern) for pattern in wanted)
        return not hit if negated else hit

    if qualifier == "ForAllValues":
        return present is None or all(one(value) for value in present)
    if qualifier == "ForAnyValue":
        return present is not None and any(one(value) for value in present)
    if present is None or not present:
        return if_exists or negated
    return any(one(value) for value in present)
