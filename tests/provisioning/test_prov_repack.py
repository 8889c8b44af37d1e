"""reconciler/provisioning/repack.py: a tighter packing of a batch, never costlier, never invalid."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduling"))
from sched_factories import NOW, ZONES, instance_type, nodepool, pod, pods, spread

from reconciler.cloud.types import InstanceType
from reconciler.model import labels as wk
from reconciler.model.requirements import ALLOW_UNDEFINED_WELL_KNOWN
from reconciler.model.resources import Resources
from reconciler.model.taints import tolerates
from reconciler.provisioning.repack import (
    RepackResult,
    batch_cost,
    counted_selectors,
    plain_pod,
    pod_requirements,
    repack,
)
from reconciler.scheduling import SchedulingContext
from reconciler.scheduling.results import ScheduledClaim
from reconciler.scheduling.scheduler import Scheduler
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState


def scheduled(objects: Sequence[Mapping[str, Any]], types: Sequence[InstanceType]
              ) -> tuple[list[ScheduledClaim], RepackResult, SchedulingContext]:
    """Adze's own batch for ``objects`` (what plan predicts) and its repack."""
    state = ClusterState.from_manifests(objects)
    context = SchedulingContext.build(state, {name: list(types) for name in state.nodepools}, Settings())
    result = Scheduler(context, NOW).solve(state.pending_pods())
    assert not result.errors
    return result.new_claims, repack(result.new_claims, {t.name: t for t in context.templates}), context


def assert_valid(before: Sequence[ScheduledClaim], after: RepackResult, context: SchedulingContext) -> None:
    """Checked from the claims themselves, not from the repack's own bookkeeping."""
    templates = {t.name: t for t in context.templates}
    pool_of = {p.key: c.nodepool.name for c in before for p in c.pods}
    placed = [p.key for c in after.claims for p in c.pods]
    assert sorted(placed) == sorted(pool_of), "every pod exactly once"
    assert after.cost <= batch_cost(before) + 1e-9
    assert after.cost == batch_cost(after.claims)
    for claim in after.claims:
        template = templates[claim.nodepool.name]
        assert claim.instance_types and len(claim.prices) == len(claim.instance_types)
        zones = claim.requirements.get(wk.ZONE)
        capacity = claim.requirements[wk.CAPACITY_TYPE]
        requests = Resources()
        for member in claim.pods:
            assert pool_of[member.key] == claim.nodepool.name, "pods stay in their NodePool"
            assert all(tolerates(t, member.tolerations) for t in claim.taints)
            assert claim.requirements.is_compatible(pod_requirements(member), ALLOW_UNDEFINED_WELL_KNOWN)
            requests = requests + member.scheduling_requests
        for itype, price in zip(claim.instance_types, claim.prices, strict=True):
            info = next(t for t in template.types if t.name == itype.name)
            assert info.compatible(claim.requirements)
            overhead = template.daemon_groups[template.group_index[itype.name]].overhead
            assert (requests + Resources(overhead)).fits_in(itype.allocatable), f"{itype.name} holds the pods"
            offered = [o.price for o in itype.offerings if o.available and capacity.has(o.capacity_type)
                       and (zones is None or zones.has(o.zone))]
            assert offered and min(offered) == price
        assert claim.prices == sorted(claim.prices)


MIX = [*pods("cpu", 6, cpu="2", memory="1Gi"), *pods("mem", 6, cpu="500m", memory="10Gi")]


def test_separates_a_cpu_heavy_and_a_memory_heavy_mix_when_two_families_are_cheaper() -> None:
    # Upstream's order (largest CPU first, one claim filled before the next) fills the first claim with the CPU
    # pods and then five memory pods, which only a general node holds; a compute node for the CPU pods and a
    # memory node for the others cost less (spot: 0.64 + 0.28 against 0.32 + 0.28).
    types = [
        instance_type("general", 16, 64, price=1.60),
        instance_type("compute", 16, 32, price=0.80),
        instance_type("memory", 4, 64, price=0.70),
    ]
    objects = [nodepool(), *MIX]
    before, after, context = scheduled(objects, types)
    assert_valid(before, after, context)
    assert after.cost < batch_cost(before)
    assert after.repacked_pools == ("default",)


def test_returns_the_input_when_no_cheaper_packing_is_found() -> None:
    before, after, _ = scheduled([nodepool(), *pods("web", 4, cpu="1", memory="1Gi")],
                                 [instance_type("medium", 8, 16)])
    assert after.claims == before and after.repacked_pools == () and after.savings == 0


