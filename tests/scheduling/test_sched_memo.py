"""The speed-ups (per-class refusal memos, lazy instance-type filtering) never change a decision.

Random mixed workloads are scheduled twice, with and without memoization, and
must produce identical plans; the benchmark's workload shape is also checked
for zero unscheduled pods at a small size.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sched_factories import NOW, affinity_term, catalog, node, nodepool, pod, spread

from reconciler.model import labels as wk
from reconciler.scheduling import SchedulingContext
from reconciler.scheduling.scheduler import Scheduler
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState

CPUS = ("100m", "250m", "500m", "1", "1500m")
MEMORY = ("100Mi", "256Mi", "512Mi", "1Gi", "2Gi")


def workload(seed: int, count: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    objects: list[dict[str, Any]] = [nodepool(limits={"cpu": "200"}), node("n1", zone="test-zone-2"),
                                     pod("running", labels={"app": "a"}, node_name="n1", cpu="1")]
    for i in range(count):
        value = rng.choice("abc")
        kind = rng.randrange(6)
        spec: dict[str, Any] = {}
        labels = {"app": value}
        if kind == 1:
            spec["topologySpreadConstraints"] = [spread(wk.ZONE, {"app": rng.choice("abc")})]
        elif kind == 2:
            spec["topologySpreadConstraints"] = [spread(wk.HOSTNAME, {"app": value}, max_skew=rng.choice((1, 2)))]
        elif kind == 3:
            spec["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                affinity_term(wk.ZONE, {"app": value})]}}
        elif kind == 4:
            labels = {"app": "solo"}
            spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                affinity_term(wk.HOSTNAME, {"app": "solo"})]}}
        elif kind == 5:
            spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 5, "preference": {"matchExpressions": [
                    {"key": wk.ZONE, "operator": "In", "values": [rng.choice(("test-zone-1", "test-zone-3"))]}]}}]}}
        objects.append(pod(f"p{i:03d}", rng.choice(CPUS), rng.choice(MEMORY), labels=labels, **spec))
    return objects


def schedule(objects: list[dict[str, Any]], memoize: bool) -> tuple[Any, ...]:
    state = ClusterState.from_manifests(objects)
    context = SchedulingContext.build(state, {"default": catalog()}, Settings())
    result = Scheduler(context, NOW, memoize=memoize).solve(state.pending_pods())
    claims = tuple(
        (tuple(claim.pod_keys), tuple(claim.instance_type_names), str(claim.requirements))
        for claim in result.new_claims
    )
    return claims, tuple(sorted(result.existing.items())), tuple(sorted(result.errors))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), count=st.integers(1, 40))
def test_memoized_and_plain_scheduling_agree(seed: int, count: int) -> None:
    objects = workload(seed, count)
    assert schedule(objects, memoize=True) == schedule(objects, memoize=False)


def test_mixed_workload_schedules_everything_it_can():
    objects = workload(7, 60)
    claims, existing, errors = schedule(objects, memoize=True)
    placed = sum(len(pods) for pods, _, _ in claims) + len(existing)
    assert placed + len(errors) == 60
    assert placed > 50
