"""NodePool limits during a run: what is left, which types still fit, and Karpenter's pessimistic accounting.

Limits are compared with node *capacity*. Existing nodes of the pool count in
full, and so do nodes being deleted until their instance is gone (the scheduler passes
them in); each planned claim reserves the largest capacity among its instance-type
options (it might launch as that one), so a batch never overshoots a limit.
"""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.model.nodepool import NODES
from reconciler.model.quantity import format_quantity
from reconciler.model.resources import Resources
from reconciler.scheduling.instancetypes import TypeInfo
from reconciler.scheduling.nodeclaim import NewNodeClaim
from reconciler.scheduling.templates import ClaimTemplate
from reconciler.state.node import StateNode


def remaining_limits(templates: Sequence[ClaimTemplate], active: Sequence[StateNode]) -> dict[str, dict[str, int]]:
    """Pool name -> resource -> what is left under ``spec.limits`` (``nodes`` counts 1000 per node)."""
    remaining: dict[str, dict[str, int]] = {}
    for template in templates:
        limits = template.nodepool.limits
        if not limits:
            continue
        left = dict(limits)
        for node in active:
            if node.nodepool != template.name:
                continue
            for name in left:
                left[name] -= 1000 if name == NODES else node.capacity.amount(name)
        remaining[template.name] = left
    return remaining


def subtract_max(claim: NewNodeClaim, remaining: dict[str, int], options: Sequence[TypeInfo] | None) -> None:
    """Reserve, per limited resource, the largest capacity among the claim's options (Karpenter's subtractMax).

    ``options`` is the claim's full option list when it was computed; otherwise the largest capacity is found by
    scanning the pool's types largest-first and stopping at the first one the claim can still use.
    """
    for name in list(remaining):
        if name == NODES:
            remaining[name] -= 1000  # Adze also counts planned claims against limits.nodes
            continue
        if options is not None:
            remaining[name] -= max((t.capacity.amount(name) for t in options), default=0)
            continue
        for info in claim.template.by_capacity(name):
            if id(info) not in claim.excluded and claim.works(info):
                remaining[name] -= info.capacity.amount(name)
                break


def limits_message(template: ClaimTemplate, remaining: dict[str, int], left_by_existing: dict[str, int]) -> str:
    """Which limits every instance type would breach, in terms of usage: what the existing nodes use and what
    this run's planned NodeClaims reserve (each the largest type it may launch as), e.g. ``cpu limit 16: existing
    nodes use 12, NodeClaims planned in this run reserve 4, 0 left (the smallest instance type has 2)``."""
    limits = template.nodepool.limits
    parts = []
    for name, left in sorted(remaining.items()):
        if name == NODES:
            continue
        smallest = min(t.capacity.amount(name) for t in template.types)
        if smallest > left:
            limit = limits.get(name, 0)
            used = limit - left_by_existing.get(name, limit)
            reserved = left_by_existing.get(name, limit) - left
            text = f"{name} limit {format_quantity(limit, name)}: existing nodes use {format_quantity(used, name)}"
            if reserved:
                text += (f", NodeClaims planned in this run reserve {format_quantity(reserved, name)} (each the "
                         "largest instance type it may launch as)")
            parts.append(f"{text}, {format_quantity(max(left, 0), name)} left (the smallest instance type has "
                         f"{format_quantity(smallest, name)})")
    detail = "; ".join(parts) or "the remaining limits"
    return f"all instance types would exceed the NodePool's limits: {detail}"


def describe_remaining(template: ClaimTemplate, remaining: dict[str, int]) -> str:
    limits = template.nodepool.limits
    return ", ".join(
        f"{name} limit {format_quantity(limits.get(name, 0), name)}, remaining {format_quantity(max(left, 0), name)}"
        for name, left in sorted(remaining.items()) if name != NODES
    )


def within(capacity: Resources, remaining: dict[str, int]) -> bool:
    return all(name == NODES or capacity.amount(name) <= left for name, left in remaining.items())


