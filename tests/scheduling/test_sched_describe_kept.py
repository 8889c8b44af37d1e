"""A topology group's description is kept until its counts change, and always reads as one rendered afresh.

Refusals by spread and affinity rules name the group's counts (``TopologyGroup.describe``); a disruption
simulation asks hundreds of nodes for a pod with hostname anti-affinity, and every refusal used to sort the
group's domains (one per node) again. The text is now kept per group until ``register``, ``record`` or a
recount changes what it shows, and the first 25 names until a name comes or goes. These properties compare it
with a description rendered by a copy that kept nothing, after random changes, and whole scheduling runs'
explanations with and without the kept text.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sched_factories import NOW, catalog, node, nodepool, pod, required_anti_affinity, spread

from reconciler.model import labels as wk
from reconciler.model.selectors import LabelSelector
from reconciler.scheduling import Scheduler, SchedulingContext
from reconciler.scheduling.topology_group import ANTI_AFFINITY, SPREAD, TopologyGroup
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState

ZONES = ("test-zone-1", "test-zone-2", "test-zone-3")
DOMAINS = [f"node-{i:02d}" for i in range(40)]  # more than the 25 a description lists


def fresh(group: TopologyGroup) -> str:
    """The group's description from a copy that has kept nothing."""
    copy = TopologyGroup(group.kind, group.key, group.namespaces, group.selector, group.max_skew, group.min_domains,
                         group.node_filter, domains=dict(group.domains))
    return copy.render()


def changes() -> st.SearchStrategy[list[tuple[str, list[str]]]]:
    step = st.tuples(st.sampled_from(["register", "record", "describe", "render"]),
                     st.lists(st.sampled_from(DOMAINS), max_size=3))
    return st.lists(step, max_size=60)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([SPREAD, ANTI_AFFINITY]), changes())
def test_the_kept_description_equals_a_fresh_one_after_any_change(kind: str, steps: list) -> None:
    selector = LabelSelector.from_manifest({"matchLabels": {"a": "b"}})
    group = TopologyGroup(kind, wk.HOSTNAME, frozenset({"default"}), selector)
    for action, domains in steps:
        if action == "register":
            for domain in domains:
                group.register(domain)
        elif action == "record":
            group.record(domains)
        elif action == "render":
            assert group.render() == fresh(group)
        assert group.describe() == fresh(group)


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], set[str], set[str]]:
    objects: list[dict[str, Any]] = [nodepool()]
    node_names = [f"n{i}" for i in range(draw(st.integers(1, 8)))]
    bound: list[str] = []
    rules = st.sampled_from(["none", "host-anti", "zone-anti", "host-spread", "zone-spread"])

    def spec_of(rule: str, app: str) -> dict[str, Any]:
        if rule.endswith("anti"):
            key = wk.HOSTNAME if rule.startswith("host") else wk.ZONE
            return {"affinity": required_anti_affinity(key, {"app": app})}
        if rule.endswith("spread"):
            key = wk.HOSTNAME if rule.startswith("host") else wk.ZONE
            return {"topologySpreadConstraints": [spread(key, labels={"app": app})]}
        return {}

    for name in node_names:
        objects.append(node(name, zone=draw(st.sampled_from(ZONES)), cpu=draw(st.sampled_from(["2", "8"])),
                            memory="16Gi"))
        for j in range(draw(st.integers(0, 3))):
            app = draw(st.sampled_from(["a", "b"]))
            objects.append(pod(f"{name}-p{j}", "500m", labels={"app": app}, node_name=name,
                               **spec_of(draw(rules), app)))
            bound.append(f"default/{name}-p{j}")
    for j in range(draw(st.integers(0, 6))):
        app = draw(st.sampled_from(["a", "b"]))
        objects.append(pod(f"pending-{j}", draw(st.sampled_from(["500m", "1500m"])), labels={"app": app},
                           **spec_of(draw(rules), app)))
    excluded = set(draw(st.lists(st.sampled_from(node_names), max_size=3)))
    moving = {key for key in bound if key.split("/")[1].split("-")[0] in excluded}
    return objects, excluded, moving


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_runs_explain_pods_as_with_descriptions_rendered_afresh(case: tuple[list[dict[str, Any]], set, set]) -> None:
    objects, excluded, moving = case
    state = ClusterState.from_manifests(objects)
    pods = [*state.pending_pods(), *(p for p in state.bound_pods() if p.key in moving)]

    def run() -> tuple:
        context = SchedulingContext.build(state, {name: catalog() for name in state.nodepools}, Settings())
        result = Scheduler(context, NOW, exclude_nodes=excluded, scheduling_pods=moving).solve(pods)
        claims = [(c.nodepool.name, c.pod_keys, c.instance_type_names) for c in result.new_claims]
        return dict(result.existing), claims, dict(result.errors)

    kept = run()
    with mock.patch.object(TopologyGroup, "describe", fresh):
        afresh = run()
    assert kept == afresh