def test_constrained_pods_stay_in_their_claims_untouched() -> None:
    spreading = spread(wk.ZONE, {"app": "spread"})
    objects = [
        nodepool(),
        *pods("spread", 3, cpu="2", memory="1Gi", labels={"app": "spread"}, topologySpreadConstraints=[spreading]),
        *pods("counted", 3, cpu="500m", memory="8Gi", labels={"app": "spread"}),  # counted by the spread above
        *pods("ported", 2, cpu="500m", memory="8Gi",
              containers=[{"name": "app", "image": "pause", "ports": [{"containerPort": 80, "hostPort": 80}],
                           "resources": {"requests": {"cpu": "500m", "memory": "8Gi"}}}]),
    ]
    types = [instance_type("general", 16, 64, price=1.60), instance_type("compute", 16, 32, price=0.80),
             instance_type("memory", 4, 64, price=0.70)]
    before, after, context = scheduled(objects, types)
    assert_valid(before, after, context)
    for claim in before:
        assert claim in after.claims, "a claim holding a constrained pod is kept as it was"


def test_plain_pod_excludes_every_kind_of_constraint() -> None:
    state = ClusterState.from_manifests([
        pod("plain"),
        pod("selected", nodeSelector={wk.ZONE: ZONES[0]}),
        pod("pinned", nodeSelector={wk.HOSTNAME: "n1"}),
        pod("spread", labels={"a": "b"}, topologySpreadConstraints=[spread(wk.ZONE, {"a": "b"})]),
        pod("anti", labels={"c": "d"}, affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": {"c": "d"}}}]}}),
        pod("preferring", affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": wk.ZONE, "operator": "In",
                                                               "values": [ZONES[1]]}]}}]}}),
    ])
    found = {p.name: plain_pod(p) for p in state.pods.values()}
    assert found == {"plain": True, "selected": True, "pinned": False, "spread": False, "anti": False,
                     "preferring": False}
    # A plain pod that another pod's spread or affinity selector counts stays too: moving it moves the count.
    counted = ClusterState.from_manifests([pod("counted", labels={"a": "b"}), pod("elsewhere", labels={"a": "b"},
                                                                              namespace="other")]).pods
    selectors = counted_selectors(state.pods.values())
    assert [plain_pod(p, selectors) for p in sorted(counted.values(), key=lambda p: p.name)] == [False, True]


def test_keeps_pods_in_their_node_pool_and_honours_taints_and_selectors() -> None:
    tainted = nodepool("gpu-free", taints=[{"key": "team", "value": "a", "effect": "NoSchedule"}])
    toleration = [{"key": "team", "operator": "Equal", "value": "a", "effect": "NoSchedule"}]
    types = [instance_type("general", 16, 64, price=1.60), instance_type("compute", 16, 32, price=0.80),
             instance_type("memory", 4, 64, price=0.70)]
    objects = [
        nodepool(), tainted,
        *pods("a-cpu", 5, cpu="2", memory="1Gi", tolerations=toleration),
        *pods("a-mem", 5, cpu="500m", memory="8Gi", tolerations=toleration, nodeSelector={wk.ZONE: ZONES[1]}),
        *pods("cpu", 5, cpu="2", memory="1Gi"), *pods("mem", 5, cpu="500m", memory="8Gi"),
    ]
    before, after, context = scheduled(objects, types)
    assert_valid(before, after, context)
    zoned = [c for c in after.claims if any(p.name.startswith("a-mem") for p in c.pods)]
    assert all(c.requirements[wk.ZONE].values == frozenset({ZONES[1]}) for c in zoned)


def test_a_pool_with_limits_never_reserves_more_than_the_claims_it_replaces() -> None:
    types = [instance_type("general", 16, 64, price=1.60), instance_type("compute", 16, 32, price=0.80),
             instance_type("memory", 4, 64, price=0.70)]
    batch = MIX
    before, free, _ = scheduled([nodepool(), *batch], types)
    assert free.repacked_pools  # the same batch without limits is repacked (two claims, 32 CPU reserved)
    _, limited, context = scheduled([nodepool(limits={"cpu": "32"}), *batch], types)
    assert_valid(before, limited, context)
    reserved = sum(max(t.capacity.amount("cpu") for t in c.instance_types) for c in limited.claims)
    assert reserved <= 32_000


