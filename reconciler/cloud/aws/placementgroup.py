"""``spec.placementGroupSelector`` (v1.11): the EC2 placement group a NodeClass launches into.

Selected by id or name among *available* groups (DescribePlacementGroups). Cluster and spread
groups are supported: the launch template's ``Placement.GroupId`` puts every instance in the group,
types whose EC2 data lacks the strategy are not offered, and nodes carry
``karpenter.k8s.aws/placement-group-id``. Partition groups are refused: upstream offers one
offering per partition so pods can spread over ``karpenter.k8s.aws/placement-group-partition``,
which Adze's single-valued instance-type labels cannot express.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.cloud.aws.clients import AwsCaller, error_code

LABEL = "karpenter.k8s.aws/placement-group-id"
NOT_FOUND_CODES = ("InvalidPlacementGroup.Unknown", "InvalidPlacementGroupId.NotFound", "InvalidGroup.NotFound")


@dataclass(slots=True, frozen=True)
class PlacementGroup:
    id: str
    name: str
    strategy: str  # cluster | partition | spread
    partition_count: int = 0


class PlacementGroupError(ValueError):
    """The selected group cannot be used; ``reason`` is the PlacementGroupReady condition's."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


async def resolve(caller: AwsCaller, ec2: Any, selector: Mapping[str, Any] | None) -> PlacementGroup | None:
    """The available group ``selector`` names (None without a selector)."""
    if not selector:
        return None
    wanted = str(selector.get("id") or selector.get("name") or "")
    by = {"GroupIds": [wanted]} if selector.get("id") else {"GroupNames": [wanted]}
    try:
        answer = await caller.call(ec2.describe_placement_groups,
                                   Filters=[{"Name": "state", "Values": ["available"]}], **by)
    except Exception as err:
        if error_code(err) not in NOT_FOUND_CODES:
            raise PlacementGroupError("PlacementGroupResolutionFailed", f"{error_code(err)}: {err}") from None
        answer = {}
    groups = answer.get("PlacementGroups") or []
    if not groups:
        raise PlacementGroupError("PlacementGroupNotFound", f"Placement group {wanted!r} not found")
    group = groups[0]
    found = PlacementGroup(
        id=str(group.get("GroupId", "")),
        name=str(group.get("GroupName", "")),
        strategy=str(group.get("Strategy", "")),
        partition_count=int(group.get("PartitionCount") or 0),
    )
    if found.strategy == "partition":
        raise PlacementGroupError(
            "PlacementGroupStrategyUnsupported",
            f"spec.placementGroupSelector: placement group {wanted!r} uses the partition strategy, which Adze "
            "does not support (it cannot offer per-partition scheduling on karpenter.k8s.aws/placement-group-"
            "partition); use a cluster or spread group",
        )
    return found
