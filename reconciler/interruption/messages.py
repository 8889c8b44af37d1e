"""EventBridge interruption events, as delivered through the SQS queue.

``parse`` turns a message body into a ``Message``. The envelope (``version``,
``source``, ``detail-type``, ``id``, ``time``) selects the parser; an unknown
triple, or a known one that is not about an EC2 instance interruption (a state
change to ``running``, a non-EC2 health event) is a ``no_op`` message. Bodies
that are not JSON objects, or whose ``detail`` is malformed for their kind,
raise ``MessageParseError`` (the consumer counts and deletes them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, TypedDict

from reconciler.model.meta import format_time, parse_time_or_none


class Kind(StrEnum):
    SPOT_INTERRUPTION = "spot_interrupted"
    REBALANCE_RECOMMENDATION = "rebalance_recommendation"
    INSTANCE_STOPPED = "instance_stopped"
    INSTANCE_TERMINATED = "instance_terminated"
    SCHEDULED_CHANGE = "scheduled_change"
    CAPACITY_RESERVATION_INTERRUPTION = "capacity_reservation_interrupted"
    NO_OP = "no_op"


SPOT_INTERRUPTION = ("aws.ec2", "EC2 Spot Instance Interruption Warning")
REBALANCE = ("aws.ec2", "EC2 Instance Rebalance Recommendation")
STATE_CHANGE = ("aws.ec2", "EC2 Instance State-change Notification")
HEALTH = ("aws.health", "AWS Health Event")
CAPACITY_RESERVATION = ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning")
STOPPING_STATES = frozenset({"stopping", "stopped"})
TERMINATING_STATES = frozenset({"shutting-down", "terminated"})
_INSTANCE_ID = re.compile(r"^i-[0-9a-f]{8,17}$")


class MessageParseError(ValueError):
    pass


class _Envelope(TypedDict):
    """The envelope fields every ``Message`` carries."""

    event_id: str
    time: datetime | None
    source: str
    detail_type: str


@dataclass(slots=True, frozen=True)
class Message:
    kind: Kind
    instance_ids: tuple[str, ...] = ()
    event_id: str = ""
    time: datetime | None = None
    source: str = ""
    detail_type: str = ""

    @property
    def metric_label(self) -> str:
        return self.kind.value


def parse(body: str | bytes) -> Message:
    """Parse an SQS body; every failure is a ``MessageParseError`` so the consumer deletes the message
    (a parser bug must not turn one odd message into a poison message redelivered forever)."""
    try:
        return _parse(body)
    except MessageParseError:
        raise
    except Exception as err:  # any other failure is still an unreadable message
        raise MessageParseError(f"unreadable message ({type(err).__name__}: {err})") from None


def _parse(body: str | bytes) -> Message:
    try:
        envelope = json.loads(body)
    except (ValueError, TypeError, RecursionError) as err:
        raise MessageParseError(f"body is not JSON: {err}") from None
    if not isinstance(envelope, dict):
        raise MessageParseError(f"body is a JSON {type(envelope).__name__}, not an object")
    version, source, detail_type = (
        envelope.get("version"),
        envelope.get("source"),
        envelope.get("detail-type"),
    )
    base: _Envelope = {
        "event_id": _text(envelope.get("id")),
        # The envelope time only feeds a latency metric: an odd one is dropped, not an error.
        "time": parse_time_or_none(envelope.get("time")),
        "source": _text(source),
        "detail_type": _text(detail_type),
    }
    if version != "0" or not isinstance(source, str) or not isinstance(detail_type, str):
        return Message(Kind.NO_OP, **base)
    triple = (source, detail_type)
    if triple not in (SPOT_INTERRUPTION, REBALANCE, STATE_CHANGE, HEALTH, CAPACITY_RESERVATION):
        return Message(Kind.NO_OP, **base)
    detail = envelope.get("detail")
    if not isinstance(detail, Mapping):
        raise MessageParseError(f"{detail_type}: detail must be an object")
    if triple == HEALTH:
        return _health(detail, base)
    instance_id = _instance_id(detail.get("instance-id"), f"{detail_type}: detail.instance-id")
    if triple == SPOT_INTERRUPTION:
        return Message(Kind.SPOT_INTERRUPTION, (instance_id,), **base)
    if triple == REBALANCE:
        return Message(Kind.REBALANCE_RECOMMENDATION, (instance_id,), **base)
    if triple == CAPACITY_RESERVATION:
        return Message(Kind.CAPACITY_RESERVATION_INTERRUPTION, (instance_id,), **base)
    state = detail.get("state")
    if not isinstance(state, str):
        raise MessageParseError(f"{detail_type}: detail.state must be a string")
    if state in STOPPING_STATES:
        return Message(Kind.INSTANCE_STOPPED, (instance_id,), **base)
    if state in TERMINATING_STATES:
        return Message(Kind.INSTANCE_TERMINATED, (instance_id,), **base)
    return Message(Kind.NO_OP, (instance_id,), **base)


def eventbridge_event(kind: Kind, instance_id: str, when: datetime, event_id: str = "") -> dict[str, Any]:
    """The EventBridge event the queue carries when ``instance_id`` meets ``kind`` (the inverse of ``parse``;
    the simulator delivers its interruptions through it)."""
    triple, detail = {
        Kind.SPOT_INTERRUPTION: (SPOT_INTERRUPTION, {"instance-id": instance_id, "instance-action": "terminate"}),
        Kind.REBALANCE_RECOMMENDATION: (REBALANCE, {"instance-id": instance_id}),
        Kind.INSTANCE_STOPPED: (STATE_CHANGE, {"instance-id": instance_id, "state": "stopping"}),
        Kind.INSTANCE_TERMINATED: (STATE_CHANGE, {"instance-id": instance_id, "state": "terminated"}),
        Kind.SCHEDULED_CHANGE: (
            HEALTH,
            {"service": "EC2", "eventTypeCategory": "scheduledChange",
             "affectedEntities": [{"entityValue": instance_id}]},
        ),
        Kind.CAPACITY_RESERVATION_INTERRUPTION: (CAPACITY_RESERVATION, {"instance-id": instance_id}),
    }[kind]
    return {
        "version": "0",
        "id": event_id or f"{kind.value}-{instance_id}",
        "source": triple[0],
        "detail-type": triple[1],
        "time": format_time(when),
        "detail": detail,
    }


def _health(detail: Mapping[str, Any], base: _Envelope) -> Message:
    if detail.get("service") != "EC2" or detail.get("eventTypeCategory") != "scheduledChange":
        return Message(Kind.NO_OP, **base)
    entities = detail.get("affectedEntities")
    if not isinstance(entities, list):
        raise MessageParseError("AWS Health Event: detail.affectedEntities must be a list")
    ids = []
    for index, entity in enumerate(entities):
        if not isinstance(entity, Mapping):
            raise MessageParseError(f"AWS Health Event: detail.affectedEntities[{index}] must be an object")
        ids.append(
            _instance_id(
                entity.get("entityValue"), f"AWS Health Event: affectedEntities[{index}].entityValue"
            )
        )
    return Message(Kind.SCHEDULED_CHANGE, tuple(ids), **base)


def _instance_id(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _INSTANCE_ID.match(value):
        raise MessageParseError(f"{where}: {value!r} is not an EC2 instance ID")
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
