"""The unavailable-offerings cache: offerings that recently failed with insufficient capacity.

Keyed ``capacity type : instance type : zone`` with a fixed 3-minute TTL (as
Karpenter since aws/karpenter-provider-aws#1715). Whole capacity types (spot
without the service-linked role), subnets out of IP addresses and capacity
reservations can be marked too. The clock is injected so tests and the
simulator control expiry; ``seq`` increases on every change so callers can
cache derived views cheaply.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from reconciler.cloud.aws.metrics import AWSMetrics
from reconciler.cloud.types import UNAVAILABLE_OFFERING_TTL_SECONDS


class UnavailableOfferings:
    def __init__(self, clock: Callable[[], float] = time.monotonic, ttl: float = UNAVAILABLE_OFFERING_TTL_SECONDS,
                 metrics: AWSMetrics | None = None) -> None:
        self._clock = clock
        self._ttl = ttl
        self._offerings: dict[tuple[str, str, str], float] = {}
        self._capacity_types: dict[str, float] = {}
        self._subnets: dict[str, float] = {}
        self._reservations: dict[str, float] = {}
        self.seq = 0
        if metrics is not None:  # counted when scraped, so entries that expired are not reported
            metrics.unavailable_offerings.set_function(lambda: len(self.unavailable()))

    # --- marking -------------------------------------------------------------------------------------

    def mark_unavailable(self, capacity_type: str, instance_type: str, zone: str, reason: str = "") -> None:
        self._offerings[(capacity_type, instance_type, zone)] = self._clock() + self._ttl
        self._changed()

    def mark_capacity_type_unavailable(self, capacity_type: str) -> None:
        self._capacity_types[capacity_type] = self._clock() + self._ttl
        self._changed()

    def mark_subnet_unavailable(self, subnet_id: str) -> None:
        self._subnets[subnet_id] = self._clock() + self._ttl
        self._changed()

    def mark_reservation_unavailable(self, reservation_id: str) -> None:
        self._reservations[reservation_id] = self._clock() + self._ttl
        self._changed()

    def _changed(self) -> None:
        self.seq += 1

    # --- queries -------------------------------------------------------------------------------------

    def is_unavailable(self, capacity_type: str, instance_type: str, zone: str) -> bool:
        now = self._clock()
        return self._live(self._capacity_types, capacity_type, now) or self._live(
            self._offerings, (capacity_type, instance_type, zone), now
        )

    def is_subnet_unavailable(self, subnet_id: str) -> bool:
        return self._live(self._subnets, subnet_id, self._clock())

    def is_reservation_unavailable(self, reservation_id: str) -> bool:
        return self._live(self._reservations, reservation_id, self._clock())

    def unavailable(self) -> list[tuple[str, str, str]]:
        """Live ``(capacity type, instance type, zone)`` entries, for explanations and tests."""
        now = self._clock()
        return sorted(key for key, expiry in self._offerings.items() if expiry > now)

    def cleanup(self) -> None:
        """Drop expired entries (called periodically; queries ignore expired entries anyway)."""
        now = self._clock()
        tables: tuple[dict[Any, float], ...] = (
            self._offerings, self._capacity_types, self._subnets, self._reservations
        )
        for table in tables:
            for key in [k for k, expiry in table.items() if expiry <= now]:
                del table[key]

    @staticmethod
    def _live(table: dict, key: object, now: float) -> bool:
        expiry = table.get(key)
        return expiry is not None and expiry > now
