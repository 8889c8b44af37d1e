"""``karpenter.k8s.aws/v1`` EC2NodeClass."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import ConfigDict, Field, Strict, model_validator

from .base import ApiModel, HasConditions, ObjectMeta, SchemaExtra, cel, check_with
from .ec2_launch import (
    METADATA_OPTIONS_DEFAULT,
    BlockDeviceMappings,
    ConnectionTracking,
    CPUOptions,
    MetadataOptions,
    NetworkInterfaces,
)
from .ec2_selectors import (
    ALIAS_FAMILIES,
    AMISelectorTerm,
    CapacityReservationSelectorTerm,
    PlacementGroupSelector,
    SecurityGroupSelectorTerm,
    SubnetSelectorTerm,
)
from .errors import field_error
from .kubelet import KubeletConfiguration

GROUP = "karpenter.k8s.aws"
API_VERSION: Final = "karpenter.k8s.aws/v1"

AMIFamily = Literal["AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025"]

# Tags Karpenter writes on every instance itself; users may not set them.
RESTRICTED_TAGS = (
    "eks:eks-cluster-name",
    "karpenter.sh/nodepool",
    "karpenter.sh/nodeclaim",
    "karpenter.k8s.aws/ec2nodeclass",
)
RESTRICTED_TAG_PREFIX = "kubernetes.io/cluster"


def _tags_problem(tags: dict[str, str]) -> str | None:
    for key in tags:
        if not key:
            return "empty tag keys aren't supported"
        if key in RESTRICTED_TAGS or key.startswith(RESTRICTED_TAG_PREFIX):
            return f"tag {key!r} is restricted: Karpenter sets it on the instances it launches"
    return None


Tags = Annotated[
    dict[str, str],
    check_with(_tags_problem),
    SchemaExtra(
        cel(
            ("self.all(k, k != '')", "empty tag keys aren't supported"),
            *(
                (f"self.all(k, k != '{tag}')", f"tag contains a restricted tag matching {tag}")
                for tag in RESTRICTED_TAGS
            ),
            (
                f"self.all(k, !k.startsWith('{RESTRICTED_TAG_PREFIX}'))",
                f"tag contains a restricted tag matching {RESTRICTED_TAG_PREFIX}/",
            ),
        )
    ),
]


def _non_empty_terms(what: str) -> Any:
    return SchemaExtra(cel(("self.size() != 0", f"{what} cannot be empty")))


def _single_alias_problem(terms: list[AMISelectorTerm]) -> str | None:
    if len(terms) > 1 and any(term.alias for term in terms):
        return "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"
    return None


def _alias_family_rule(alias_family: str, ami_family: str) -> tuple[str, str]:
    return (
        "!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias)"
        f" && x.alias.startsWith('{alias_family}@'))"
        f" ? (self.amiFamily == 'Custom' || self.amiFamily == '{ami_family}') : true)",
        f"if set, amiFamily must be '{ami_family}' or 'Custom' when using an {ami_family} alias",
    )


_SPEC_RULES = cel(
    (
        "(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))",
        "must specify exactly one of ['role', 'instanceProfile']",
    ),
    *(_alias_family_rule(alias, family) for alias, family in ALIAS_FAMILIES.items()),
    (
        "self.amiSelectorTerms.exists(x, has(x.alias)) ? true : has(self.amiFamily)",
        "must specify amiFamily if amiSelectorTerms does not contain an alias",
    ),
)

NonEmpty = Annotated[str, Field(min_length=1), SchemaExtra(cel(("self != ''", "may not be empty")))]


class EC2NodeClassSpec(ApiModel):
    """How to launch EC2 instances: networking, AMIs, IAM, storage, metadata and kubelet settings."""

    model_config = ConfigDict(json_schema_extra=_SPEC_RULES)

    subnet_selector_terms: Annotated[
        list[SubnetSelectorTerm], Field(min_length=1, max_length=30), _non_empty_terms("subnetSelectorTerms")
    ]
    security_group_selector_terms: Annotated[
        list[SecurityGroupSelectorTerm],
        Field(min_length=1, max_length=30),
        _non_empty_terms("securityGroupSelectorTerms"),
    ]
    capacity_reservation_selector_terms: (
        Annotated[list[CapacityReservationSelectorTerm], Field(max_length=30)] | None
    ) = None
    placement_group_selector: PlacementGroupSelector | None = None
    associate_public_ip_address: bool | None = Field(default=None, alias="associatePublicIPAddress")
    ip_prefix_count: Annotated[int, Strict(), Field(ge=0)] | None = Field(default=None, alias="ipPrefixCount")
    ami_selector_terms: Annotated[
        list[AMISelectorTerm],
        Field(min_length=1, max_length=30),
        check_with(_single_alias_problem),
        SchemaExtra(
            cel(
                (
                    "!(self.exists(x, has(x.alias)) && self.size() != 1)",
                    "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
                )
            )
        ),
    ]
    ami_family: AMIFamily | None = None
    user_data: str | None = None
    role: NonEmpty | None = None
    instance_profile: NonEmpty | None = None
    tags: Tags | None = None
    kubelet: KubeletConfiguration | None = None
    block_device_mappings: BlockDeviceMappings | None = None
    instance_store_policy: Literal["RAID0"] | None = None
    network_interfaces: NetworkInterfaces | None = None
    detailed_monitoring: bool | None = None
    metadata_options: MetadataOptions = Field(
        default_factory=MetadataOptions, json_schema_extra={"default": METADATA_OPTIONS_DEFAULT}
    )
    connection_tracking: ConnectionTracking | None = None
    context: str | None = None
    cpu_options: CPUOptions | None = Field(default=None, alias="cpuOptions")

    @model_validator(mode="after")
    def _check_identity_and_family(self) -> EC2NodeClassSpec:
        if (self.role is None) == (self.instance_profile is None):
            raise field_error("must specify exactly one of role or instanceProfile")
        alias_family = self.alias_family
        if alias_family is None and self.ami_family is None:
            raise field_error("required when amiSelectorTerms has no alias", "amiFamily")
        if alias_family is not None and self.ami_family not in (None, "Custom", alias_family):
            raise field_error(
                f"must be {alias_family!r} or 'Custom' with alias {self.ami_selector_terms[0].alias!r}", "amiFamily"
            )
        return self

    @property
    def alias_family(self) -> str | None:
        return next((term.alias_family for term in self.ami_selector_terms if term.alias), None)

    @property
    def resolved_ami_family(self) -> str:
        """The family that decides user data and default block devices: amiFamily, else the alias's, else Custom."""
        return self.ami_family or self.alias_family or "Custom"


