"""Capacity reservations in provisioning: reserved offerings first, never more claims than the reservation
holds, waiting (not falling back) in strict mode, and claims pinned to the reservations they hold."""

from __future__ import annotations

from dataclasses import replace

from sched_factories import NOW, instance_type, nodepool, pod, pods, requirement, solve

from reconciler.cloud.types import InstanceType, Offering
from reconciler.model import labels as wk
from reconciler.model.requirements import Requirement
from reconciler.scheduling.context import SchedulingContext
from reconciler.scheduling.scheduler import Scheduler
from reconciler.settings import DEFAULT_FEATURE_GATES, Settings
from reconciler.state.cluster import ClusterState


def reserved(it: InstanceType, reservation: str, count: int, zone: str = "test-zone-1",
             kind: str = wk.RESERVATION_TYPE_DEFAULT) -> InstanceType:
    """``it`` with one reserved offering (priced as upstream: on-demand / 10,000,000)."""
    on_demand = next(o.price for o in it.offerings if o.capacity_type == "on-demand")
    offering = Offering(zone, wk.CAPACITY_TYPE_RESERVED, on_demand / 10_000_000, count > 0,
                        reservation_id=reservation, reservation_type=kind, reservation_capacity=count)
    return replace(it, offerings=(*it.offerings, offering))


def types(count: int) -> list[InstanceType]:
    return [reserved(instance_type("medium", 4, 8, 30), "cr-0123", count), instance_type("large", 8, 16, 60)]


def gates(**overrides: bool) -> Settings:
    return Settings(feature_gates={**DEFAULT_FEATURE_GATES, **overrides})


def test_a_pod_launches_into_the_reservation_pinned_to_it():
    result = solve([nodepool(), pod("web", cpu="1")], types(2))
    [claim] = result.nodeclaims
    manifest = claim.manifest()
    assert requirement(manifest, wk.CAPACITY_TYPE)["values"] == ["reserved"]
    assert requirement(manifest, wk.CAPACITY_RESERVATION_ID)["values"] == ["cr-0123"]
    assert claim.instance_type_options == ["medium"]


def test_no_more_claims_than_the_reservation_holds_and_the_rest_wait():
    """Anti-affinity forces one pod per node; the reservation has 2 instances: two reserved claims, and in
    provisioning (strict) the third pod waits for a later run instead of taking paid on-demand capacity."""
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": {"app": "web"}}}]}}
    objects = [nodepool(), *pods("web", 3, cpu="1", labels={"app": "web"}, affinity=anti)]
    result = solve(objects, types(2))
    reserved_claims = [c for c in result.nodeclaims
                       if requirement(c.manifest(), wk.CAPACITY_TYPE)["values"] == ["reserved"]]
    assert len(reserved_claims) == 2
    assert len(result.nodeclaims) == 2
    [waiting] = result.pending
    assert "capacity reservation is already held" in result.pending[waiting]


def test_disruption_simulations_fall_back_to_paid_capacity():
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": {"app": "web"}}}]}}
    state = ClusterState.from_manifests([nodepool(), *pods("web", 3, cpu="1", labels={"app": "web"}, affinity=anti)])
    context = SchedulingContext.build(state, {"default": types(2)}, Settings())
    result = Scheduler(context, NOW).solve(state.pending_pods())  # default: fallback
    capacity = sorted(tuple(c.capacity_types) for c in result.new_claims)
    assert len(result.new_claims) == 3 and not result.errors
    assert capacity.count(("reserved",)) == 2


def test_a_pod_that_would_rule_out_the_claims_reservation_gets_its_own_claim():
    """Strict mode: a spot-only pod joining the reserved claim would drop its reservation, so it is refused
    there and gets a claim of its own; the reserved claim keeps its reservation."""
    spot_only = {wk.CAPACITY_TYPE: "spot"}
    objects = [nodepool(), pod("first", cpu="1", memory="1Gi"), pod("spot", cpu="1", nodeSelector=spot_only)]
    result = solve(objects, types(1))
    by_pods = {tuple(c.pods): c for c in result.nodeclaims}
    assert requirement(by_pods[("default/first",)].manifest(), wk.CAPACITY_RESERVATION_ID)["values"] == ["cr-0123"]
    assert requirement(by_pods[("default/spot",)].manifest(), wk.CAPACITY_TYPE)["values"] == ["spot"]


def test_a_higher_weight_pool_with_reserved_capacity_is_not_abandoned_for_a_lower_one():
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": {"app": "web"}}}]}}
    reserved_pool = nodepool("reserved", weight=100, requirements=[
        {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["reserved", "on-demand"]}])
    objects = [reserved_pool, nodepool("fallback"), *pods("web", 2, cpu="1", labels={"app": "web"}, affinity=anti)]
    result = solve(objects, per_pool={"reserved": types(1), "fallback": [instance_type("medium", 4, 8, 30)]})
    assert [c.nodepool for c in result.nodeclaims] == ["reserved"]
    assert len(result.pending) == 1


def test_the_gate_off_ignores_reservations_in_the_scheduler():
    result = solve([nodepool(), pod("web", cpu="1")], types(2), gates(ReservedCapacity=False))
    [claim] = result.nodeclaims
    assert requirement(claim.manifest(), wk.CAPACITY_RESERVATION_ID) is None


def test_pods_selecting_a_reservation_get_only_reserved_offerings():
    selector = {wk.CAPACITY_RESERVATION_ID: "cr-0123"}
    result = solve([nodepool(), pod("web", cpu="1", nodeSelector=selector)], types(1))
    [claim] = result.nodeclaims
    assert claim.instance_type_options == ["medium"]
    assert requirement(claim.manifest(), wk.CAPACITY_TYPE)["values"] == ["reserved"]


def test_type_requirements_carry_reservation_labels():
    from reconciler.scheduling.instancetypes import type_requirements

    with_reservation = type_requirements(types(1)[0])
    without = type_requirements(types(1)[1])
    assert with_reservation.get(wk.CAPACITY_RESERVATION_ID) == Requirement(
        wk.CAPACITY_RESERVATION_ID, False, frozenset({"cr-0123"}))
    assert without.get(wk.CAPACITY_RESERVATION_ID) == Requirement(wk.CAPACITY_RESERVATION_ID, False, frozenset())
