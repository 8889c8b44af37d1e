"""A base topology updated from the previous version of the nodes equals one built from scratch (issue 14).

Each write to the cluster makes a new version of the nodes; the next scheduling run's base topology is made from
the last one by the pods and nodes that changed (``Topology.updated``), and each run's groups take their counts
from a per-base cache less the run's excluded nodes and moving pods (``BaseCounts``). These properties drive a
cluster through random changes and compare, after every change, the updated base with a from-scratch build —
group by group, in order, with the pods whose tolerations chose each group's NodePool domains — and whole
scheduling runs against both, and the cached counts with the direct count.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sched_factories import NOW, catalog, daemonset, node, nodepool, pod, spread

from reconciler.model import labels as wk
from reconciler.model.pod import Pod
from reconciler.scheduling import Scheduler, SchedulingContext
from reconciler.scheduling.existing import SlotBase
from reconciler.scheduling.podinfo import SchedulingPod
from reconciler.scheduling.topology import Topology
from reconciler.scheduling.topology_counts import BaseCounts, count_directly
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState

ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")
TAINT = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
TOLERATE = [{"key": "dedicated", "operator": "Exists"}]
NODES = ("n0", "n1", "n2", "n3", "n4")


def anti(app: str, key: str) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def bound_pod(name: str, node_name: str, app: str, rule: str | None, tolerate: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if rule:
        target, key = rule.split("-")
        spec["affinity"] = anti(target, wk.HOSTNAME if key == "host" else wk.ZONE)
    if tolerate:
        spec["tolerations"] = TOLERATE
    return pod(name, "500m", labels={"app": app}, node_name=node_name, **spec)


def shape(topology: Topology) -> tuple[Any, ...]:
    groups = [(identity, sorted(g.owners), dict(sorted(g.domains.items())), sorted(g.empty))
              for identity, g in topology.inverse.items()]
    creators = {identity: topology._creators[identity] for identity in topology.inverse}
    sources = {identity: topology._sources[identity] for identity in topology.inverse}
    return groups, creators, sources, topology._hostname_set, topology._hostnames


def from_scratch(context: SchedulingContext) -> Topology:
    base = context.base_topology()
    return Topology(domain_sources=context.domain_sources, counted_pods=base._counted, node_domains=base._nodes,
                    namespace_labels=base._namespace_labels, policy=base.policy)


RULES = st.sampled_from([None, None, "a-host", "b-host", "a-zone"])
changes = st.lists(
    st.one_of(
        st.tuples(st.just("bind"), st.sampled_from(NODES), st.sampled_from(["a", "b"]), RULES, st.booleans()),
        st.tuples(st.just("unbind"), st.integers(0, 30)),
        st.tuples(st.just("node"), st.sampled_from(NODES), st.sampled_from(ZONES), st.booleans(),
                  st.sampled_from(["", "", "-renamed"])),  # the node's hostname label: its name, or another
        st.tuples(st.just("drop"), st.sampled_from(NODES)),
        st.tuples(st.just("mark"), st.sampled_from(NODES)),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes, st.lists(st.tuples(st.sampled_from(NODES), st.sampled_from(["a", "b"]), RULES, st.booleans()),
                         max_size=8))
def test_updated_bases_equal_bases_built_from_scratch(moves: list[tuple[Any, ...]], first: list[tuple]) -> None:
    objects: list[dict[str, Any]] = [
        nodepool(),
        nodepool("tainted", taints=[TAINT], requirements=[{"key": wk.ZONE, "operator": "In", "values": [ZONES[2]]}]),
        *(node(name, zone=ZONES[i % 3], cpu="8", memory="16Gi") for i, name in enumerate(NODES)),
        *(bound_pod(f"p{i}", *spec) for i, spec in enumerate(first)),
        pod("pending-a", "500m", labels={"app": "a"}, affinity=anti("a", wk.HOSTNAME)),
        pod("pending-b", "500m", labels={"app": "b"}, topologySpreadConstraints=[spread(wk.ZONE, {"app": "b"})]),
        daemonset("agent", cpu="100m"),
    ]
    state = ClusterState.from_manifests(objects)
    types = {name: catalog() for name in state.nodepools}
    for index, move in enumerate(moves):
        kind = move[0]
        if kind == "bind":
            state.upsert(bound_pod(f"q{index}", *move[1:]))
        elif kind == "unbind":
            bound = sorted(key for key, p in state.pods.items() if p.node_name)
            if bound:
                namespace, _, name = bound[move[1] % len(bound)].partition("/")
                state.remove({"kind": "Pod", "metadata": {"name": name, "namespace": namespace}})
        elif kind == "node":
            # Not ready and unmanaged: not initialized (slot bases put such nodes last).
            state.upsert(node(move[1], zone=move[2], cpu="8", memory="16Gi", ready=move[3],
                              nodepool_name="default" if move[3] else None,
                              labels={wk.HOSTNAME: move[1] + move[4]}))
        elif kind == "drop":
            state.remove({"kind": "Node", "metadata": {"name": move[1]}})
        else:
            state.mark_for_deletion(move[1])
        context = SchedulingContext.build(state, types, Settings())
        # Slot bases (kept per StateNode, shared per version of the nodes): the active nodes, initialized ones
        # first, then by name — each node's own view, as if built afresh.
        active = [n for n in state.state_nodes() if not n.marked_for_deletion]
        expected = sorted(active, key=lambda n: (not n.initialized, n.name))
        slots = context.slot_bases()
        assert [slot.state for slot in slots] == expected
        assert [slot.room for slot in slots] == [SlotBase.of(n, context.daemon_pods).room for n in expected]
        # Built once per version of the nodes: another context on the same version shares them.
        again = SchedulingContext.build(state, types, Settings())
        assert again.slot_bases() is slots and again.base_topology() is context.base_topology()
        base = context.base_topology()
        scratch = from_scratch(context)
        assert shape(base) == shape(scratch)
        # Groups of the pods a run places take their counts from the base (updated from the previous one).
        for pending in state.pending_pods():
            owned = []
            for topology in (base, scratch):
                fork = topology.fork(excluded_nodes={NODES[index % len(NODES)]})
                sp = SchedulingPod.of(pending, fork.policy, None)
                fork.update(sp)
                owned.append([(dict(sorted(g.domains.items())), sorted(g.empty)) for g in fork.owned_groups(sp.key)])
            assert owned[0] == owned[1]
        # Whole runs: a candidate node gone and its pods moving, on the updated base and on a rebuilt one.
        excluded = {NODES[index % len(NODES)]}
        moving = {p.key for p in state.bound_pods() if p.node_name in excluded and p.is_active}
        pods = [*state.pending_pods(), *(p for p in state.bound_pods() if p.key in moving)]

        def run(topology: Topology, context: SchedulingContext = context, excluded: set[str] = excluded,
                moving: set[str] = moving, pods: list[Pod] = pods) -> tuple[Any, ...]:
            with mock.patch.object(SchedulingContext, "base_topology", lambda self: topology):
                result = Scheduler(context, NOW, exclude_nodes=excluded, scheduling_pods=moving).solve(pods)
            claims = [(c.nodepool.name, c.pod_keys, c.instance_type_names) for c in result.new_claims]
            return dict(result.existing), claims, dict(result.errors)

        assert run(base) == run(from_scratch(context))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.sampled_from(NODES), st.sampled_from(["a", "b"]), RULES, st.booleans()), max_size=12),
    st.sets(st.sampled_from(NODES), max_size=3),
    st.integers(0, 2**16),
)
def test_cached_group_counts_equal_direct_counts(bound: list[tuple], excluded: set[str], seed: int) -> None:
    objects: list[dict[str, Any]] = [
        nodepool(),
        *(node(name, zone=ZONES[i % 3], cpu="8", memory="16Gi", taints=[TAINT] if i == 4 else None)
          for i, name in enumerate(NODES)),
        *(bound_pod(f"p{i}", *spec) for i, spec in enumerate(bound)),
    ]
    state = ClusterState.from_manifests(objects)
    base = SchedulingContext.build(state, {"default": catalog()}, Settings()).base_topology()
    keys = sorted(p.key for p in state.bound_pods())
    uncounted = {key for i, key in enumerate(keys) if (seed >> i) & 1}
    owners = [
        pod("x", labels={"app": "a"}, affinity=anti("a", wk.HOSTNAME)),
        pod("y", labels={"app": "b"}, topologySpreadConstraints=[spread(wk.ZONE, {"app": "b"})]),
        pod("z", labels={"app": "a"}, topologySpreadConstraints=[spread(wk.HOSTNAME, {"app": "a"},
                                                                        nodeTaintsPolicy="Honor")]),
    ]
    for manifest in owners:
        sp = SchedulingPod.of(Pod.from_manifest(manifest), base.policy, None)
        fork = base.fork(excluded_nodes=excluded, uncounted_pods=uncounted)
        fork.update(sp)
        for group in fork.owned_groups(sp.key):
            direct = type(group)(group.kind, group.key, group.namespaces, group.selector, group.max_skew,
                                 group.min_domains, group.node_filter)
            fork._register_domains(direct, sp.pod, filter_taints=group.node_filter.taint_policy != "Ignore")
            count_directly(direct, base._nodes, base._by_namespace, excluded, uncounted)
            assert (dict(sorted(group.domains.items())), sorted(group.empty)) == \
                (dict(sorted(direct.domains.items())), sorted(direct.empty))
    assert isinstance(base._base_counts, BaseCounts)


def test_a_small_change_updates_the_previous_base_instead_of_recounting() -> None:
    names = [f"m{i}" for i in range(20)]
    objects = [nodepool(), *(node(name, cpu="8", memory="16Gi") for name in names),
               *(bound_pod(f"p-{name}", name, "a", "a-host", False) for name in names)]
    state = ClusterState.from_manifests(objects)
    types = {"default": catalog()}
    first = SchedulingContext.build(state, types, Settings()).base_topology()
    state.upsert(bound_pod("extra", "m1", "a", "a-host", False))
    with mock.patch.object(Topology, "__init__", side_effect=AssertionError("rebuilt")):
        second = SchedulingContext.build(state, types, Settings()).base_topology()
    assert second is not first and "default/extra" in next(iter(second.inverse.values())).owners
    assert "default/extra" not in next(iter(first.inverse.values())).owners  # the previous base is left as it was
    assert shape(second) == shape(from_scratch(SchedulingContext.build(state, types, Settings())))
