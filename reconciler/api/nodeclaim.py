"""``karpenter.sh/v1`` NodeClaim: one requested node (spec immutable once created)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, ClassVar, Final, Literal

from pydantic import ConfigDict, Field, model_validator

from reconciler.model.durations import parse_duration, parse_nillable_duration
from reconciler.model.resources import Resources

from .base import ApiModel, HasConditions, ObjectMeta, ResourceList, cel
from .errors import field_error
from .nodepool import ATOMIC, Duration, NillableDuration
from .requirements import NodeClaimRequirement, NodeClassReference, Taint, duplicate_taint_problem

API_VERSION: Final = "karpenter.sh/v1"

# Condition types a NodeClaim carries (Ready = Launched and Registered and Initialized).
LAUNCHED = "Launched"
REGISTERED = "Registered"
INITIALIZED = "Initialized"
READY = "Ready"
CONSOLIDATABLE = "Consolidatable"
DRIFTED = "Drifted"
DRAINED = "Drained"
VOLUMES_DETACHED = "VolumesDetached"
INSTANCE_TERMINATING = "InstanceTerminating"
CONSISTENT_STATE_FOUND = "ConsistentStateFound"
DISRUPTION_REASON = "DisruptionReason"


class NodeClaimResources(ApiModel):
    requests: ResourceList | None = None


class NodeClaimSpec(ApiModel):
    """The node requested: constraints, resources, node class and lifetime."""

    model_config = ConfigDict(json_schema_extra=cel(("self == oldSelf", "spec is immutable")))

    taints: Annotated[list[Taint], ATOMIC] | None = None
    startup_taints: Annotated[list[Taint], ATOMIC] | None = None
    requirements: Annotated[list[NodeClaimRequirement], Field(max_length=100), ATOMIC]
    resources: NodeClaimResources | None = None
    node_class_ref: NodeClassReference
    termination_grace_period: Duration | None = None
    expire_after: NillableDuration = "720h"

    @model_validator(mode="after")
    def _check_taints(self) -> NodeClaimSpec:
        duplicate = duplicate_taint_problem(self.taints, self.startup_taints)
        if duplicate:
            raise field_error(duplicate[1], duplicate[0])
        return self


class NodeClaimStatus(HasConditions):
    node_name: str | None = None
    provider_id: str | None = Field(default=None, alias="providerID")
    image_id: str | None = Field(default=None, alias="imageID")
    capacity: ResourceList | None = None
    allocatable: ResourceList | None = None
    last_pod_event_time: datetime | None = None


class NodeClaim(ApiModel):
    """A Karpenter NodeClaim (karpenter.sh/v1): one requested node."""

    api_version: Literal["karpenter.sh/v1"] = API_VERSION
    kind: Literal["NodeClaim"] = "NodeClaim"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: NodeClaimSpec
    status: NodeClaimStatus | None = None

    KIND: ClassVar[str] = "NodeClaim"

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def nodepool_name(self) -> str | None:
        return (self.metadata.labels or {}).get("karpenter.sh/nodepool")

    @property
    def expire_after_seconds(self) -> float | None:
        return parse_nillable_duration(self.spec.expire_after)

    @property
    def termination_grace_period_seconds(self) -> float | None:
        grace = self.spec.termination_grace_period
        return parse_duration(grace) if grace else None

    def requests(self) -> Resources:
        return Resources.from_manifest(self.spec.resources.requests if self.spec.resources else None)

    def capacity(self) -> Resources:
        return Resources.from_manifest(self.status.capacity if self.status else None, path="status.capacity")

    def allocatable(self) -> Resources:
        return Resources.from_manifest(self.status.allocatable if self.status else None, path="status.allocatable")

    def is_condition_true(self, condition_type: str) -> bool:
        return self.status is not None and self.status.is_true(condition_type)
