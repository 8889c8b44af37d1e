"""``karpenter.sh/v1`` NodePool."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import ConfigDict, Field, Strict, model_validator

from reconciler.model.durations import parse_duration, parse_nillable_duration
from reconciler.model.resources import Resources

from .base import (
    ApiModel,
    HasConditions,
    ObjectMeta,
    ResourceList,
    SchemaExtra,
    cel,
    cel_quote,
    check_with,
    matching,
)
from .cron import SCHEDULE_PATTERN, cron_problem
from .errors import field_error
from .labels import (
    QUALIFIED_NAME_PATTERN,
    WELL_KNOWN_VALUES,
    label_key_problem,
    restricted_key_cel,
)
from .requirements import (
    LabelValue,
    NodeClassReference,
    NodePoolRequirement,
    Taint,
    duplicate_taint_problem,
)

GROUP = "karpenter.sh"
API_VERSION: Final = "karpenter.sh/v1"

NillableDuration = Annotated[
    str,
    *matching(
        r"^(([0-9]+(s|m|h))+|Never)$",
        lambda v: f"{v!r} is not a valid duration: use whole s, m or h units (e.g. 30s, 5m, 720h) or Never",
    ),
]
Duration = Annotated[
    str,
    *matching(
        r"^([0-9]+(s|m|h))+$",
        lambda v: f"{v!r} is not a valid duration: use whole s, m or h units (e.g. 30s, 5m, 24h)",
    ),
]
BudgetDuration = Annotated[
    str,
    *matching(
        r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$",
        lambda v: f"budget duration {v!r} must use hours and minutes only (e.g. 30m, 8h, 1h30m)",
    ),
]
BudgetNodes = Annotated[
    str,
    *matching(
        r"^((100|[0-9]{1,2})%|[0-9]+)$",
        lambda v: f"nodes {v!r} must be a node count (e.g. 5) or a percentage from 0% to 100%",
    ),
]
Schedule = Annotated[
    str,
    *matching(SCHEDULE_PATTERN, lambda v: cron_problem(v) or f"{v!r} is not a valid schedule"),
    check_with(cron_problem),
]
DisruptionReason = Literal["Underutilized", "Empty", "Drifted"]
ConsolidationPolicy = Literal["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"]

ATOMIC = SchemaExtra({"x-kubernetes-list-type": "atomic"})


class Budget(ApiModel):
    """Limits how many of a NodePool's nodes may be disrupted at once, optionally only during a schedule."""

    model_config = ConfigDict(
        json_schema_extra=cel(("has(self.schedule) == has(self.duration)", "'schedule' must be set with 'duration'"))
    )

    nodes: BudgetNodes = "10%"
    schedule: Schedule | None = None
    duration: BudgetDuration | None = None
    reasons: (
        Annotated[list[DisruptionReason], Field(max_length=50), SchemaExtra({"x-kubernetes-list-type": "set"})] | None
    ) = None

    @model_validator(mode="after")
    def _check_window(self) -> Budget:
        if (self.schedule is None) != (self.duration is None):
            raise field_error("schedule and duration must be set together")
        if self.reasons and len(set(self.reasons)) != len(self.reasons):
            raise field_error(f"reasons {self.reasons} lists a reason twice", "reasons")
        return self

    # Evaluating budgets (active window, allowed disruptions) is the engine's job:
    # reconciler.disruption.budgets reads these models through parse_budgets().


def _default_budgets() -> list[Budget]:
    return [Budget()]


class Disruption(ApiModel):
    """How and when Karpenter may disrupt (consolidate, expire, replace) this NodePool's nodes."""

    consolidate_after: NillableDuration = "0s"
    consolidation_policy: ConsolidationPolicy = "WhenEmptyOrUnderutilized"
    budgets: Annotated[list[Budget], Field(max_length=50), ATOMIC] = Field(
        default_factory=_default_budgets, json_schema_extra={"default": [{"nodes": "10%"}]}
    )


def _labels_rules() -> dict[str, Any]:
    rules = [
        (f"self.all(x, x.matches({cel_quote(QUALIFIED_NAME_PATTERN)}))", "label keys must be [prefix/]name"),
    ]
    rules += [(f"self.all(x, {rule})", message) for rule, message in restricted_key_cel(allow_nodepool=False, var="x")]
    return cel(*rules)


NodePoolLabelKey = Annotated[str, check_with(lambda key: label_key_problem(key, allow_nodepool=False))]


class NodeClaimTemplateMetadata(ApiModel):
    """Labels and annotations copied to every NodeClaim and Node of the pool."""

    labels: (
        Annotated[dict[NodePoolLabelKey, LabelValue], Field(max_length=100), SchemaExtra(_labels_rules())] | None
    ) = None
    annotations: dict[str, str] | None = None