class SubnetStatus(ApiModel):
    id: str
    zone: str
    zone_id: str | None = Field(default=None, alias="zoneID")


class SecurityGroupStatus(ApiModel):
    id: str
    name: str | None = None


class AMIRequirement(ApiModel):
    """A plain node selector requirement (core/v1), as recorded for each resolved AMI."""

    key: str
    operator: str
    values: Annotated[list[str], SchemaExtra({"x-kubernetes-list-type": "atomic"})] | None = None


class AMIStatus(ApiModel):
    id: str
    name: str | None = None
    deprecated: bool | None = None
    requirements: list[AMIRequirement]


class CapacityReservationStatus(ApiModel):
    availability_zone: str
    id: str
    instance_match_criteria: Literal["open", "targeted"]
    instance_type: str
    owner_id: str = Field(alias="ownerID")
    end_time: datetime | None = None
    interruptible: bool | None = None
    reservation_type: Literal["default", "capacity-block"] = "default"
    state: Literal["active", "expiring"] = "active"


class EC2NodeClassStatus(HasConditions):
    subnets: list[SubnetStatus] | None = None
    security_groups: list[SecurityGroupStatus] | None = None
    capacity_reservations: list[CapacityReservationStatus] | None = None
    amis: list[AMIStatus] | None = None
    instance_profile: str | None = None


class EC2NodeClass(ApiModel):
    """An EC2NodeClass (karpenter.k8s.aws/v1): AWS settings for the nodes of the NodePools that use it."""

    api_version: Literal["karpenter.k8s.aws/v1"] = API_VERSION
    kind: Literal["EC2NodeClass"] = "EC2NodeClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: EC2NodeClassSpec
    status: EC2NodeClassStatus | None = None

    KIND: ClassVar[str] = "EC2NodeClass"

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def is_ready(self) -> bool:
        return self.status is not None and self.status.is_true("Ready")
