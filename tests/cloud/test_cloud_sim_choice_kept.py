"""The simulated cloud keeps its launch choices per catalogue list and request (``SimulatedCloud._choose``): on the
real us-east-1 catalogue, through random launch requests (instance-type lists, zone, zone-ID, capacity-type and
reservation requirements, In and NotIn) and random offering outages and recoveries, every kept choice is the one
a walk over the catalogue makes afresh."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.cloud.aws.preset import load_preset
from reconciler.cloud.sim.provider import SimulatedCloud
from reconciler.cloud.types import LaunchRequest
from reconciler.model import labels as wk

_TYPES = load_preset(region="us-east-1")
_NAMES = sorted(t.name for t in _TYPES if t.name.split(".")[0] in {"c6a", "m6i", "r6g", "c7i", "t3", "m5"})
_ZONES = sorted({o.zone for t in _TYPES for o in t.offerings})
_CAPACITY = [wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND]


def _request(rng: random.Random) -> LaunchRequest:
    names = rng.sample(_NAMES, rng.randint(1, 8))
    return LaunchRequest(
        nodeclaim="c", nodepool="p", nodeclass="default", instance_types=names,
        capacity_types=rng.choice([None, [rng.choice(_CAPACITY)], _CAPACITY]),
        zones=rng.choice([None, rng.sample(_ZONES, rng.randint(1, 3))]),
        excluded_zones=frozenset(rng.sample(_ZONES, rng.randint(0, 2))),
        excluded_capacity_types=frozenset(rng.sample(_CAPACITY, rng.randint(0, 1))),
    )


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_kept_launch_choices_equal_choices_made_afresh(seed: int) -> None:
    rng = random.Random(seed)
    clock = [datetime(2026, 1, 1, tzinfo=UTC)]
    cloud = SimulatedCloud(_TYPES, lambda: clock[0])
    requests = [_request(rng) for _ in range(6)]
    for _ in range(60):
        roll = rng.random()
        if roll < 0.15:  # an outage, over for good or for a while
            cloud.mark_unavailable(rng.choice(_NAMES), rng.choice([None, *_ZONES]), rng.choice([None, *_CAPACITY]),
                                   until=rng.choice([None, clock[0] + timedelta(minutes=rng.randint(1, 5))]))
        elif roll < 0.25:
            clock[0] += timedelta(minutes=rng.randint(1, 4))  # outages with an end recover
        request = rng.choice(requests) if rng.random() < 0.7 else _request(rng)
        catalog = cloud.catalog()
        assert cloud._choose(request, catalog) == cloud._choose_afresh(request, catalog)


def test_a_request_differing_only_in_zones_gets_its_own_choice() -> None:
    cloud = SimulatedCloud(_TYPES, lambda: datetime(2026, 1, 1, tzinfo=UTC))
    catalog = cloud.catalog()
    chosen = {}
    zones = sorted({o.zone for t in _TYPES if t.name == "m6i.large" for o in t.offerings})
    for zone in zones:
        request = LaunchRequest(nodeclaim="c", nodepool="p", nodeclass="default", instance_types=["m6i.large"],
                                zones=[zone], capacity_types=[wk.CAPACITY_TYPE_ON_DEMAND])
        found = cloud._choose(request, catalog)
        assert found is not None and found[1].zone == zone
        chosen[zone] = found
    assert len(zones) > 1 and len(chosen) == len(zones)


def test_a_request_differing_only_in_excluded_zones_or_capacity_types_gets_its_own_choice() -> None:
    cloud = SimulatedCloud(_TYPES, lambda: datetime(2026, 1, 1, tzinfo=UTC))
    catalog = cloud.catalog()

    def chosen(**limits: frozenset[str]) -> tuple[str, str]:
        request = LaunchRequest(nodeclaim="c", nodepool="p", nodeclass="default", instance_types=["m6i.large"],
                                **limits)  # type: ignore[arg-type]
        found = cloud._choose(request, catalog)
        assert found is not None
        return found[1].zone, found[1].capacity_type

    zone, capacity_type = chosen()
    assert chosen(excluded_zones=frozenset({zone}))[0] != zone
    assert chosen(excluded_capacity_types=frozenset({capacity_type}))[1] != capacity_type