class NodeClaimTemplateSpec(ApiModel):
    """The NodeClaim spec the pool launches, less the resource requests (those come from pods)."""

    taints: Annotated[list[Taint], ATOMIC] | None = None
    startup_taints: Annotated[list[Taint], ATOMIC] | None = None
    requirements: Annotated[list[NodePoolRequirement], Field(max_length=100), ATOMIC]
    node_class_ref: Annotated[
        NodeClassReference,
        SchemaExtra(
            cel(
                ("self.group == oldSelf.group", "nodeClassRef.group is immutable"),
                ("self.kind == oldSelf.kind", "nodeClassRef.kind is immutable"),
            )
        ),
    ]
    expire_after: NillableDuration = "720h"
    termination_grace_period: Duration | None = None

    @model_validator(mode="after")
    def _check_taints(self) -> NodeClaimTemplateSpec:
        duplicate = duplicate_taint_problem(self.taints, self.startup_taints)
        if duplicate:
            raise field_error(duplicate[1], duplicate[0])
        return self


class NodeClaimTemplate(ApiModel):
    metadata: NodeClaimTemplateMetadata | None = None
    spec: NodeClaimTemplateSpec


_STATIC_RULES = cel(
    (
        "has(self.replicas) == has(oldSelf.replicas)",
        "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes",
    ),
    (
        "!has(self.replicas) || !has(self.limits) || size(self.limits) == 0"
        " || (size(self.limits) == 1 && 'nodes' in self.limits)",
        "only 'limits.nodes' is supported on static NodePools",
    ),
    ("!has(self.replicas) || !has(self.weight)", "'weight' is not supported on static NodePools"),
)


class NodePoolSpec(ApiModel):
    """What nodes the pool may launch, how they are disrupted, and its limits and priority."""

    model_config = ConfigDict(json_schema_extra=_STATIC_RULES)

    template: NodeClaimTemplate
    disruption: Disruption = Field(
        default_factory=Disruption, json_schema_extra={"default": {"consolidateAfter": "0s"}}
    )
    limits: ResourceList | None = None
    weight: Annotated[int, Strict(), Field(ge=1, le=100)] | None = None
    replicas: Annotated[int, Strict(), Field(ge=0)] | None = None

    @model_validator(mode="after")
    def _check_static(self) -> NodePoolSpec:
        if self.replicas is None:
            return self
        if self.limits and set(self.limits) != {"nodes"}:
            raise field_error("only 'limits.nodes' is supported on static NodePools (replicas set)", "limits")
        if self.weight is not None:
            raise field_error("'weight' is not supported on static NodePools (replicas set)", "weight")
        return self


class NodePoolStatus(HasConditions):
    resources: ResourceList | None = None
    nodes: int = 0
    node_class_observed_generation: int | None = None


class NodePool(ApiModel):
    """A Karpenter NodePool (karpenter.sh/v1): a set of nodes Karpenter may launch and the rules for them."""

    api_version: Literal["karpenter.sh/v1"] = API_VERSION
    kind: Literal["NodePool"] = "NodePool"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodePoolSpec
    status: NodePoolStatus | None = None

    KIND: ClassVar[str] = "NodePool"

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def weight_or_zero(self) -> int:
        return self.spec.weight or 0

    @property
    def is_static(self) -> bool:
        return self.spec.replicas is not None

    @property
    def requirements(self) -> list[NodePoolRequirement]:
        return self.spec.template.spec.requirements

    @property
    def expire_after_seconds(self) -> float | None:
        """Node lifetime; ``None`` for Never."""
        return parse_nillable_duration(self.spec.template.spec.expire_after)

    @property
    def termination_grace_period_seconds(self) -> float | None:
        """Drain deadline; ``None`` means wait for pods indefinitely."""
        grace = self.spec.template.spec.termination_grace_period
        return parse_duration(grace) if grace else None

    @property
    def consolidate_after_seconds(self) -> float | None:
        """Quiet time before consolidation; ``None`` (Never) disables consolidation and emptiness."""
        return parse_nillable_duration(self.spec.disruption.consolidate_after)

    @property
    def consolidation_policy(self) -> str:
        return self.spec.disruption.consolidation_policy

    @property
    def budgets(self) -> list[Budget]:
        return self.spec.disruption.budgets

    def limits_resources(self) -> Resources:
        """``spec.limits`` as exact milli-unit resources (empty when unlimited)."""
        return Resources.from_manifest(self.spec.limits, path="spec.limits")

    def runtime_problems(self) -> list[str]:
        """Problems Karpenter reports by marking the pool not Ready rather than rejecting it.

        A requirement on a key with known values (capacity type, tenancy) must offer at least one
        known value, and enough of them to meet its minValues.
        """
        problems = []
        for index, requirement in enumerate(self.requirements):
            known = WELL_KNOWN_VALUES.get(requirement.normalized_key)
            if known is None or requirement.operator != "In":
                continue
            usable = [value for value in requirement.values or () if value in known]
            path = f"spec.template.spec.requirements[{index}]"
            if not usable:
                problems.append(
                    f"{path}: none of {requirement.values} is a known value of {requirement.key} "
                    f"(expected one of {sorted(known)})"
                )
            elif requirement.min_values and len(usable) < requirement.min_values:
                problems.append(
                    f"{path}: only {len(usable)} known value(s) of {requirement.key}, "
                    f"fewer than minValues {requirement.min_values}"
                )
        return problems
