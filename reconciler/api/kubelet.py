"""``EC2NodeClass.spec.kubelet``: the kubelet settings Karpenter reads, validated like Karpenter does.

The field is an open map (other KubeletConfiguration keys pass through to the
node's user data), so unknown keys are kept; the keys Karpenter itself reads
for scheduling and bootstrap are typed and checked here.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any

from pydantic import ConfigDict, Field, Strict, model_validator

from reconciler.model.durations import DurationError, parse_duration
from reconciler.model.quantity import QuantityError, parse_quantity

from .base import QUANTITY_PATTERN, ApiModel, SchemaExtra, cel, cel_quote
from .errors import field_error

EVICTION_SIGNALS = (
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
)
RESERVABLE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pid")
# Karpenter sets these itself at bootstrap; a user value would be silently overwritten.
KARPENTER_OWNED_FIELDS = {"registerWithTaints": "Karpenter sets it from the NodeClaim's taints"}

_QUANTITY_BODY = QUANTITY_PATTERN[1:-1]
PERCENT_PATTERN = r"^(\d{1,2}(\.\d+)?|100(\.0+)?)%$"
EVICTION_VALUE_PATTERN = rf"^((\d{{1,2}}(\.\d+)?|100(\.0+)?)%|{_QUANTITY_BODY})$"
_PERCENT = re.compile(PERCENT_PATTERN)


def _keys_rule(field: str, allowed: tuple[str, ...]) -> dict[str, Any]:
    listed = ", ".join(cel_quote(key) for key in allowed)
    return cel((f"self.all(x, x in [{listed}])", f"valid keys for {field} are [{listed}]"))


def _reserved_schema(field: str) -> SchemaExtra:
    rules = _keys_rule(field, RESERVABLE_RESOURCES)
    rules["x-kubernetes-validations"].append(
        {
            "message": f"{field} value cannot be a negative resource quantity",
            "rule": "self.all(x, !self[x].startsWith('-'))",
        }
    )
    return SchemaExtra(rules)


EvictionMap = dict[str, Annotated[str, SchemaExtra({"pattern": EVICTION_VALUE_PATTERN})]]
ReservedMap = dict[str, Annotated[str, SchemaExtra({"pattern": QUANTITY_PATTERN})]]


class KubeletConfiguration(ApiModel):
    """Kubelet settings for nodes of this class (a subset is read by Karpenter; the rest is passed through)."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "x-kubernetes-preserve-unknown-fields": True,
            **cel(
                (
                    "has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ?"
                    " self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent : true",
                    "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
                ),
                (
                    "has(self.evictionSoft) ? (has(self.evictionSoftGracePeriod)"
                    " && self.evictionSoft.all(e, e in self.evictionSoftGracePeriod)) : true",
                    "evictionSoft key does not have a matching evictionSoftGracePeriod",
                ),
                (
                    "has(self.evictionSoftGracePeriod) ? (has(self.evictionSoft)"
                    " && self.evictionSoftGracePeriod.all(e, e in self.evictionSoft)) : true",
                    "evictionSoftGracePeriod key does not have a matching evictionSoft",
                ),
            ),
        },
    )

    cluster_dns: list[str] | None = Field(default=None, alias="clusterDNS")
    max_pods: Annotated[int, Strict(), Field(ge=0)] | None = None
    pods_per_core: Annotated[int, Strict(), Field(ge=0)] | None = None
    system_reserved: Annotated[ReservedMap, _reserved_schema("systemReserved")] | None = None
    kube_reserved: Annotated[ReservedMap, _reserved_schema("kubeReserved")] | None = None
    eviction_hard: Annotated[EvictionMap, SchemaExtra(_keys_rule("evictionHard", EVICTION_SIGNALS))] | None = None
    eviction_soft: Annotated[EvictionMap, SchemaExtra(_keys_rule("evictionSoft", EVICTION_SIGNALS))] | None = None
    eviction_soft_grace_period: (
        Annotated[dict[str, str], SchemaExtra(_keys_rule("evictionSoftGracePeriod", EVICTION_SIGNALS))] | None
    ) = None
    eviction_max_pod_grace_period: Annotated[int, Strict(), Field(ge=0)] | None = None
    image_gc_high_threshold_percent: Annotated[int, Strict(), Field(ge=0, le=100)] | None = Field(
        default=None, alias="imageGCHighThresholdPercent"
    )
    image_gc_low_threshold_percent: Annotated[int, Strict(), Field(ge=0, le=100)] | None = Field(
        default=None, alias="imageGCLowThresholdPercent"
    )
    cpu_cfs_quota: bool | None = Field(default=None, alias="cpuCFSQuota")

    @model_validator(mode="after")
    def _check_semantics(self) -> KubeletConfiguration:
        for field, why in KARPENTER_OWNED_FIELDS.items():
            if field in (self.model_extra or {}):
                raise field_error(f"can't be set, {why}", field)
        for index, address in enumerate(self.cluster_dns or ()):
            try:
                ipaddress.ip_address(address)
            except ValueError:
                raise field_error(f"{address!r} is not an IP address", f"clusterDNS[{index}]") from None
        for field, values in (("systemReserved", self.system_reserved), ("kubeReserved", self.kube_reserved)):
            for key, value in (values or {}).items():
                if key not in RESERVABLE_RESOURCES:
                    raise field_error(f"{key!r} is not reservable; use one of {', '.join(RESERVABLE_RESOURCES)}", field)
                if _quantity_problem(value, allow_percent=False):
                    raise field_error(f"{value!r} must be a non-negative resource quantity", f"{field}[{key}]")
        for field, values in (("evictionHard", self.eviction_hard), ("evictionSoft", self.eviction_soft)):
            for key, value in (values or {}).items():
                self._check_signal(field, key)
                problem = _quantity_problem(value, allow_percent=True)
                if problem:
                    raise field_error(problem, f"{field}[{key}]")
        for key, value in (self.eviction_soft_grace_period or {}).items():
            self._check_signal("evictionSoftGracePeriod", key)
            try:
                negative = parse_duration(value) < 0
            except DurationError:
                negative = True
            if negative:
                raise field_error(
                    f"{value!r} must be a non-negative duration (e.g. 1m30s)", f"evictionSoftGracePeriod[{key}]"
                )
        soft, grace = set(self.eviction_soft or ()), set(self.eviction_soft_grace_period or ())
        if soft - grace:
            raise field_error("has no matching evictionSoftGracePeriod", f"evictionSoft[{min(soft - grace)}]")
        if grace - soft:
            raise field_error("has no matching evictionSoft", f"evictionSoftGracePeriod[{min(grace - soft)}]")
        high, low = self.image_gc_high_threshold_percent, self.image_gc_low_threshold_percent
        if high is not None and low is not None and high <= low:
            raise field_error(
                f"imageGCHighThresholdPercent ({high}) must be greater than imageGCLowThresholdPercent ({low})"
            )
        return self

    @staticmethod
    def _check_signal(field: str, key: str) -> None:
        if key not in EVICTION_SIGNALS:
            raise field_error(f"{key!r} is not an eviction signal; use one of {', '.join(EVICTION_SIGNALS)}", field)


def _quantity_problem(value: str, *, allow_percent: bool) -> str | None:
    if allow_percent and value.endswith("%"):
        return None if _PERCENT.match(value) else f"{value!r} must be a percentage from 0% to 100%"
    try:
        amount = parse_quantity(value)
    except QuantityError:
        expected = "a percentage or a resource quantity" if allow_percent else "a resource quantity"
        return f"{value!r} must be {expected}"
    return f"{value!r} can't be negative" if amount < 0 else None
