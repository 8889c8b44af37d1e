"""Parsing EventBridge interruption envelopes: the five kinds, no-ops, malformed bodies."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.interruption.messages import Kind, MessageParseError, parse

INSTANCE = "i-0123456789abcdef0"


def envelope(source: str, detail_type: str, detail: object, **extra: object) -> str:
    body = {
        "version": "0",
        "id": "7bf73129-1428-4cd3-a780-95db273d1602",
        "detail-type": detail_type,
        "source": source,
        "account": "123456789012",
        "time": "2026-11-21T12:00:00Z",
        "region": "us-east-1",
        "resources": [f"arn:aws:ec2:us-east-1:123456789012:instance/{INSTANCE}"],
        "detail": detail,
    }
    body.update(extra)
    return json.dumps(body)


SPOT = envelope(
    "aws.ec2",
    "EC2 Spot Instance Interruption Warning",
    {"instance-id": INSTANCE, "instance-action": "terminate"},
)
REBALANCE = envelope("aws.ec2", "EC2 Instance Rebalance Recommendation", {"instance-id": INSTANCE})
CAPACITY = envelope(
    "aws.ec2",
    "EC2 Capacity Reservation Instance Interruption Warning",
    {"instance-id": INSTANCE, "instance-action": "terminate"},
)


def state(value: str) -> str:
    return envelope(
        "aws.ec2", "EC2 Instance State-change Notification", {"instance-id": INSTANCE, "state": value}
    )


def health(
    service: str = "EC2", category: str = "scheduledChange", ids: tuple[str, ...] = (INSTANCE,)
) -> str:
    detail = {
        "eventArn": "arn:aws:health:us-east-1::event/EC2/x",
        "service": service,
        "eventTypeCode": "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED",
        "eventTypeCategory": category,
        "affectedEntities": [{"entityValue": i} for i in ids],
    }
    return envelope("aws.health", "AWS Health Event", detail)


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (SPOT, Kind.SPOT_INTERRUPTION),
        (REBALANCE, Kind.REBALANCE_RECOMMENDATION),
        (CAPACITY, Kind.CAPACITY_RESERVATION_INTERRUPTION),
        (state("stopping"), Kind.INSTANCE_STOPPED),
        (state("stopped"), Kind.INSTANCE_STOPPED),
        (state("shutting-down"), Kind.INSTANCE_TERMINATED),
        (state("terminated"), Kind.INSTANCE_TERMINATED),
        (health(), Kind.SCHEDULED_CHANGE),
    ],
)
def test_the_five_event_kinds(body: str, kind: Kind) -> None:
    message = parse(body)
    assert message.kind is kind
    assert message.instance_ids == (INSTANCE,)
    assert message.time is not None and message.time.tzinfo is not None


def test_health_event_lists_every_affected_instance() -> None:
    other = "i-0fedcba9876543210"
    assert parse(health(ids=(INSTANCE, other))).instance_ids == (INSTANCE, other)


@pytest.mark.parametrize(
    "body",
    [
        state("running"),
        state("pending"),
        health(service="RDS"),
        health(category="issue"),
        envelope("aws.ec2", "EC2 Something New", {"instance-id": INSTANCE}),
        envelope("aws.ec2", "EC2 Spot Instance Interruption Warning", {"instance-id": INSTANCE}, version="1"),
        json.dumps({"hello": "world"}),
    ],
)
def test_other_events_are_no_ops(body: str) -> None:
    assert parse(body).kind is Kind.NO_OP


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("", "not JSON"),
        ("not json", "not JSON"),
        ("[1, 2]", "not an object"),
        ("null", "not an object"),
        (envelope("aws.ec2", "EC2 Spot Instance Interruption Warning", None), "detail must be an object"),
        (envelope("aws.ec2", "EC2 Spot Instance Interruption Warning", {"instance-id": 5}), "instance-id"),
        (
            envelope("aws.ec2", "EC2 Instance Rebalance Recommendation", {"instance-id": "vol-123"}),
            "instance-id",
        ),
        (
            envelope("aws.ec2", "EC2 Instance State-change Notification", {"instance-id": INSTANCE}),
            "detail.state",
        ),
        (
            envelope(
                "aws.health", "AWS Health Event", {"service": "EC2", "eventTypeCategory": "scheduledChange"}
            ),
            "affectedEntities",
        ),
        ("[" * 100_000 + "]" * 100_000, "not JSON"),
    ],
)
def test_malformed_bodies_raise_parse_errors(body: str, fragment: str) -> None:
    with pytest.raises(MessageParseError, match=fragment):
        parse(body)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), json_values.map(json.dumps)))
def test_parse_never_raises_anything_but_parse_errors(body: str) -> None:
    with contextlib.suppress(MessageParseError):
        parse(body)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(
        [
            ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
            ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
            ("aws.ec2", "EC2 Instance State-change Notification"),
            ("aws.health", "AWS Health Event"),
            ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"),
        ]
    ),
    json_values,
)
def test_known_kinds_with_arbitrary_details_never_crash(triple: tuple[str, str], detail: object) -> None:
    try:
        message = parse(envelope(*triple, detail))
    except MessageParseError:
        return
    assert all(i.startswith("i-") for i in message.instance_ids)


def test_an_envelope_time_out_of_range_still_parses_the_interruption() -> None:
    message = parse(envelope("aws.ec2", "EC2 Spot Instance Interruption Warning", {"instance-id": INSTANCE},
                             time="9999-12-31T23:59:59-05:00"))
    assert message.kind is Kind.SPOT_INTERRUPTION and message.time is None


def test_an_unexpected_failure_inside_the_parser_is_a_parse_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import reconciler.interruption.messages as messages

    def broken(value: object, where: str) -> str:
        raise OverflowError("a parser bug")

    monkeypatch.setattr(messages, "_instance_id", broken)
    with pytest.raises(MessageParseError, match="OverflowError"):
        parse(envelope("aws.ec2", "EC2 Spot Instance Interruption Warning", {"instance-id": INSTANCE}))


@pytest.mark.parametrize("kind", [k for k in Kind if k is not Kind.NO_OP])
def test_envelope_is_what_parse_reads_back(kind: Kind) -> None:
    from datetime import UTC, datetime

    from reconciler.interruption.messages import eventbridge_event as event_for

    when = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    message = parse(json.dumps(event_for(kind, INSTANCE, when)))
    assert (message.kind, message.instance_ids, message.time) == (kind, (INSTANCE,), when)
    assert message.source in ("aws.ec2", "aws.health") and message.detail_type
