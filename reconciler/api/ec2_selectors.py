"""EC2NodeClass selector terms: subnets, security groups, capacity reservations, AMIs, placement groups.

Terms in a list are ORed; the fields of one term are ANDed. ``id`` (and for
security groups ``name``) selects exactly one resource and so cannot be combined
with other fields in the same term. A tag value of ``*`` matches any value.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from .base import ApiModel, SchemaExtra, cel, check_with, matching
from .errors import field_error

ALIAS_FAMILIES = {
    "al2": "AL2",
    "al2023": "AL2023",
    "bottlerocket": "Bottlerocket",
    "windows2019": "Windows2019",
    "windows2022": "Windows2022",
    "windows2025": "Windows2025",
}
WINDOWS_ALIASES = ("windows2019", "windows2022", "windows2025")


def _tags_problem(tags: dict[str, str]) -> str | None:
    if any(not key or not value for key, value in tags.items()):
        return "empty tag keys or values aren't supported"
    return None


SelectorTags = Annotated[
    dict[str, str],
    Field(max_length=20),
    check_with(_tags_problem),
    SchemaExtra(cel(("self.all(k, k != '' && self[k] != '')", "empty tag keys or values aren't supported"))),
]


def _ec2_id(prefix: str, what: str) -> tuple[Any, ...]:
    return matching(f"^{prefix}-[0-9a-z]+$", lambda v: f"{v!r} is not a {what} id ({prefix}-...)")


SubnetId = Annotated[str, *_ec2_id("subnet", "subnet")]
SecurityGroupId = Annotated[str, *_ec2_id("sg", "security group")]
CapacityReservationId = Annotated[str, *_ec2_id("cr", "capacity reservation")]
AmiId = Annotated[str, *_ec2_id("ami", "AMI")]
PlacementGroupId = Annotated[str, *_ec2_id("pg", "placement group")]
AccountId = Annotated[str, *matching(r"^[0-9]{12}$", lambda v: f"ownerID {v!r} must be a 12-digit AWS account id")]


def _is_set(term: ApiModel, json_name: str) -> bool:
    for name, info in type(term).model_fields.items():
        if (info.alias or name) == json_name:
            return getattr(term, name) is not None
    raise KeyError(json_name)


def _exclusive(term: ApiModel, field: str, others: tuple[str, ...]) -> None:
    if _is_set(term, field) and any(_is_set(term, other) for other in others):
        raise field_error(f"'{field}' is mutually exclusive, cannot be combined with {', '.join(others)} in one term")


def _at_least_one(term: ApiModel, fields: tuple[str, ...]) -> None:
    if not any(_is_set(term, field) for field in fields):
        raise field_error(f"expected at least one of {', '.join(fields)}, got none")


def _term_rules(required: tuple[str, ...], exclusive: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    rules = [(" || ".join(f"has(self.{f})" for f in required), f"expected at least one, got none, {list(required)}")]
    for field, others in exclusive.items():
        rules.append(
            (
                f"!(has(self.{field}) && ({' || '.join(f'has(self.{o})' for o in others)}))",
                f"'{field}' is mutually exclusive, cannot be set with a combination of other fields in a selector term",
            )
        )
    return cel(*rules)


class SubnetSelectorTerm(ApiModel):
    model_config = ConfigDict(json_schema_extra=_term_rules(("tags", "id"), {"id": ("tags",)}))

    tags: SelectorTags | None = None
    id: SubnetId | None = None

    @model_validator(mode="after")
    def _check_shape(self) -> SubnetSelectorTerm:
        _at_least_one(self, ("tags", "id"))
        _exclusive(self, "id", ("tags",))
        return self


class SecurityGroupSelectorTerm(ApiModel):
    model_config = ConfigDict(
        json_schema_extra=_term_rules(("tags", "id", "name"), {"id": ("tags", "name"), "name": ("tags", "id")})
    )

    tags: SelectorTags | None = None
    id: SecurityGroupId | None = None
    name: str | None = None

    @model_validator(mode="after")
    def _check_shape(self) -> SecurityGroupSelectorTerm:
        _at_least_one(self, ("tags", "id", "name"))
        _exclusive(self, "id", ("tags", "name"))
        _exclusive(self, "name", ("tags", "id"))
        return self


class CapacityReservationSelectorTerm(ApiModel):
    model_config = ConfigDict(
        json_schema_extra=_term_rules(
            ("tags", "id", "instanceMatchCriteria"), {"id": ("tags", "ownerID", "instanceMatchCriteria")}
        )
    )

    tags: SelectorTags | None = None
    id: CapacityReservationId | None = None
    owner_id: AccountId | None = Field(default=None, alias="ownerID")
    instance_match_criteria: Literal["open", "targeted"] | None = None

    @model_validator(mode="after")
    def _check_shape(self) -> CapacityReservationSelectorTerm:
        _at_least_one(self, ("tags", "id", "instanceMatchCriteria"))
        _exclusive(self, "id", ("tags", "ownerID", "instanceMatchCriteria"))
        return self


def _alias_problem(alias: str) -> str | None:
    family, at, version = alias.partition("@")
    if not at or not family.isalnum() or not version:
        return f"alias {alias!r} must have the form family@version (e.g. al2023@latest)"
    if family not in ALIAS_FAMILIES:
        return f"alias family {family!r} is not supported, use one of {', '.join(ALIAS_FAMILIES)}"
    if family in WINDOWS_ALIASES and version != "latest":
        return f"windows families may only specify version 'latest' (got {alias!r})"
    return None


_ALIAS_FAMILY_LIST = ", ".join(f"'{family}'" for family in ALIAS_FAMILIES)
_WINDOWS_LIST = ", ".join(f"'{family}'" for family in WINDOWS_ALIASES)
Alias = Annotated[
    str,
    Field(max_length=30),
    check_with(_alias_problem),
    SchemaExtra(
        cel(
            (
                "self.matches('^[a-zA-Z0-9]+@.+$')",
                "'alias' is improperly formatted, must match the format 'family@version'",
            ),
            (
                f"[{_ALIAS_FAMILY_LIST}].exists(f, self.startsWith(f + '@'))",
                f"family is not supported, must be one of the following: {_ALIAS_FAMILY_LIST}",
            ),
            (
                f"![{_WINDOWS_LIST}].exists(f, self.startsWith(f + '@')) || self.endsWith('@latest')",
                "windows families may only specify version 'latest'",
            ),
        )
    ),
]


class AMISelectorTerm(ApiModel):
    """Selects AMIs by alias (an EKS-optimized family@version), id, name and owner, tags or SSM parameter."""

    model_config = ConfigDict(
        json_schema_extra=_term_rules(
            ("tags", "id", "name", "alias", "ssmParameter"),
            {"id": ("alias", "tags", "name", "owner"), "alias": ("id", "tags", "name", "owner")},
        )
    )

    alias: Alias | None = None
    tags: SelectorTags | None = None
    id: AmiId | None = None
    name: str | None = None
    owner: str | None = None
    ssm_parameter: str | None = None

    @model_validator(mode="after")
    def _check_shape(self) -> AMISelectorTerm:
        _at_least_one(self, ("tags", "id", "name", "alias", "ssmParameter"))
        _exclusive(self, "id", ("alias", "tags", "name", "owner"))
        _exclusive(self, "alias", ("id", "tags", "name", "owner"))
        return self

    @property
    def alias_family(self) -> str | None:
        """The amiFamily an alias stands for (``al2023@latest`` -> ``AL2023``)."""
        return ALIAS_FAMILIES.get(self.alias.partition("@")[0]) if self.alias else None

    @property
    def alias_version(self) -> str | None:
        return self.alias.partition("@")[2] if self.alias else None


class PlacementGroupSelector(ApiModel):
    model_config = ConfigDict(
        json_schema_extra=cel(
            ("has(self.name) || has(self.id)", "expected at least one, got none, ['name', 'id']"),
            ("!(has(self.name) && has(self.id))", "'name' and 'id' are mutually exclusive"),
        )
    )

    name: Annotated[str, Field(min_length=1)] | None = None
    id: PlacementGroupId | None = None

    @model_validator(mode="after")
    def _check_shape(self) -> PlacementGroupSelector:
        if (self.name is None) == (self.id is None):
            raise field_error("set exactly one of name or id")
        return self