def test_a_node_count_limit_keeps_the_repack_from_splitting_a_claim() -> None:
    """Two half-size nodes cost less than the one the scheduler chose, but ``limits.nodes: 1`` allows one node."""
    types = [instance_type("big", 8, 16, price=1.00), instance_type("small", 4, 8, price=0.30)]
    batch = pods("web", 4, cpu="1500m", memory="1Gi")
    before, free, _ = scheduled([nodepool(), *batch], types)
    assert len(before) == 1 and len(free.claims) == 2  # unlimited: split in two, 0.60 $/h instead of 1.00
    _, limited, context = scheduled([nodepool(limits={"nodes": "1"}), *batch], types)
    assert_valid(before, limited, context)
    assert len(limited.claims) == 1 and not limited.repacked_pools


def test_a_cpu_limit_keeps_the_repack_from_reserving_more_cpu_than_it_replaces() -> None:
    """Two 6-CPU nodes cost less than the 8-CPU one chosen, but reserve 12 CPU where the pool allows 10."""
    types = [instance_type("big", 8, 16, price=1.00), instance_type("odd", 6, 8, price=0.30)]
    batch = pods("web", 4, cpu="1500m", memory="1Gi")
    before, free, _ = scheduled([nodepool(), *batch], types)
    assert len(before) == 1 and len(free.claims) == 2
    _, limited, context = scheduled([nodepool(limits={"cpu": "10"}), *batch], types)
    assert_valid(before, limited, context)
    assert len(limited.claims) == 1 and not limited.repacked_pools


def test_real_catalogue_batch_is_valid_and_not_costlier() -> None:
    from reconciler.cloud.aws.preset import load_preset

    types = load_preset()
    objects = [
        nodepool(requirements=[{"key": "karpenter.k8s.aws/instance-category", "operator": "In",
                                "values": ["c", "m", "r"]},
                               {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]),
        *pods("cpu", 30, cpu="3", memory="2Gi"), *pods("mem", 30, cpu="500m", memory="12Gi"),
        *pods("arm", 6, cpu="1", memory="2Gi", nodeSelector={wk.ARCH: "arm64"}),
        *pods("zonal", 6, cpu="1", memory="2Gi", nodeSelector={wk.ZONE: "us-east-1a"}),
    ]
    before, after, context = scheduled(objects, types)
    assert_valid(before, after, context)
    assert after.cost < batch_cost(before), "the real catalogue has a cheaper split of this mix"


@st.composite
def batches(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(1, 40))
    objects: list[dict[str, Any]] = [nodepool(), nodepool("tainted", taints=[{"key": "t", "effect": "NoSchedule"}],
                                                          weight=draw(st.sampled_from([None, 10])))]
    for index in range(count):
        spec: dict[str, Any] = {}
        kind = draw(st.sampled_from(["plain", "zone", "arch", "tolerating", "spread", "anti"]))
        labels = {"app": draw(st.sampled_from(["a", "b"]))}
        if kind == "zone":
            spec["nodeSelector"] = {wk.ZONE: draw(st.sampled_from(ZONES))}
        elif kind == "arch":
            spec["nodeSelector"] = {wk.ARCH: draw(st.sampled_from(["amd64", "arm64"]))}
        elif kind == "tolerating":
            spec["tolerations"] = [{"key": "t", "operator": "Exists"}]
        elif kind == "spread":
            spec["topologySpreadConstraints"] = [spread(wk.ZONE, labels)]
        elif kind == "anti":
            spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": labels}}]}}
        cpu = draw(st.sampled_from(["100m", "500m", "1", "2", "3"]))
        memory = draw(st.sampled_from(["256Mi", "1Gi", "4Gi", "8Gi"]))
        objects.append(pod(f"p-{index}", cpu, memory, labels=labels, **spec))
    return objects


PROPERTY_TYPES = [
    instance_type("general", 16, 64, price=1.60), instance_type("compute", 16, 32, price=0.80),
    instance_type("memory", 4, 64, price=0.70), instance_type("small", 2, 4, price=0.12),
    instance_type("arm", 8, 16, price=0.30, arch="arm64"),
    instance_type("zonal", 8, 32, price=0.35, zones=ZONES[:1]),
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches())
def test_property_random_batches_stay_valid_and_never_cost_more(objects: list[dict[str, Any]]) -> None:
    before, after, context = scheduled(objects, PROPERTY_TYPES)
    assert_valid(before, after, context)
    movable_keys = {p.key for c in after.claims if c not in before for p in c.pods}
    assert all(plain_pod(p) for c in before for p in c.pods if p.key in movable_keys)
