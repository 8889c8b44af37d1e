"""The pure message -> action mapping."""

from __future__ import annotations

import pytest

from reconciler.interruption.actions import ActionKind, decide
from reconciler.interruption.messages import Kind, Message

INSTANCE = "i-0123456789abcdef0"


def claim(**metadata: object) -> dict:
    return {
        "metadata": {
            "name": "default-abc",
            "labels": {
                "node.kubernetes.io/instance-type": "m5.large",
                "topology.kubernetes.io/zone": "us-east-1a",
                "karpenter.sh/capacity-type": "spot",
                "karpenter.k8s.aws/capacity-reservation-id": "cr-0123",
            },
            **metadata,
        },
        "status": {"providerID": f"aws:///us-east-1a/{INSTANCE}", "nodeName": "ip-10-0-0-1"},
    }


def message(kind: Kind) -> Message:
    return Message(kind, (INSTANCE,), detail_type=kind.value)


def test_spot_interruption_deletes_the_claim_and_marks_the_offering() -> None:
    [action] = decide(message(Kind.SPOT_INTERRUPTION), {INSTANCE: claim()})
    assert action.kind is ActionKind.DELETE_NODECLAIM
    assert action.nodeclaim == "default-abc" and action.node == "ip-10-0-0-1"
    assert action.unavailable_offering == ("spot", "m5.large", "us-east-1a")
    assert action.reason == "SpotInterrupted"
    assert not action.forceful


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        (Kind.INSTANCE_STOPPED, "InstanceStopping"),
        (Kind.INSTANCE_TERMINATED, "InstanceTerminating"),
        (Kind.SCHEDULED_CHANGE, "InstanceUnhealthy"),
    ],
)
def test_state_changes_and_scheduled_changes_delete_the_claim(kind: Kind, reason: str) -> None:
    [action] = decide(message(kind), {INSTANCE: claim()})
    assert (action.kind, action.reason, action.unavailable_offering) == (
        ActionKind.DELETE_NODECLAIM,
        reason,
        None,
    )


def test_capacity_reservation_interruption_marks_the_reservation() -> None:
    [action] = decide(message(Kind.CAPACITY_RESERVATION_INTERRUPTION), {INSTANCE: claim()})
    assert action.kind is ActionKind.DELETE_NODECLAIM
    assert action.unavailable_reservation == "cr-0123"


def test_rebalance_is_an_event_by_default_and_a_drain_when_configured() -> None:
    [event_only] = decide(message(Kind.REBALANCE_RECOMMENDATION), {INSTANCE: claim()})
    assert event_only.kind is ActionKind.NO_OP and event_only.reason == "SpotRebalanceRecommendation"
    [drain] = decide(message(Kind.REBALANCE_RECOMMENDATION), {INSTANCE: claim()}, rebalance="drain")
    assert drain.kind is ActionKind.CORDON_DRAIN and drain.nodeclaim == "default-abc"
    with pytest.raises(ValueError, match="rebalance handling"):
        decide(message(Kind.REBALANCE_RECOMMENDATION), {}, rebalance="panic")


def test_instances_nobody_owns_and_claims_already_deleting_are_left_alone() -> None:
    [foreign] = decide(message(Kind.SPOT_INTERRUPTION), {})
    assert foreign.kind is ActionKind.NO_OP and foreign.nodeclaim == ""
    [deleting] = decide(
        message(Kind.SPOT_INTERRUPTION), {INSTANCE: claim(deletionTimestamp="2026-01-01T00:00:00Z")}
    )
    assert deleting.kind is ActionKind.NO_OP
    assert decide(Message(Kind.NO_OP), {INSTANCE: claim()}) == []
