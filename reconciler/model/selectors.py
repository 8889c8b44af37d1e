"""Kubernetes label selectors (``matchLabels`` + ``matchExpressions``) as immutable matchers.

The one selector type for pods' affinity and topology-spread terms and for PodDisruptionBudgets.
Kubernetes distinguishes a null selector from an empty one, and so does this type: ``None`` parses
to :data:`NOTHING` (a null PDB selector or affinity/spread ``labelSelector`` selects no pod) and
``{}`` to :data:`EVERYTHING` (an empty PDB selector selects every pod in its namespace).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


class SelectorError(ValueError):
    """An invalid label selector; the message names the offending field."""


@dataclass(slots=True, frozen=True)
class LabelExpression:
    key: str
    operator: str
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        if self.operator == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if self.operator == "Exists":
            return self.key in labels
        return self.key not in labels


@dataclass(slots=True, frozen=True)
class LabelSelector:
    """A selector; ``matches_nothing`` models a nil selector where Kubernetes selects no object."""

    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[LabelExpression, ...] = ()
    matches_nothing: bool = False

    @classmethod
    def from_manifest(cls, raw: Mapping[str, Any] | None, *, path: str = "labelSelector") -> LabelSelector:
        """Parse a selector; ``None`` gives a selector that matches nothing (Kubernetes' nil semantics)."""
        if raw is None:
            return NOTHING
        if not isinstance(raw, Mapping):
            raise SelectorError(f"{path}: expected a map")
        labels = raw.get("matchLabels") or {}
        if not isinstance(labels, Mapping):
            raise SelectorError(f"{path}.matchLabels: expected a map")
        expressions = []
        for i, expr in enumerate(raw.get("matchExpressions") or []):
            where = f"{path}.matchExpressions[{i}]"
            if not isinstance(expr, Mapping) or not expr.get("key"):
                raise SelectorError(f"{where}.key: required")
            operator = expr.get("operator")
            if operator not in _SELECTOR_OPERATORS:
                raise SelectorError(f"{where}.operator: {operator!r} is not one of {', '.join(_SELECTOR_OPERATORS)}")
            values = frozenset(str(v) for v in expr.get("values") or ())
            if operator in ("In", "NotIn") and not values:
                raise SelectorError(f"{where}.values: operator {operator} needs at least one value")
            if operator in ("Exists", "DoesNotExist") and values:
                raise SelectorError(f"{where}.values: must be empty for operator {operator}")
            expressions.append(LabelExpression(str(expr["key"]), operator, values))
        return cls(
            tuple(sorted((str(k), str(v)) for k, v in labels.items())),
            tuple(sorted(expressions, key=lambda e: (e.key, e.operator, sorted(e.values)))),
        )

    @classmethod
    def everything(cls) -> LabelSelector:
        """The empty selector ``{}``: selects every object."""
        return EVERYTHING

    @classmethod
    def nothing(cls) -> LabelSelector:
        """The null selector: selects no object."""
        return NOTHING

    def with_expression(self, expression: LabelExpression) -> LabelSelector:
        return LabelSelector(self.match_labels, (*self.expressions, expression), self.matches_nothing)

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.matches_nothing:
            return False
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        return all(expr.matches(labels) for expr in self.expressions)

    def __str__(self) -> str:
        if self.matches_nothing:
            return "<none>"
        parts = [f"{k}={v}" for k, v in self.match_labels]
        for expr in self.expressions:
            if expr.operator in ("In", "NotIn"):
                parts.append(f"{expr.key} {expr.operator.lower()} ({','.join(sorted(expr.values))})")
            elif expr.operator == "Exists":
                parts.append(expr.key)
            else:
                parts.append(f"!{expr.key}")
        return ",".join(parts) or "<all>"


NOTHING = LabelSelector(matches_nothing=True)
EVERYTHING = LabelSelector()
