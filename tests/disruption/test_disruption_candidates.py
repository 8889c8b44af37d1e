from __future__ import annotations

from datetime import timedelta
from typing import Any

from disruption_factories import NOW, managed_node, nodepool, pdb, pod

from reconciler.cloud.types import InstanceType, Offering
from reconciler.disruption.budgets import REASON_DRIFTED, REASON_UNDERUTILIZED
from reconciler.disruption.candidates import Catalog, budget_allowances, build_candidates
from reconciler.disruption.policy import consolidation_wait, settings_of
from reconciler.model.pdb import PdbLimits
from reconciler.model.resources import Resources
from reconciler.state.cluster import ClusterState

M5 = InstanceType(
    name="m5.large",
    capacity=Resources.of(cpu="2", memory="8Gi", pods="110"),
    offerings=(Offering("test-zone-1", "on-demand", 0.096), Offering("test-zone-1", "spot", 0.04)),
)
CATALOG = Catalog.of({"default": [M5]})


def state_of(*objects: Any) -> ClusterState:
    flat: list[dict[str, Any]] = []
    for item in objects:
        flat.extend(item if isinstance(item, list) else [item])
    return ClusterState.from_manifests(flat)


def candidates(state: ClusterState, *, eventual: bool = False) -> tuple[list[str], dict[str, str]]:
    pdbs = PdbLimits.from_manifests(state.pdbs.values(), state.pod_manifests.values())
    found, skipped = build_candidates(state, CATALOG, pdbs, NOW, eventual=eventual)
    return [c.name for c in found], {e.node: f"{e.code}: {e.message}" for e in skipped}


def test_eligible_node_with_price_and_costs() -> None:
    state = state_of(nodepool(), managed_node("n1"), pod("a", node="n1"), pod("ds", node="n1", owner="DaemonSet"))
    pdbs = PdbLimits.from_manifests([], [])
    [candidate], _ = build_candidates(state, CATALOG, pdbs, NOW)
    assert candidate.price == 0.096
    assert [p.key for p in candidate.reschedulable] == ["default/a"]  # DaemonSet pods don't move
    assert candidate.reschedule_cost == 2.0
    assert not candidate.is_empty


def test_node_level_blockers_are_explained() -> None:
    state = state_of(
        nodepool(),
        managed_node("booting", initialized=False),
        managed_node("pinned", annotations={"karpenter.sh/do-not-disrupt": "true"}),
        managed_node("orphan", pool="gone"),
        managed_node("ok"),
    )
    state.mark_for_deletion("ok-claim")
    names, why = candidates(state)
    assert names == []
    assert why["booting"].startswith("NotInitialized")
    assert why["pinned"].startswith("DoNotDisrupt")
    assert why["orphan"] == "NoNodePool: NodePool gone not found"
    assert why["ok"].startswith("Deleting")


def test_nominated_node_is_protected_until_the_nomination_ends() -> None:
    state = state_of(nodepool(), managed_node("n1"))
    state.nominate("n1", NOW + timedelta(seconds=20))
    assert candidates(state)[1]["n1"].startswith("Nominated")
    state.nominate("n1", NOW - timedelta(seconds=1))
    assert candidates(state)[0] == ["n1"]


def test_pod_blockers_name_the_pod_and_pdb() -> None:
    state = state_of(
        nodepool(),
        managed_node("n1"),
        managed_node("n2"),
        managed_node("n3"),
        pod("pinned", node="n1", annotations={"karpenter.sh/do-not-disrupt": "true"}),
        pod("web", node="n2", labels={"app": "web"}),
        pdb("web-pdb", {"app": "web"}, allowed=0),
        pod(
            "short",
            node="n3",
            annotations={"karpenter.sh/do-not-disrupt": "10m"},
            started=NOW - timedelta(hours=1),
        ),
    )
    names, why = candidates(state)
    assert names == ["n3"]  # the 10m protection has lapsed
    assert why["n1"] == 'DoNotDisrupt: pod default/pinned has annotation karpenter.sh/do-not-disrupt="true"'
    assert why["n2"] == "PDB: PDB default/web-pdb allows 0 disruptions (pod default/web)"


def test_drift_ignores_pod_blockers_only_with_a_termination_grace_period() -> None:
    state = state_of(
        nodepool(),
        managed_node("bounded", termination_grace_period="1h"),
        managed_node("unbounded"),
        pod("a", node="bounded", annotations={"karpenter.sh/do-not-disrupt": "true"}),
        pod("b", node="unbounded", annotations={"karpenter.sh/do-not-disrupt": "true"}),
    )
    assert candidates(state, eventual=True)[0] == ["bounded"]
    assert candidates(state, eventual=False)[0] == []
    pdbs = PdbLimits.from_manifests([], [])
    [bounded], _ = build_candidates(state, CATALOG, pdbs, NOW, eventual=True)
    assert bounded.reschedulable == []  # the protected pod is not planned for: it leaves at the deadline


def test_budget_counts_not_ready_and_deleting_nodes() -> None:
    state = state_of(
        nodepool(budgets=[{"nodes": "2"}]),
        managed_node("n1"),
        managed_node("n2", ready=False),
        managed_node("n3"),
        managed_node("n4"),
        managed_node("booting", initialized=False),  # not counted at all
    )
    state.mark_for_deletion("n3")
    allowance = budget_allowances(state, REASON_UNDERUTILIZED, NOW)["default"]
    assert (allowance.node_count, allowance.disrupting, allowance.remaining) == (4, 2, 0)
    assert "2 of 2" in allowance.explain()


def test_budget_percent_rounds_up_per_reason() -> None:
    state = state_of(
        nodepool(budgets=[{"nodes": "10%"}, {"nodes": "0", "reasons": ["Drifted"]}]),
        *[managed_node(f"n{i}") for i in range(3)],
    )
    assert budget_allowances(state, REASON_UNDERUTILIZED, NOW)["default"].remaining == 1
    assert budget_allowances(state, REASON_DRIFTED, NOW)["default"].remaining == 0


def test_consolidate_after_counts_from_last_pod_event_else_initialization() -> None:
    state = state_of(
        nodepool(consolidate_after="10m"),
        managed_node("busy", last_pod_event=NOW - timedelta(minutes=4)),
        managed_node("quiet", last_pod_event=NOW - timedelta(minutes=11)),
        managed_node("fresh", created=NOW - timedelta(minutes=3)),
    )
    settings = settings_of(state.nodepools["default"])
    waits = {n.name: consolidation_wait(n, settings, NOW) for n in state.state_nodes()}
    assert waits["busy"] == timedelta(minutes=6)
    assert waits["quiet"] is None
    assert waits["fresh"] == timedelta(minutes=7)
    never = settings_of(state_of(nodepool(consolidate_after="Never")).nodepools["default"])
    assert not never.enabled
