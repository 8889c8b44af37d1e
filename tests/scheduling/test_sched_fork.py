"""A run's topology forked from the snapshot's equals one built from scratch without the excluded nodes and pods.

Disruption simulates many "what if these nodes went away" runs against one
snapshot; each forks the snapshot topology (copying running pods' anti-affinity
groups and subtracting the pods that move) instead of recounting every pod.
These properties compare the fork with the from-scratch build, group by group
and through whole scheduling runs.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sched_factories import NOW, catalog, node, nodepool, pod

from reconciler.model import labels as wk
from reconciler.scheduling import Scheduler, SchedulingContext
from reconciler.scheduling.topology import Topology
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState

ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")
TAINT = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
TOLERATE = [{"key": "dedicated", "operator": "Exists"}]


def anti(app: str, key: str) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


@st.composite
def snapshots(draw: st.DrawFn) -> tuple[list[dict[str, Any]], set[str], set[str]]:
    objects: list[dict[str, Any]] = [
        nodepool(),
        nodepool("tainted", taints=[TAINT], requirements=[{"key": wk.ZONE, "operator": "In", "values": [ZONES[2]]}]),
    ]
    node_names = [f"n{i}" for i in range(draw(st.integers(1, 5)))]
    pod_keys: list[str] = []
    for name in node_names:
        objects.append(node(name, zone=draw(st.sampled_from(ZONES)), cpu="8", memory="16Gi"))
        for j in range(draw(st.integers(0, 3))):
            app = draw(st.sampled_from(["a", "b"]))
            spec: dict[str, Any] = {}
            rule = draw(st.sampled_from([None, "a-host", "b-host", "a-zone"]))
            if rule:
                target, key = rule.split("-")
                spec["affinity"] = anti(target, wk.HOSTNAME if key == "host" else wk.ZONE)
            if draw(st.booleans()):
                spec["tolerations"] = TOLERATE
            objects.append(pod(f"{name}-p{j}", "500m", labels={"app": app}, node_name=name, **spec))
            pod_keys.append(f"default/{name}-p{j}")
    for j in range(draw(st.integers(0, 3))):
        rule = draw(st.sampled_from([None, "a-host", "b-host"]))
        spec = {"affinity": anti(rule.split("-")[0], wk.HOSTNAME)} if rule else {}
        objects.append(pod(f"pending-{j}", "500m", labels={"app": draw(st.sampled_from(["a", "b"]))}, **spec))
    excluded = set(draw(st.lists(st.sampled_from(node_names), max_size=2)))
    moving = {key for key in pod_keys if key.split("/")[1].split("-")[0] in excluded}
    extra = set(draw(st.lists(st.sampled_from(pod_keys), max_size=2))) if pod_keys else set()
    return objects, excluded, moving | extra


def groups(topology: Topology) -> dict[tuple, tuple]:
    return {
        identity: (sorted(g.owners), dict(sorted(g.domains.items())), sorted(g.empty))
        for identity, g in topology.inverse.items()
    }


def context_of(objects: list[dict[str, Any]]) -> SchedulingContext:
    state = ClusterState.from_manifests(objects)
    return SchedulingContext.build(state, {name: catalog() for name in state.nodepools}, Settings())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_forked_groups_equal_groups_built_without_the_excluded(case: tuple[list[dict[str, Any]], set, set]) -> None:
    objects, excluded, uncounted = case
    base = context_of(objects).base_topology()
    forked = base.fork(excluded_nodes=excluded, uncounted_pods=uncounted)
    assert groups(forked) == groups(base._rebuilt(excluded, uncounted))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_runs_on_a_fork_place_pods_as_runs_built_from_scratch(case: tuple[list[dict[str, Any]], set, set]) -> None:
    objects, excluded, uncounted = case
    context = context_of(objects)
    state = context.state
    movers = [p for p in state.bound_pods() if p.key in uncounted]
    pods = [*state.pending_pods(), *movers]

    def run() -> tuple:
        scheduler = Scheduler(context, NOW, exclude_nodes=excluded, scheduling_pods=uncounted)
        result = scheduler.solve(pods)
        claims = [(c.nodepool.name, c.pod_keys, c.instance_type_names) for c in result.new_claims]
        return dict(result.existing), claims, dict(result.errors)

    forked = run()
    def from_scratch(self: Topology, *, excluded_nodes: set[str], uncounted_pods: set[str]) -> Topology:
        return self._rebuilt(excluded_nodes, uncounted_pods)

    with mock.patch.object(Topology, "fork", from_scratch):
        rebuilt = run()
    assert forked == rebuilt


def test_a_group_whose_creator_moves_is_rebuilt_with_the_next_owner_tolerations() -> None:
    # p0 (no toleration) creates the zone anti-affinity group: only untainted pools' zones are registered.
    # p1 carries the same term but tolerates the tainted pool: without p0 the group also has test-zone-3.
    rule = anti("a", wk.ZONE)
    objects = [
        nodepool(requirements=[{"key": wk.ZONE, "operator": "In", "values": list(ZONES[:2])}]),
        nodepool("tainted", taints=[TAINT], requirements=[{"key": wk.ZONE, "operator": "In", "values": [ZONES[2]]}]),
        node("n0", zone=ZONES[0]),
        node("n1", zone=ZONES[1]),
        pod("p0", labels={"app": "b"}, node_name="n0", affinity=rule),
        pod("p1", labels={"app": "b"}, node_name="n1", affinity=rule, tolerations=TOLERATE),
    ]
    base = context_of(objects).base_topology()
    [before] = base.inverse.values()
    assert ZONES[2] not in before.domains
    forked = base.fork(excluded_nodes={"n0"}, uncounted_pods={"default/p0"})
    [after] = forked.inverse.values()
    assert ZONES[2] in after.domains and groups(forked) == groups(base._rebuilt({"n0"}, {"default/p0"}))


def test_contexts_on_one_snapshot_share_the_base_and_a_change_rebuilds_it() -> None:
    rule = anti("a", wk.HOSTNAME)
    objects = [nodepool(), node("n0"), pod("p0", labels={"app": "a"}, node_name="n0", affinity=rule)]
    state = ClusterState.from_manifests(objects)
    types = {name: catalog() for name in state.nodepools}

    def base() -> Topology:
        return SchedulingContext.build(state, types, Settings()).base_topology()

    first = base()
    assert base() is first  # same nodes, pods, DaemonSets, pools and namespaces: built once
    state.upsert(pod("p1", labels={"app": "a"}, node_name="n0", affinity=rule))
    second = base()
    assert second is not first and sorted(next(iter(second.inverse.values())).owners) == ["default/p0", "default/p1"]
    state.upsert({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "labels": {"x": "y"}}})
    assert base() is not second  # namespace labels feed namespaceSelector terms
