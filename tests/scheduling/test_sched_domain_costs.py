"""A new zonal pod-affinity group starts in a zone where its pods are cheapest (scheduling/domain_costs.py)."""

from __future__ import annotations

from sched_factories import ZONES, affinity_term, instance_type, node, nodepool, solve
from test_sched_topology import WEB, web_pods, zones_of

from reconciler.model import labels as wk

AFFINITY = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [affinity_term(wk.ZONE, WEB)]}}


def zone_one_dearer() -> list:
    """As Graviton types in us-east-1e: the cheap type has no offering in the first zone (in sorted order)."""
    return [
        instance_type("cheap", 4, 8, 30, price=0.10, zones=ZONES[1:]),
        instance_type("dear", 4, 8, 30, price=0.20),
    ]


def test_a_new_zonal_affinity_group_starts_where_its_pods_are_cheapest():
    result = solve([nodepool(), *web_pods(4, cpu="1500m", affinity=AFFINITY)], zone_one_dearer())
    zones = zones_of(result)
    assert not result.pending and sum(zones.values()) == 4
    assert list(zones) == ["test-zone-2"]  # not test-zone-1, the first zone, where only the dear type runs


def test_zones_priced_alike_keep_the_first_zone():
    alike = [instance_type("cheap", 4, 8, 30, price=0.10), instance_type("dear", 4, 8, 30, price=0.20)]
    result = solve([nodepool(), *web_pods(4, cpu="1500m", affinity=AFFINITY)], alike)
    assert list(zones_of(result)) == ["test-zone-1"]


def test_the_preference_yields_when_only_a_dearer_zone_has_room():
    # The pool may launch nothing more (limit reached): the group can only start on the running node in
    # test-zone-1, which the cheap-zone preference refuses at first (the group costs more than a node more there).
    objects = [
        nodepool(limits={"cpu": "4"}),
        node("n1", zone="test-zone-1", cpu="16", memory="32Gi", instance="dear"),
        *web_pods(12, cpu="1", affinity=AFFINITY),
    ]
    result = solve(objects, zone_one_dearer())
    assert not result.pending, result.pending
    assert not result.nodeclaims and sorted(result.existing.values()) == ["n1"] * 12
