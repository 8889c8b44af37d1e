"""Capacity reservations (ODCRs and capacity blocks): selection, status, reserved offerings, expiry. Pure.

``capacityReservationSelectorTerms`` select reservations as DescribeCapacityReservations does: a term
with ``id`` asks for that reservation; a term with tags, ``ownerID`` and/or ``instanceMatchCriteria``
filters on them (tag ``*`` = the key exists); only ``active`` reservations count and one whose end
time has passed is dropped. ``matches`` applies the same rules locally (the simulator's catalogue, the
moto patch), ``describe_queries`` builds the EC2 requests.

A selected reservation becomes one ``reserved`` offering of its instance type in its zone, priced as
Karpenter prices it: the on-demand price / 10,000,000, so reserved capacity always sorts first while
the relative order of reserved types survives (a consolidation can still move to a smaller reserved
type). It is available while the reservation has instances left and, for a capacity block, until 40
minutes before its end, when Karpenter starts draining the nodes in it (EC2 reclaims them from 30
minutes before the end).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.cloud.types import Offering
from reconciler.model import labels as wk
from reconciler.model.conditions import is_true
from reconciler.model.meta import format_time

RESERVED_PRICE_DIVISOR = 10_000_000.0
# A capacity block is "expiring" from this long before its end: no launches, nodes in it are drained.
CAPACITY_BLOCK_EXPIRY_LEAD = timedelta(minutes=40)
MATCH_CRITERIA = ("open", "targeted")
RESERVATION_TYPES = (wk.RESERVATION_TYPE_DEFAULT, wk.RESERVATION_TYPE_CAPACITY_BLOCK)
PRICE_SOURCE = "capacity reservation: prepaid, priced at on-demand / 10,000,000 as Karpenter does"
CAPACITY_RESERVATION_DRIFT = "CapacityReservationDrift"


class ReservationError(ValueError):
    """A reservation EC2 (or a scenario) describes in a way Karpenter refuses; the message names it."""


@dataclass(slots=True, frozen=True)
class CapacityReservation:
    """One EC2 capacity reservation; ``available`` is its ``AvailableInstanceCount``."""

    id: str
    instance_type: str
    zone: str
    owner_id: str = ""
    instance_match_criteria: str = "targeted"
    reservation_type: str = wk.RESERVATION_TYPE_DEFAULT
    interruptible: bool = False
    end_time: datetime | None = None
    available: int = 0
    total: int = 0
    state: str = "active"  # EC2's state: active, expired, cancelled, pending, failed, ...
    tags: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_ec2(cls, item: Mapping[str, Any]) -> CapacityReservation:
        """A DescribeCapacityReservations item; unsupported match criteria or types raise (as upstream
        refuses them: a future EC2 value must not be treated as one Karpenter knows)."""
        reservation_id = str(item.get("CapacityReservationId", ""))
        criteria = str(item.get("InstanceMatchCriteria", ""))
        if criteria not in MATCH_CRITERIA:
            raise ReservationError(f"capacity reservation {reservation_id}: unsupported instance match criteria "
                                   f"{criteria!r}")
        kind = str(item.get("ReservationType") or wk.RESERVATION_TYPE_DEFAULT)
        if kind not in RESERVATION_TYPES:
            raise ReservationError(f"capacity reservation {reservation_id}: unsupported reservation type {kind!r}")
        end = item.get("EndDate")
        if isinstance(end, str):
            end = datetime.fromisoformat(end.replace("Z", "+00:00"))
        return cls(
            id=reservation_id,
            instance_type=str(item.get("InstanceType", "")),
            zone=str(item.get("AvailabilityZone", "")),
            owner_id=str(item.get("OwnerId", "")),
            instance_match_criteria=criteria,
            reservation_type=kind,
            interruptible=bool(item.get("Interruptible", False)),
            end_time=_utc(end) if isinstance(end, datetime) else None,
            available=int(item.get("AvailableInstanceCount") or 0),
            total=int(item.get("TotalInstanceCount") or 0),
            state=str(item.get("State", "active")),
            tags={str(t.get("Key")): str(t.get("Value", "")) for t in item.get("Tags") or []},
        )

    @classmethod
    def from_status(cls, entry: Mapping[str, Any]) -> CapacityReservation:
        """An EC2NodeClass ``status.capacityReservations`` entry (no count: treated as none left)."""
        end = entry.get("endTime")
        return cls(
            id=str(entry.get("id", "")),
            instance_type=str(entry.get("instanceType", "")),
            zone=str(entry.get("availabilityZone", "")),
            owner_id=str(entry.get("ownerID", "")),
            instance_match_criteria=str(entry.get("instanceMatchCriteria", "targeted")),
            reservation_type=str(entry.get("reservationType") or wk.RESERVATION_TYPE_DEFAULT),
            interruptible=bool(entry.get("interruptible", False)),
            end_time=_utc(datetime.fromisoformat(str(end).replace("Z", "+00:00"))) if end else None,
        )

    def expiring(self, now: datetime) -> bool:
        """A capacity block within 40 minutes of its end (Karpenter's ``expiring`` state)."""
        return (
            self.reservation_type == wk.RESERVATION_TYPE_CAPACITY_BLOCK
            and self.end_time is not None
            and _utc(now) >= self.end_time - CAPACITY_BLOCK_EXPIRY_LEAD
        )

    def ended(self, now: datetime) -> bool:
        return self.end_time is not None and _utc(now) >= self.end_time

    def to_status(self, now: datetime) -> dict[str, Any]:
        """The EC2NodeClass ``status.capacityReservations`` entry."""
        entry: dict[str, Any] = {
            "availabilityZone": self.zone,
            "id": self.id,
            "instanceMatchCriteria": self.instance_match_criteria,
            "instanceType": self.instance_type,
            "ownerID": self.owner_id,
            "reservationType": self.reservation_type,
            "interruptible": self.interruptible,
            "state": "expiring" if self.expiring(now) else "active",
        }
        if self.end_time is not None:
            entry["endTime"] = format_time(self.end_time)
        return entry



def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


# -- selection ------------------------------------------------------------------------------------------


def describe_queries(terms: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """DescribeCapacityReservations arguments per selector term (one per ``id``, one per filter term)."""
    queries: list[dict[str, Any]] = []
    for term in terms:
        active = [{"Name": "state", "Values": ["active"]}]
        if term.get("id"):
            queries.append({"CapacityReservationIds": [str(term["id"])], "Filters": active})
        if term.get("tags") or term.get("instanceMatchCriteria"):
            filters = list(active)
            if term.get("ownerID"):
                filters.append({"Name": "owner-id", "Values": [str(term["ownerID"])]})
            for key, value in sorted((term.get("tags") or {}).items()):
                if value == "*":
                    filters.append({"Name": "tag-key", "Values": [str(key)]})
                else:
                    filters.append({"Name": f"tag:{key}", "Values": [str(value)]})
            if term.get("instanceMatchCriteria"):
                filters.append({"Name": "instance-match-criteria", "Values": [str(term["instanceMatchCriteria"])]})
            queries.append({"Filters": filters})
    return queries


def matches(term: Mapping[str, Any], reservation: CapacityReservation) -> bool:
    """Whether one selector term selects ``reservation`` (DescribeCapacityReservations' rules, locally)."""
    if reservation.state != "active":
        return False
    if term.get("id"):
        return reservation.id == term["id"]
    if not (term.get("tags") or term.get("instanceMatchCriteria")):
        return False
    if term.get("ownerID") and reservation.owner_id != term["ownerID"]:
        return False
    criteria = term.get("instanceMatchCriteria")
    if criteria and reservation.instance_match_criteria != criteria:
        return False
    for key, value in (term.get("tags") or {}).items():
        if key not in reservation.tags or (value != "*" and reservation.tags[key] != value):
            return False
    return True


def select(
    terms: Sequence[Mapping[str, Any]], reservations: Iterable[CapacityReservation], now: datetime
) -> list[CapacityReservation]:
    """The reservations any term selects, unique, by ID, without those past their end time."""
    chosen = {r.id: r for r in reservations if not r.ended(now) and any(matches(t, r) for t in terms)}
    return [chosen[key] for key in sorted(chosen)]


def unique_live(found: Iterable[CapacityReservation], now: datetime) -> list[CapacityReservation]:
    """What EC2 answered for several queries: each reservation once, none past its end, by ID."""
    chosen = {r.id: r for r in found if not r.ended(now)}
    return [chosen[key] for key in sorted(chosen)]


# -- offerings ------------------------------------------------------------------------------------------


def reserved_offerings(
    instance_type: str,
    reservations: Iterable[CapacityReservation],
    *,
    on_demand_price: float | None,
    zones: Iterable[str],
    zone_ids: Mapping[str, str],
    available_count: Callable[[CapacityReservation], int],
    runnable: bool,
    now: datetime,
) -> list[Offering]:
    """One ``reserved`` offering per reservation of ``instance_type``: priced on-demand / 10^7, available
    while the type can run, the zone is one the type launches in, instances are left and (capacity blocks)
    the block is not expiring."""
    type_zones = set(zones)
    offerings = []
    for reservation in reservations:
        if reservation.instance_type != instance_type:
            continue
        left = max(0, available_count(reservation))
        offerings.append(
            Offering(
                zone=reservation.zone,
                capacity_type=wk.CAPACITY_TYPE_RESERVED,
                price=(on_demand_price or 0.0) / RESERVED_PRICE_DIVISOR,
                available=(
                    runnable and left > 0 and reservation.zone in type_zones and not reservation.expiring(now)
                ),
                zone_id=zone_ids.get(reservation.zone, ""),
                price_source=PRICE_SOURCE,
                reservation_id=reservation.id,
                reservation_type=reservation.reservation_type,
                reservation_capacity=left,
                interruptible=reservation.interruptible,
            )
        )
    return offerings


def with_count(reservation: CapacityReservation, available: int) -> CapacityReservation:
    return replace(reservation, available=max(0, available))


# -- expiry ---------------------------------------------------------------------------------------------


def expiring_claims(
    nodeclaims: Iterable[Mapping[str, Any]], reservations: Mapping[str, CapacityReservation], now: datetime
) -> list[str]:
    """NodeClaims in capacity blocks that are expiring now: Karpenter deletes them (drain, then terminate)
    40 minutes before the block ends, ahead of EC2's reclaim. Claims already deleting are left alone."""
    names = []
    for claim in nodeclaims:
        metadata = claim.get("metadata") or {}
        if metadata.get("deletionTimestamp"):
            continue
        reservation = reservations.get(str((metadata.get("labels") or {}).get(wk.CAPACITY_RESERVATION_ID, "")))
        if reservation is not None and reservation.expiring(now):
            names.append(str(metadata.get("name", "")))
    return sorted(names)


def status_reservation_ids(nodeclass: Mapping[str, Any] | None) -> frozenset[str] | None:
    """The reservation IDs an EC2NodeClass's status lists, or None when no resolver has written them (no
    ``CapacityReservationsReady`` condition): then nothing can be said about reservation drift."""
    if not is_true(nodeclass or {}, "CapacityReservationsReady"):
        return None
    status = (nodeclass or {}).get("status") or {}
    return frozenset(str(entry.get("id", "")) for entry in status.get("capacityReservations") or [])
