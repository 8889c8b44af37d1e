"""Building blocks shared by the Karpenter API models.

* :class:`ApiModel`: camelCase aliases, unknown fields rejected, ``null``
  treated as absent (the API server prunes nulls before defaulting).
* Constrained strings (:func:`matching`) that fail with a readable message and
  still publish their regex as the CRD ``pattern``.
* :data:`Quantity` (int-or-string resource quantities), :class:`ObjectMeta`,
  :class:`Condition`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainValidator, Strict, model_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from reconciler.model.quantity import QuantityError, parse_quantity

from .errors import ERROR_TYPE


@dataclass(frozen=True, slots=True, eq=False)  # identity hash: Annotated metadata must be hashable
class SchemaExtra:
    """Annotation that merges ``extra`` into the field's generated JSON schema."""

    extra: dict[str, Any]

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict[str, Any]:
        schema: dict[str, Any] = handler(core_schema)
        schema.update(self.extra)
        return schema


def cel(*rules: tuple[str, str]) -> dict[str, Any]:
    """``x-kubernetes-validations`` entries from ``(rule, message)`` pairs."""
    return {"x-kubernetes-validations": [{"message": message, "rule": rule} for rule, message in rules]}


def cel_quote(text: str) -> str:
    """``text`` as a single-quoted CEL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def invalid(message: str) -> PydanticCustomError:
    return PydanticCustomError(ERROR_TYPE, "{message}", {"message": message, "subpath": ""})


def matching(regex: str, describe: Callable[[str], str], **schema: Any) -> tuple[Any, ...]:
    """Metadata checking a string against ``regex`` with a friendly message; the regex becomes the CRD pattern.

    Used as ``Annotated[str, *matching(...)]`` (a type checker then sees a ``str``). ``regex`` must be valid
    both for Python and for RE2 (the API server's engine).
    """
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if not compiled.search(value):
            raise invalid(describe(value))
        return value

    return AfterValidator(check), SchemaExtra({"pattern": regex, **schema})


def check_with(func: Callable[[Any], str | None]) -> AfterValidator:
    """An after-validator from a function returning a problem description (or ``None`` if fine)."""

    def check(value: Any) -> Any:
        problem = func(value)
        if problem:
            raise invalid(problem)
        return value

    return AfterValidator(check)


class ApiModel(BaseModel):
    """Base of every API object part: camelCase JSON, strict about unknown fields, immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        validate_default=False,
    )

    @model_validator(mode="before")
    @classmethod
    def _nulls_are_absent(cls, data: Any) -> Any:
        # A JSON null for a non-nullable field is pruned by the API server and then defaulted.
        if isinstance(data, dict):
            return {key: value for key, value in data.items() if value is not None}
        return data

    def to_manifest(self) -> dict[str, Any]:
        """The JSON-ready manifest (camelCase keys, unset fields omitted)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


# --- quantities -------------------------------------------------------------------------------

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
INT_OR_STRING_SCHEMA = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "x-kubernetes-int-or-string": True,
}


def _quantity(value: Any) -> str | int:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise invalid(f"must be a quantity such as 100m, 1.5, 512Mi or 2Gi, got {value!r}")
    if isinstance(value, float):
        value = repr(value) if not value.is_integer() else int(value)
    if isinstance(value, str) and not re.match(QUANTITY_PATTERN, value):
        raise invalid(f"{value!r} is not a valid quantity (expected e.g. 100m, 1.5, 512Mi, 2Gi)")
    try:
        parse_quantity(value)
    except QuantityError as err:
        raise invalid(str(err)) from None
    return value


class _QuantitySchema:
    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict[str, Any]:
        return {**INT_OR_STRING_SCHEMA, "pattern": QUANTITY_PATTERN}


# Kept as written (``"4Gi"`` or ``4``) so manifests round-trip; parse with ``parse_quantity`` / ``Resources``.
Quantity = Annotated[Any, PlainValidator(_quantity), _QuantitySchema()]
ResourceList = dict[str, Quantity]

# --- metadata and conditions -----------------------------------------------------------------


class ObjectMeta(ApiModel):
    """Standard Kubernetes object metadata; keys this model does not name are kept as they are."""

    model_config = ConfigDict(extra="allow")

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: datetime | None = None
    deletion_timestamp: datetime | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[dict[str, Any]] | None = None
    finalizers: list[str] | None = None
    managed_fields: list[dict[str, Any]] | None = None
    self_link: str | None = None


CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
CONDITION_REASON_PATTERN = r"^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?|)$"

ConditionType = Annotated[
    str,
    *matching(CONDITION_TYPE_PATTERN, lambda v: f"{v!r} is not a valid condition type (CamelCase)"),
    Field(max_length=316),
]
ConditionReason = Annotated[
    str,
    *matching(CONDITION_REASON_PATTERN, lambda v: f"{v!r} is not a valid condition reason (CamelCase)"),
    Field(max_length=1024),
]


class Condition(ApiModel):
    """A status condition (metav1.Condition)."""

    type: ConditionType
    status: Literal["True", "False", "Unknown"]
    last_transition_time: datetime
    reason: ConditionReason = ""
    message: Annotated[str, Field(max_length=32768)] = ""
    observed_generation: Annotated[int, Strict(), Field(ge=0)] | None = None


CONDITIONS_SCHEMA = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}


class HasConditions(ApiModel):
    """Status mixin: lookup helpers over ``conditions``."""

    conditions: Annotated[list[Condition], SchemaExtra(CONDITIONS_SCHEMA)] | None = None

    def condition(self, condition_type: str) -> Condition | None:
        return next((c for c in self.conditions or () if c.type == condition_type), None)

    def is_true(self, condition_type: str) -> bool:
        found = self.condition(condition_type)
        return found is not None and found.status == "True"
