"""Capacity reservations in a scheduling run: how many NodeClaims each reservation can still take.

A reserved offering is free (prepaid) capacity with a hard count. A planned NodeClaim *holds* every
reservation it could launch into (pessimistically: it launches into only one, but which one is the
cloud's choice), so the run never plans more claims into a reservation than it has instances left
(Karpenter's ReservationManager). When a pod narrows a claim so a reservation no longer fits it, the
claim gives that reservation back for later claims.

Two modes, as upstream: provisioning is *strict* (a pod that could use reserved capacity but finds it
all held by other planned claims waits for a later run instead of falling back to a paid offering or a
lower-weight NodePool); disruption simulations *fall back* (they only ask whether pods fit somewhere).
"""

from __future__ import annotations

from collections.abc import Iterable

from reconciler.scheduling.instancetypes import TypeInfo

# Why a pod was not added: reserved capacity exists for it but every instance of it is held this run.
ALL_HELD = "every compatible capacity reservation is already held by NodeClaims planned in this run"
# Why a pod was not added to a claim: the pod's constraints would rule out the claim's reservations.
WOULD_DROP = "the pod's constraints rule out the capacity reservations this NodeClaim holds"


class ReservationLedger:
    """Instances left per reservation ID in this run, and the reservations each planned claim holds."""

    __slots__ = ("_held", "_left", "strict")

    def __init__(self, types: Iterable[TypeInfo], *, strict: bool) -> None:
        left: dict[str, int] = {}
        for info in types:
            for offering in info.reserved:
                # Several pools may list the same reservation (one count); keep the smallest count seen.
                current = left.get(offering.reservation_id)
                if current is None or offering.reservation_capacity < current:
                    left[offering.reservation_id] = max(0, offering.reservation_capacity)
        self._left = left
        self._held: dict[int, frozenset[str]] = {}
        self.strict = strict

    def __bool__(self) -> bool:
        return bool(self._left)

    def can_hold(self, claim: int, reservation_id: str) -> bool:
        """Idempotent: a claim already holding it can keep it."""
        if reservation_id in self._held.get(claim, ()):
            return True
        return self._left.get(reservation_id, 0) > 0

    def held(self, claim: int) -> frozenset[str]:
        return self._held.get(claim, frozenset())

    def hold(self, claim: int, reservations: frozenset[str]) -> None:
        """``claim`` now holds exactly ``reservations``: the ones it no longer needs go back."""
        previous = self._held.get(claim, frozenset())
        for reservation_id in previous - reservations:
            self._left[reservation_id] += 1
        for reservation_id in reservations - previous:
            if self._left.get(reservation_id, 0) <= 0:
                raise AssertionError(f"capacity reservation {reservation_id} over-held")  # can_hold guards this
            self._left[reservation_id] -= 1
        if reservations:
            self._held[claim] = reservations
        else:
            self._held.pop(claim, None)

    def remaining(self, reservation_id: str) -> int:
        return self._left.get(reservation_id, 0)
