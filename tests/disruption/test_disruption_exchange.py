"""The many-to-many exchange (reconciler/disruption/exchange.py): moves only plain pods, never costlier, every pod
once, each pod fits and is allowed where it lands; checked by the benchmark's independent checker."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.consolidation import exchange_problems
from reconciler.cloud.types import InstanceType
from reconciler.disruption.exchange import ExchangeResult, exchange
from reconciler.scheduling import SchedulingContext
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState
from tests.disruption.disruption_factories import (
    LARGE,
    MEDIUM,
    SMALL,
    TYPES,
    cluster,
    instance_type,
    node_of,
    nodepool,
    pod,
)

WEB = {"app": "web"}
APART = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": WEB}, "topologyKey": "kubernetes.io/hostname"}]}}}
SPREAD = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                         "whenUnsatisfiable": "DoNotSchedule",
                                         "labelSelector": {"matchLabels": {"app": "spread"}}}]}


def constrained(name: str, node: str, cpu: str) -> dict[str, Any]:
    return pod(name, node=node, cpu=cpu, labels=WEB, extra_spec=APART)


def run(state: ClusterState, types: list[InstanceType] = TYPES) -> ExchangeResult:
    context = SchedulingContext.build(state, {"default": types}, Settings())
    result = exchange(state.state_nodes(), {t.name: t for t in context.templates})
    by_name = {t.name: t for t in types}
    prices = {n.name: min(o.price for o in by_name[n.instance_type].offerings
                          if o.zone == n.zone and o.capacity_type == n.capacity_type)
              for n in state.state_nodes()}
    assert exchange_problems(state, result, types, prices) == []
    return result


def outcome(result: ExchangeResult, name: str) -> tuple[str | None, tuple[str, ...]]:
    found = next(n for n in result.nodes if n.name == name)
    return found.new_instance_type, found.pods


def two_nodes(plain: dict[str, Any], *, b_extra: dict[str, Any] | None = None) -> ClusterState:
    """a: medium, a 1-CPU constrained pod and ``plain`` (1.5 CPU); b: medium, a 2.5-CPU constrained pod."""
    return cluster(nodepool(), node_of("a", MEDIUM), node_of("b", MEDIUM, **(b_extra or {})),
                   constrained("fixed-a", "a", "1"), constrained("fixed-b", "b", "2500m"), plain)


def test_a_move_into_free_room_shrinks_the_node_it_leaves() -> None:
    result = run(two_nodes(pod("mover", node="a", cpu="1500m")))
    assert result.moves == {"default/mover": ("a", "b")}
    assert outcome(result, "a") == ("small", ("default/fixed-a",))
    assert outcome(result, "b") == ("medium", ("default/fixed-b", "default/mover"))
    assert abs(result.cost - (SMALL.offerings[0].price + MEDIUM.offerings[0].price)) < 1e-9
    assert result.savings > 0


def test_constrained_pods_never_move() -> None:
    for extra, labels in ((APART, WEB), (SPREAD, {"app": "spread"})):
        state = two_nodes(pod("stuck", node="a", cpu="1500m", labels=labels, extra_spec=extra))
        result = run(state)
        assert result.moves == {}
        assert outcome(result, "a") == ("medium", ("default/fixed-a", "default/stuck"))


def test_a_pod_another_pods_affinity_counts_stays_but_one_only_spread_counts_moves() -> None:
    counted_by_affinity = two_nodes(pod("mover", node="a", cpu="1500m", labels=WEB))
    assert run(counted_by_affinity).moves == {}
    spread_pod = pod("spreader", node="b", cpu="100m", labels={"app": "spread"}, extra_spec=SPREAD)
    state = cluster(nodepool(), node_of("a", MEDIUM), node_of("b", MEDIUM), constrained("fixed-a", "a", "1"),
                    constrained("fixed-b", "b", "2400m"), spread_pod,
                    pod("mover", node="a", cpu="1500m", labels={"app": "spread"}))
    assert run(state).moves == {"default/mover": ("a", "b")}


def test_a_pod_never_lands_where_taints_or_its_node_selector_refuse() -> None:
    state = cluster(nodepool(), node_of("a", MEDIUM), _tainted(node_of("b", MEDIUM)),
                    constrained("fixed-a", "a", "1"), constrained("fixed-b", "b", "2500m"),
                    pod("mover", node="a", cpu="1500m"))
    assert run(state).moves == {}
    tolerant = pod("mover", node="a", cpu="1500m",
                   tolerations=[{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}])
    state = cluster(nodepool(), node_of("a", MEDIUM), _tainted(node_of("b", MEDIUM)),
                    constrained("fixed-a", "a", "1"), constrained("fixed-b", "b", "2500m"), tolerant)
    assert run(state).moves == {"default/mover": ("a", "b")}
    zonal = pod("mover", node="a", cpu="1500m", extra_spec={"nodeSelector": {"topology.kubernetes.io/zone":
                                                                                 "test-zone-1"}})
    other_zone = two_nodes(zonal, b_extra={"zone": "test-zone-2"})
    assert run(other_zone).moves == {}
    assert run(two_nodes(zonal)).moves == {"default/mover": ("a", "b")}


def test_a_moved_pods_node_affinity_keeps_the_node_it_lands_on_in_its_family() -> None:
    # b could shrink to small on its own, but the pod it takes needs family m: no gain, nothing moves.
    picky = pod("mover", node="a", cpu="1500m", extra_spec={"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m"]}]}]}}}})
    state = cluster(nodepool(), node_of("a", MEDIUM), node_of("b", MEDIUM), constrained("fixed-a", "a", "1"),
                    constrained("fixed-b", "b", "500m"), picky)
    result = run(state)
    assert outcome(result, "b") == ("small", ("default/fixed-b",))
    assert outcome(result, "a") == ("medium", ("default/fixed-a", "default/mover"))


def test_a_node_keeps_a_type_its_staying_pods_affinity_allows() -> None:
    family_m = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m"]}]}]}}}
    fussy = pod("fixed-b", node="b", cpu="500m", labels=WEB, extra_spec={"affinity": {**APART["affinity"],
                                                                                    **family_m}})
    state = cluster(nodepool(), node_of("a", MEDIUM), node_of("b", MEDIUM), constrained("fixed-a", "a", "3"), fussy)
    result = run(state)
    assert outcome(result, "b") == ("medium", ("default/fixed-b",))
    assert outcome(result, "a") == ("medium", ("default/fixed-a",))


def test_a_node_left_with_nothing_is_removed_and_nothing_cheaper_leaves_the_cluster_as_it_is() -> None:
    state = cluster(nodepool(), node_of("a", SMALL), node_of("b", MEDIUM), constrained("fixed-b", "b", "2500m"),
                    pod("mover", node="a", cpu="1"))
    result = run(state)
    assert outcome(result, "a") == (None, ())
    assert result.moves == {"default/mover": ("a", "b")}
    full = cluster(nodepool(), node_of("a", SMALL), node_of("b", SMALL), constrained("fixed-a", "a", "1900m"),
                   constrained("fixed-b", "b", "1900m"), pod("mover", node="a", cpu="100m"))
    kept = run(full)
    assert kept.moves == {} and kept.cost == kept.original_cost


def test_a_do_not_disrupt_pod_keeps_its_node_as_it_is() -> None:
    state = cluster(nodepool(), node_of("a", MEDIUM), node_of("b", MEDIUM),
                    pod("fixed-a", node="a", cpu="1", labels=WEB, extra_spec=APART,
                        annotations={"karpenter.sh/do-not-disrupt": "true"}),
                    constrained("fixed-b", "b", "2500m"), pod("mover", node="a", cpu="1500m"))
    result = run(state)
    assert result.moves == {}
    assert outcome(result, "a") == ("medium", ("default/fixed-a", "default/mover"))


def test_a_pool_with_limits_never_ends_over_its_limit_and_what_it_had() -> None:
    cheap_large = instance_type("xlarge", 8, 16, 0.11, family="x")
    types = [SMALL, MEDIUM, cheap_large]
    objects = [node_of("a", MEDIUM), node_of("b", MEDIUM), constrained("fixed-a", "a", "1"),
               constrained("fixed-b", "b", "3"), pod("mover", node="a", cpu="1500m")]
    unlimited = run(cluster(nodepool(), *objects), types)
    assert unlimited.moves == {"default/mover": ("a", "b")}  # b grows to xlarge (+0.01), a shrinks (-0.05)
    limited = nodepool()
    limited["spec"]["limits"] = {"cpu": "9"}  # 8 CPUs now; 10 after that move
    assert run(cluster(limited, *objects), types).moves == {}


def _tainted(manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    manifests[0]["spec"]["taints"] = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    return manifests


# -- a property over random small clusters -------------------------------------------------------------------------

CPUS = ("100m", "250m", "500m", "1", "1500m")
MEMORIES = ("128Mi", "512Mi", "1Gi", "2Gi")


@st.composite
def clusters(draw: st.DrawFn) -> ClusterState:
    objects: list[Any] = [nodepool()]
    count = 0
    for index in range(draw(st.integers(2, 6))):
        itype = draw(st.sampled_from([SMALL, MEDIUM, LARGE]))
        zone = draw(st.sampled_from(["test-zone-1", "test-zone-2"]))
        node = node_of(f"n{index}", itype, zone=zone)
        if draw(st.booleans()):
            _tainted(node)
        objects.append(node)
        room = {"cpu": itype.capacity.amount("cpu"), "memory": itype.capacity.amount("memory")}
        for _ in range(draw(st.integers(0, 5))):
            cpu, memory = draw(st.sampled_from(CPUS)), draw(st.sampled_from(MEMORIES))
            manifest = pod(f"p{count}", node=f"n{index}", cpu=cpu, memory=memory,
                           tolerations=[{"key": "dedicated", "operator": "Exists"}] if draw(st.booleans()) else None)
            requests = ClusterState.from_manifests([manifest]).pods[f"default/p{count}"].requests
            if requests.amount("cpu") > room["cpu"] or requests.amount("memory") > room["memory"]:
                continue
            kind = draw(st.sampled_from(["plain", "plain", "apart", "zonal", "family"]))
            spec = manifest["spec"]
            if kind == "apart":
                manifest["metadata"]["labels"] = dict(WEB)
                spec.update(APART)
            elif kind == "zonal":
                spec["nodeSelector"] = {"topology.kubernetes.io/zone": zone}
            elif kind == "family":
                spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "karpenter.k8s.aws/instance-family",
                                                                 "operator": "In",
                                                                 "values": [itype.labels[
                                                                     "karpenter.k8s.aws/instance-family"]]}]}]}}}
            if kind == "apart" and any(o.get("metadata", {}).get("labels") == WEB and
                                       o.get("spec", {}).get("nodeName") == f"n{index}" for o in objects
                                       if isinstance(o, dict)):
                continue  # at most one anti-affine pod per node
            room["cpu"] -= requests.amount("cpu")
            room["memory"] -= requests.amount("memory")
            objects.append(manifest)
            count += 1
    return cluster(*objects)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_every_pod_stays_placed_once_fits_is_allowed_and_nothing_gets_costlier(state: ClusterState) -> None:
    result = run(state)  # ``run`` asserts the independent checker finds nothing wrong
    assert result.cost <= result.original_cost + 1e-9
    constrained_keys = {key for key, p in state.pods.items() if p.anti_affinity_required}
    assert not constrained_keys & set(result.moves)
