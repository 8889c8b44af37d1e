"""What to do about an interruption message (pure): delete the NodeClaim, cordon and drain, or nothing.

``decide`` maps one message and the NodeClaim owning each affected instance to
actions, following Karpenter (aws.md section 3) except where a setting says
otherwise:

- spot interruption: mark the offering unavailable (3 min) and delete the NodeClaim;
- instance stopping/stopped/shutting-down/terminated, scheduled maintenance:
  delete the NodeClaim;
- capacity-reservation interruption: mark the reservation unavailable, delete;
- rebalance recommendation: with ``rebalance="event"`` (Karpenter's behaviour)
  only an event; with ``rebalance="drain"`` cordon the node and delete the
  NodeClaim so it drains while its replacement is provisioned
  (aws/karpenter-provider-aws#2813);
- instances no NodeClaim owns: nothing (the queue sees the whole account).

Deleting a NodeClaim starts the normal termination: taint, PDB-respecting
drain, replacement provisioned in parallel, then TerminateInstances.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from reconciler.interruption.messages import Kind, Message
from reconciler.model import labels as wk

CAPACITY_RESERVATION_ID = "karpenter.k8s.aws/capacity-reservation-id"
REBALANCE_EVENT = "event"
REBALANCE_DRAIN = "drain"
REBALANCE_MODES = (REBALANCE_EVENT, REBALANCE_DRAIN)

EVENT_REASONS = {
    Kind.SPOT_INTERRUPTION: "SpotInterrupted",
    Kind.REBALANCE_RECOMMENDATION: "SpotRebalanceRecommendation",
    Kind.INSTANCE_STOPPED: "InstanceStopping",
    Kind.INSTANCE_TERMINATED: "InstanceTerminating",
    Kind.SCHEDULED_CHANGE: "InstanceUnhealthy",
    Kind.CAPACITY_RESERVATION_INTERRUPTION: "CapacityReservationInstanceInterrupted",
}


class ActionKind(StrEnum):
    DELETE_NODECLAIM = "delete-nodeclaim"
    CORDON_DRAIN = "cordon-drain"
    NO_OP = "no-op"


@dataclass(slots=True, frozen=True)
class Action:
    kind: ActionKind
    instance_id: str
    nodeclaim: str = ""
    node: str = ""
    reason: str = ""  # Kubernetes event reason
    message: str = ""
    forceful: bool = False  # skip PDB-respecting drain (set the termination timestamp)
    unavailable_offering: tuple[str, str, str] | None = None  # (capacity type, instance type, zone)
    unavailable_reservation: str = ""


def decide(
    message: Message,
    nodeclaims_by_instance: Mapping[str, Mapping[str, Any]],
    rebalance: str = REBALANCE_EVENT,
) -> list[Action]:
    if rebalance not in REBALANCE_MODES:
        raise ValueError(f"rebalance handling {rebalance!r} must be one of {', '.join(REBALANCE_MODES)}")
    actions = []
    for instance_id in message.instance_ids:
        nodeclaim = nodeclaims_by_instance.get(instance_id)
        actions.append(_decide_one(message, instance_id, nodeclaim, rebalance))
    return actions


def _decide_one(
    message: Message, instance_id: str, nodeclaim: Mapping[str, Any] | None, rebalance: str
) -> Action:
    reason = EVENT_REASONS.get(message.kind, "")
    if nodeclaim is None or message.kind is Kind.NO_OP:
        return Action(ActionKind.NO_OP, instance_id, reason=reason, message="no NodeClaim owns this instance")
    metadata = nodeclaim.get("metadata") or {}
    labels = metadata.get("labels") or {}
    name = str(metadata.get("name", ""))
    node = str((nodeclaim.get("status") or {}).get("nodeName", ""))
    text = f"{message.detail_type or message.kind.value} for instance {instance_id}"
    if metadata.get("deletionTimestamp"):
        return Action(ActionKind.NO_OP, instance_id, name, node, reason, "NodeClaim is already being deleted")
    if message.kind is Kind.REBALANCE_RECOMMENDATION:
        if rebalance == REBALANCE_DRAIN:
            return Action(ActionKind.CORDON_DRAIN, instance_id, name, node, reason, text)
        return Action(
            ActionKind.NO_OP, instance_id, name, node, reason, text + " (rebalance handling: event)"
        )
    offering = None
    if message.kind is Kind.SPOT_INTERRUPTION:
        instance_type, zone = labels.get(wk.INSTANCE_TYPE), labels.get(wk.ZONE)
        if instance_type and zone:
            offering = (wk.CAPACITY_TYPE_SPOT, str(instance_type), str(zone))
    reservation = ""
    if message.kind is Kind.CAPACITY_RESERVATION_INTERRUPTION:
        reservation = str(labels.get(CAPACITY_RESERVATION_ID, ""))
    return Action(
        ActionKind.DELETE_NODECLAIM,
        instance_id,
        name,
        node,
        reason,
        text,
        unavailable_offering=offering,
        unavailable_reservation=reservation,
    )
