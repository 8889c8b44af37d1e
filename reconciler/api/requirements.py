"""Node selector requirements (with minValues), taints and the node class reference."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Field, ModelWrapValidatorHandler, Strict, model_validator

from .base import ApiModel, SchemaExtra, cel, check_with, matching
from .errors import field_error
from .labels import (
    EC2NODECLASS_LABEL,
    LABEL_KEY_MAX_LENGTH,
    LABEL_VALUE_MAX_LENGTH,
    LABEL_VALUE_PATTERN,
    QUALIFIED_NAME_PATTERN,
    label_value_problem,
    normalize_label_key,
    qualified_name_problem,
    restricted_key_cel,
    restricted_label_problem,
)

Operator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]
NUMERIC_OPERATORS = ("Gt", "Lt", "Gte", "Lte")
_NON_NEGATIVE_INTEGER = re.compile(r"^[0-9]+$")

LabelValue = Annotated[
    str,
    check_with(label_value_problem),
    SchemaExtra({"pattern": LABEL_VALUE_PATTERN, "maxLength": LABEL_VALUE_MAX_LENGTH}),
]
LabelKeySyntax = Annotated[
    str,
    check_with(qualified_name_problem),
    SchemaExtra({"pattern": QUALIFIED_NAME_PATTERN, "maxLength": LABEL_KEY_MAX_LENGTH}),
]

_REQUIREMENT_RULES = cel(
    (
        "self.operator != 'In' || (has(self.values) && size(self.values) != 0)",
        "requirements with operator 'In' must have a value defined",
    ),
    (
        "!(self.operator in ['Gt', 'Lt', 'Gte', 'Lte']) || (has(self.values) && size(self.values) == 1"
        " && self.values[0].matches('^[0-9]+$'))",
        "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single non-negative integer value",
    ),
    (
        "!(self.operator == 'In' && has(self.minValues)) || (has(self.values) && size(self.values) >= self.minValues)",
        "requirements with 'minValues' must have at least that many values specified in the 'values' field",
    ),
)


class NodeSelectorRequirementWithMinValues(ApiModel):
    """A node selector requirement with an optional minimum number of distinct values (minValues)."""

    model_config = ConfigDict(json_schema_extra=_REQUIREMENT_RULES)
    # Whether the karpenter.sh/nodepool key may be used (NodeClaims: yes; NodePools: Karpenter sets it).
    allow_nodepool_key: ClassVar[bool] = True
    # Restricted-domain keys allowed anyway (NodeClaims carry their node class label as a requirement).
    extra_allowed_keys: ClassVar[frozenset[str]] = frozenset()

    key: LabelKeySyntax
    operator: Operator
    values: Annotated[list[LabelValue], SchemaExtra({"x-kubernetes-list-type": "atomic"})] | None = None
    min_values: Annotated[int, Strict(), Field(ge=1, le=50)] | None = None

    @model_validator(mode="wrap")
    @classmethod
    def _once_per_distinct_requirement(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        # A NodeClaim lists every instance type its NodePool allows (~450 values, each checked as a label
        # value), and a cluster's claims repeat a few such lists: each distinct one is validated once and the
        # (immutable) result shared. Input that failed is validated, and reported, every time.
        key = _plain_requirement_key(cls, data)
        if key is None:
            return handler(data)
        known = _VALIDATED.get(key)
        if known is None:
            known = handler(data)
            if len(_VALIDATED) >= _VALIDATED_LIMIT:
                _VALIDATED.clear()
            _VALIDATED[key] = known
        return known

    @model_validator(mode="after")
    def _check_operator_values(self) -> NodeSelectorRequirementWithMinValues:
        problem = restricted_label_problem(
            normalize_label_key(self.key), allow_nodepool=self.allow_nodepool_key, extra_allowed=self.extra_allowed_keys
        )
        if problem:
            raise field_error(problem, "key")
        values = self.values or []
        if self.operator == "In" and not values:
            raise field_error("operator In requires at least one value", "values")
        if self.operator in NUMERIC_OPERATORS and (len(values) != 1 or not _NON_NEGATIVE_INTEGER.match(values[0])):
            raise field_error(
                f"operator {self.operator} requires exactly one value, a non-negative integer (got {values})",
                "values",
            )
        if self.operator == "In" and self.min_values is not None and len(values) < self.min_values:
            raise field_error(
                f"minValues {self.min_values} is more than the {len(values)} value(s) listed", "minValues"
            )
        return self

    @property
    def normalized_key(self) -> str:
        """The key with legacy (beta) label names mapped to their stable names, as Karpenter does."""
        return normalize_label_key(self.key)

    @property
    def integer_value(self) -> int | None:
        """The bound of a Gt/Lt/Gte/Lte requirement."""
        return int(self.values[0]) if self.operator in NUMERIC_OPERATORS and self.values else None


_VALIDATED: dict[tuple[Any, ...], Any] = {}
_VALIDATED_LIMIT = 4096
_PLAIN_FIELDS = frozenset({"key", "operator", "values", "minValues"})


def _plain_requirement_key(model: type, data: Any) -> tuple[Any, ...] | None:
    """A cache key for a requirement given as JSON would give it (strings, a list of strings, an integer
    minValues), exact types included (``1`` and ``True`` are equal keys otherwise); ``None`` for anything else."""
    if type(data) is not dict or not _PLAIN_FIELDS.issuperset(data):
        return None
    key, operator, values, min_values = data.get("key"), data.get("operator"), data.get("values"), data.get("minValues")
    if type(key) is not str or type(operator) is not str or (min_values is not None and type(min_values) is not int):
        return None
    if values is not None and (type(values) is not list or any(type(value) is not str for value in values)):
        return None
    return model, key, operator, None if values is None else tuple(values), min_values, "minValues" in data


class NodePoolRequirement(NodeSelectorRequirementWithMinValues):
    """A NodePool template requirement; the karpenter.sh/nodepool key is reserved for Karpenter."""

    allow_nodepool_key: ClassVar[bool] = False

    key: Annotated[LabelKeySyntax, SchemaExtra(cel(*restricted_key_cel(allow_nodepool=False)))]


class NodeClaimRequirement(NodeSelectorRequirementWithMinValues):
    """A NodeClaim requirement; may name the owning NodePool and node class."""

    extra_allowed_keys: ClassVar[frozenset[str]] = frozenset({EC2NODECLASS_LABEL})

    key: Annotated[
        LabelKeySyntax,
        SchemaExtra(cel(*restricted_key_cel(allow_nodepool=True, extra_allowed=frozenset({EC2NODECLASS_LABEL})))),
    ]


def _taint_part(what: str) -> tuple[Any, ...]:
    return matching(
        QUALIFIED_NAME_PATTERN,
        lambda v: f"taint {what} {v!r} must be [prefix/]name with alphanumerics, '-', '_' or '.'",
    )


TaintKey = Annotated[str, *_taint_part("key"), Field(min_length=1)]
TaintValue = Annotated[str, *_taint_part("value")]


class Taint(ApiModel):
    """A node taint."""

    key: TaintKey
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
    value: TaintValue | None = None
    time_added: datetime | None = None


def duplicate_taint_problem(taints: list[Taint] | None, startup_taints: list[Taint] | None) -> tuple[str, str] | None:
    """``(subpath, message)`` for the first taint whose key+effect repeats across both lists."""
    seen: set[tuple[str, str]] = set()
    for field, taint_list in (("taints", taints), ("startupTaints", startup_taints)):
        for index, taint in enumerate(taint_list or ()):
            pair = (taint.key, taint.effect)
            if pair in seen:
                return f"{field}[{index}]", f"duplicate taint key/effect pair {taint.key}:{taint.effect}"
            seen.add(pair)
    return None


class NodeClassReference(ApiModel):
    """Reference to the provider node class (group, kind and name are all required)."""

    group: Annotated[
        str,
        *matching(
            r"^[^/]*$",
            lambda v: f"group {v!r} may not contain '/': give the API group only (e.g. karpenter.k8s.aws)",
        ),
        Field(min_length=1),
        SchemaExtra(cel(("self != ''", "group may not be empty"))),
    ]
    kind: Annotated[str, Field(min_length=1), SchemaExtra(cel(("self != ''", "kind may not be empty")))]
    name: Annotated[str, Field(min_length=1), SchemaExtra(cel(("self != ''", "name may not be empty")))]
