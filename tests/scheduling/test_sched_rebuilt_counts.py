"""A run's topology rebuilt because an anti-affinity group's creator moves counts its other groups from the
snapshot's shared counts, and schedules as a topology built from scratch without the moved pods and nodes.

``Topology.fork`` rebuilds when a moving pod created a running anti-affinity group that other pods still own
(another owner could have registered other domains). Only those groups need the rebuild: the groups the run's
own pods bring are counted as a fork counts them, from the base's counts less the excluded nodes and the
uncounted pods. These properties compare whole runs, and each group the rebuilt run counted, with a build from
scratch over the shorter lists, on random clusters where creators move.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sched_factories import NOW, catalog, node, nodepool, pod, required_anti_affinity, spread

from reconciler.model import labels as wk
from reconciler.scheduling import Scheduler, SchedulingContext
from reconciler.scheduling.topology import Topology
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState

ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")
DEDICATED = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}


def rule_spec(rule: str, app: str) -> dict[str, Any]:
    if rule == "host-anti":
        return {"affinity": required_anti_affinity(wk.HOSTNAME, {"app": app})}
    if rule == "zone-anti":
        return {"affinity": required_anti_affinity(wk.ZONE, {"app": app})}
    if rule.endswith("spread"):
        key = wk.HOSTNAME if rule.startswith("host") else wk.ZONE
        return {"topologySpreadConstraints": [spread(key, labels={"app": app})]}
    return {}


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], set[str], set[str]]:
    objects: list[dict[str, Any]] = [
        nodepool(),
        nodepool("tainted", taints=[DEDICATED],
                 requirements=[{"key": wk.ZONE, "operator": "In", "values": [ZONES[2]]}]),
    ]
    node_names = [f"n{i}" for i in range(draw(st.integers(2, 7)))]
    bound: list[str] = []
    rules = st.sampled_from(["none", "host-anti", "zone-anti", "host-spread", "zone-spread"])
    for name in node_names:
        objects.append(node(name, zone=draw(st.sampled_from(ZONES)), cpu=draw(st.sampled_from(["2", "8"])),
                            memory="16Gi"))
        for j in range(draw(st.integers(0, 3))):
            app = draw(st.sampled_from(["a", "b"]))
            spec = rule_spec(draw(rules), app)
            if draw(st.booleans()):
                spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
            objects.append(pod(f"{name}-p{j}", "500m", labels={"app": app}, node_name=name, **spec))
            bound.append(f"default/{name}-p{j}")
    for j in range(draw(st.integers(0, 4))):
        app = draw(st.sampled_from(["a", "b"]))
        objects.append(pod(f"pending-{j}", "500m", labels={"app": app}, **rule_spec(draw(rules), app)))
    excluded = set(draw(st.lists(st.sampled_from(node_names), min_size=1, max_size=3)))
    moving = {key for key in bound if key.split("/")[1].split("-")[0] in excluded}
    extra = set(draw(st.lists(st.sampled_from(bound), max_size=2))) if bound else set()
    return objects, excluded, moving | extra


def from_scratch(self: Topology, *, excluded_nodes: set[str], uncounted_pods: set[str]) -> Topology:
    """What ``_rebuilt`` stands for: a topology built over the pods and nodes the run keeps, counting alone."""
    return Topology(
        domain_sources=self._domain_sources,
        counted_pods=[c for c in self._counted if c.pod.key not in uncounted_pods],
        node_domains=[n for n in self._nodes if n[0] not in excluded_nodes],
        namespace_labels=self._namespace_labels,
        policy=self.policy,
    )


def always_rebuilt(self: Topology, *, excluded_nodes: set[str], uncounted_pods: set[str]) -> Topology:
    return self._rebuilt(excluded_nodes, set(uncounted_pods))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_rebuilt_runs_schedule_and_count_as_runs_built_from_scratch(case: tuple[list[dict[str, Any]], set, set]
                                                                   ) -> None:
    objects, excluded, uncounted = case
    state = ClusterState.from_manifests(objects)
    pods = [*state.pending_pods(), *(p for p in state.bound_pods() if p.key in uncounted)]

    def run(fork: Any) -> tuple:
        # A fresh context per run: the shared counts start empty, so the rebuilt run fills them itself.
        context = SchedulingContext.build(state, {name: catalog() for name in state.nodepools}, Settings())
        with mock.patch.object(Topology, "fork", fork):
            scheduler = Scheduler(context, NOW, exclude_nodes=excluded, scheduling_pods=uncounted)
            result = scheduler.solve(pods)
        groups = {identity: (dict(sorted(g.domains.items())), sorted(g.empty))
                  for identity, g in scheduler.topology.groups.items()}
        claims = [(c.nodepool.name, c.pod_keys, c.instance_type_names) for c in result.new_claims]
        return dict(result.existing), claims, dict(result.errors), groups

    assert run(always_rebuilt) == run(from_scratch)
