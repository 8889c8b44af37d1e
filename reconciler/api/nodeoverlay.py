"""NodeOverlay (``karpenter.sh/v1alpha1``, feature gate ``NodeOverlay``): price and capacity overrides.

An overlay selects instance-type offerings with node-selector ``requirements`` (well-known labels such as
instance type or capacity type, ``karpenter.sh/nodepool``, and the NodePool's own labels) and changes what
the scheduling simulation believes about them: ``price`` (an absolute price), ``priceAdjustment``
(``+0.5`` / ``-0.5`` in the catalogue's currency, or ``+10%`` / ``-15%``), and ``capacity`` (extended
resources added to the instance type; cpu, memory, ephemeral-storage and pods cannot be changed). Several
overlays merge by ``weight`` (see ``reconciler.cloud.overlay``).
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Final, Literal

from pydantic import ConfigDict, Field, Strict, model_validator

from .base import ApiModel, HasConditions, ObjectMeta, ResourceList, SchemaExtra, cel
from .errors import field_error
from .labels import restricted_key_cel, restricted_label_problem
from .requirements import NUMERIC_OPERATORS, LabelKeySyntax, LabelValue, Operator, normalize_label_key

API_VERSION: Final = "karpenter.sh/v1alpha1"
# Resources an overlay may not add or change: the scheduler's model of them comes from the provider.
RESTRICTED_CAPACITY = ("cpu", "memory", "ephemeral-storage", "pods")
PRICE_ADJUSTMENT_PATTERN = r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$"
PRICE_PATTERN = r"^\d+(\.\d+)?$"

_REQUIREMENTS_RULES = cel(
    ("self.all(x, x.operator == 'NotIn' ? x.values.size() != 0 : true)",
     "requirements with operator 'NotIn' must have a value defined"),
    ("self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
     "requirements with operator 'In' must have a value defined"),
    ("self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? "
     "(x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
     "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value"),
)


class OverlayRequirement(ApiModel):
    """A node selector requirement (no minValues) on well-known or NodePool labels."""

    key: Annotated[LabelKeySyntax, SchemaExtra(cel(*restricted_key_cel(allow_nodepool=True)))]
    operator: Operator
    values: Annotated[list[LabelValue], SchemaExtra({"x-kubernetes-list-type": "atomic"})] | None = None

    @model_validator(mode="after")
    def _check(self) -> OverlayRequirement:
        problem = restricted_label_problem(normalize_label_key(self.key), allow_nodepool=True)
        if problem:
            raise field_error(problem, "key")
        values = self.values or []
        if self.operator in ("In", "NotIn") and not values:
            raise field_error(f"operator {self.operator} requires at least one value", "values")
        if self.operator in NUMERIC_OPERATORS and (len(values) != 1 or not values[0].isdigit()):
            raise field_error(
                f"operator {self.operator} requires exactly one value, a non-negative integer (got {values})", "values"
            )
        return self


def _capacity_problem(capacity: dict[str, object] | None) -> str | None:
    restricted = sorted(set(capacity or ()) & set(RESTRICTED_CAPACITY))
    if restricted:
        return f"invalid capacity {restricted[0]!r}: an overlay only adds extended resources, not " + ", ".join(
            RESTRICTED_CAPACITY)
    return None


class NodeOverlaySpec(ApiModel):
    requirements: Annotated[list[OverlayRequirement], Field(max_length=100), SchemaExtra(
        {**_REQUIREMENTS_RULES, "x-kubernetes-list-type": "atomic"})]
    price_adjustment: Annotated[str, Field(pattern=PRICE_ADJUSTMENT_PATTERN)] | None = None
    price: Annotated[str, Field(pattern=PRICE_PATTERN)] | None = None
    capacity: Annotated[ResourceList, SchemaExtra(cel(
        ("self.all(x, !(x in ['cpu', 'memory', 'ephemeral-storage', 'pods']))", "invalid resource restricted")
    ))] | None = None
    weight: Annotated[int, Strict(), Field(ge=1, le=10000)] | None = None

    model_config = ConfigDict(json_schema_extra=cel(
        ("!has(self.price) || !has(self.priceAdjustment)", "cannot set both 'price' and 'priceAdjustment'")))

    @model_validator(mode="after")
    def _check(self) -> NodeOverlaySpec:
        if self.price is not None and self.price_adjustment is not None:
            raise field_error("cannot set both 'price' and 'priceAdjustment'", "price")
        problem = _capacity_problem(self.capacity)
        if problem:
            raise field_error(problem, "capacity")
        return self


class NodeOverlayStatus(HasConditions):
    pass


class NodeOverlay(ApiModel):
    """A NodeOverlay (karpenter.sh/v1alpha1): price and extended-resource overrides for matching offerings."""

    api_version: Literal["karpenter.sh/v1alpha1"] = API_VERSION
    kind: Literal["NodeOverlay"] = "NodeOverlay"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodeOverlaySpec
    status: NodeOverlayStatus | None = None

    KIND: ClassVar[str] = "NodeOverlay"

    @property
    def name(self) -> str:
        return self.metadata.name or ""
