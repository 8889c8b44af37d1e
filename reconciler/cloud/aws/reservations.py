"""DescribeCapacityReservations and the count of instances left in each reservation.

``list`` resolves selector terms (one query per term, see ``capacityreservation.describe_queries``);
every answer resets the known counts. Between answers the counts are kept current from our own
launches (one fewer), terminations (one more) and capacity errors (none left), as Karpenter's
availability cache does, so the scheduler never plans more claims into a reservation than it holds.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from reconciler.cloud.aws.capacityreservation import (
    CapacityReservation,
    ReservationError,
    describe_queries,
    unique_live,
)
from reconciler.cloud.aws.clients import AwsCaller, error_code

log = logging.getLogger("reconciler.cloud.aws.reservations")
NOT_FOUND_CODES = ("InvalidCapacityReservationId.NotFound", "InvalidCapacityReservationId.Malformed")


class CapacityReservationProvider:
    def __init__(self, caller: AwsCaller, ec2: Any, now: Callable[[], datetime]) -> None:
        self._caller = caller
        self._ec2 = ec2
        self._now = now
        self._left: dict[str, int] = {}

    async def list(self, terms: Sequence[Mapping[str, Any]]) -> list[CapacityReservation]:
        """The active, unexpired reservations the terms select (each once, by ID)."""
        found: builtins.list[CapacityReservation] = []
        for query in describe_queries(terms):
            found.extend(await self._describe(query))
        return unique_live(found, self._now())

    async def by_ids(self, ids: Iterable[str]) -> dict[str, CapacityReservation]:
        """Current state of these reservations (expired and cancelled ones included: callers decide)."""
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        found = await self._describe({"CapacityReservationIds": wanted}, active_only=False)
        return {r.id: r for r in found}

    async def _describe(
        self, query: Mapping[str, Any], *, active_only: bool = True
    ) -> builtins.list[CapacityReservation]:  # ``list`` here is the method above
        try:
            items = await self._caller.paginate(self._ec2, "describe_capacity_reservations", "CapacityReservations",
                                                **query)
        except Exception as err:
            if error_code(err) in NOT_FOUND_CODES:
                return []  # a selected ID that no longer exists selects nothing
            raise
        reservations = []
        for item in items:
            try:
                reservation = CapacityReservation.from_ec2(item)
            except ReservationError as err:  # a kind Karpenter does not know: skipped, as upstream does
                log.error("skipping capacity reservation: %s", err)
                continue
            if active_only and reservation.state != "active":
                continue
            self._left[reservation.id] = reservation.available
            reservations.append(reservation)
        return reservations

    # -- the count of instances left ----------------------------------------------------------------

    def available(self, reservation_id: str) -> int:
        return self._left.get(reservation_id, 0)

    def mark_launched(self, reservation_id: str) -> None:
        if self._left.get(reservation_id, 0) > 0:
            self._left[reservation_id] -= 1

    def mark_terminated(self, reservation_id: str) -> None:
        if reservation_id in self._left:
            self._left[reservation_id] += 1

    def mark_unavailable(self, reservation_id: str) -> None:
        if reservation_id in self._left:
            self._left[reservation_id] = 0
