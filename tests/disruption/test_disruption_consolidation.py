"""Behaviour of underutilized-node consolidation (multi-node and single-node), positive and negative."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml
from disruption_factories import (
    LARGE,
    MEDIUM,
    NOW,
    SMALL,
    cluster,
    instance_type,
    node_of,
    nodepool,
    pdb,
    pod,
    run_decide,
    why,
)

from reconciler.sim.catalog import build_catalog
from reconciler.state.cluster import ClusterState

SPOT_AND_ON_DEMAND = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]}]
SPOT_ONLY = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]
ALL = [{"nodes": "100%"}]


def test_shared_consolidation_replace_scenario(shared_dir: Path) -> None:
    """shared/scenarios/consolidation-replace.yaml: m5.2xlarge with 1 CPU of pods -> c5.large, saving 0.299 $/h."""
    document = yaml.safe_load((shared_dir / "scenarios" / "consolidation-replace.yaml").read_text())
    state = ClusterState.from_manifests(document["objects"])
    decision = run_decide(state, build_catalog(document["catalog"]), now=datetime(2026, 1, 1, 9, tzinfo=UTC))
    command = decision.command
    assert command is not None
    assert (command.reason, command.method, command.action) == ("Underutilized", "single-node", "replace")
    assert command.node_names == ["ip-10-0-17-23.ec2.internal"]
    [replacement] = command.replacements
    assert replacement.instance_type_options == (
        "c5.large",
        "m5.large",
        "c5.xlarge",
        "m5.xlarge",
        "c5.2xlarge",
    )
    assert replacement.capacity_types == ("on-demand",)
    assert replacement.price == 0.085 and command.savings_per_hour == 0.299
    assert set(replacement.pods) == {"default/reports-6d4cf56db6-abcde", "default/reports-6d4cf56db6-fghij"}
    manifest = replacement.manifest
    assert manifest["kind"] == "NodeClaim" and manifest["metadata"]["labels"]["karpenter.sh/nodepool"] == "default"
    requirement = {r["key"]: r for r in manifest["spec"]["requirements"]}
    assert requirement["node.kubernetes.io/instance-type"]["values"] == sorted(replacement.instance_type_options)


def test_single_node_delete_when_pods_fit_elsewhere() -> None:
    state = cluster(
        nodepool(),
        node_of("n1", MEDIUM),
        node_of("n2", MEDIUM),
        pod("a", node="n1", cpu="1"),
        pod("b", node="n2", cpu="1"),
    )
    command = run_decide(state).command
    assert command is not None and command.action == "delete" and command.method == "single-node"
    assert len(command.candidates) == 1  # the default 10% budget of 2 nodes allows one
    assert command.placements and set(command.placements.values()) <= {"n1", "n2"}


def test_multi_node_deletes_the_largest_prefix_that_fits() -> None:
    state = cluster(
        nodepool(budgets=ALL),
        *[node_of(f"n{i}", MEDIUM) for i in range(1, 4)],
        *[pod(f"p{i}", node=f"n{i}", cpu="1") for i in range(1, 4)],
    )
    command = run_decide(state).command
    assert command is not None and command.method == "multi-node" and command.action == "delete"
    assert len(command.candidates) == 2
    assert command.savings_per_hour == 0.2


def test_replace_with_a_cheaper_node() -> None:
    state = cluster(nodepool(), node_of("big", LARGE), pod("a", node="big", cpu="1"))
    command = run_decide(state).command
    assert command is not None and command.action == "replace"
    assert command.replacements[0].instance_type_options == ("small", "medium")
    assert command.savings_per_hour == 0.15


def test_never_replaces_with_a_node_that_is_not_strictly_cheaper() -> None:
    state = cluster(nodepool(), node_of("n1", SMALL), pod("a", node="n1", cpu="1500m"))
    decision = run_decide(state)
    assert decision.command is None
    assert why(decision, "n1").startswith("NotCheaper: no replacement is cheaper than the current $0.0500/h")


def test_worst_case_zone_price_decides() -> None:
    # "medium" is cheap in one zone but dearer than the candidate in the other: not strictly cheaper.
    uneven = instance_type("medium", 4, 8, 0.10)
    uneven.offerings = (
        uneven.offerings[0].__class__("test-zone-1", "on-demand", 0.04),
        uneven.offerings[0].__class__("test-zone-2", "on-demand", 0.25),
    )
    state = cluster(nodepool(), node_of("n1", LARGE), pod("a", node="n1", cpu="3"))
    decision = run_decide(state, [uneven, LARGE])
    assert decision.command is None and why(decision, "n1").startswith("NotCheaper")


def test_does_not_violate_required_anti_affinity() -> None:
    anti = {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "web"}},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        }
    }
    state = cluster(
        nodepool(budgets=ALL),
        node_of("n1", SMALL),
        node_of("n2", SMALL),
        pod("w1", node="n1", cpu="100m", labels={"app": "web"}, extra_spec=anti),
        pod("w2", node="n2", cpu="100m", labels={"app": "web"}, extra_spec=anti),
    )
    decision = run_decide(state)
    assert decision.command is None  # deleting either would put both web pods on one host
    assert why(decision, "n1").startswith("NotCheaper")  # its pod would need a new small node: no saving


def test_blocking_pdb_prevents_consolidation() -> None:
    state = cluster(
        nodepool(),
        node_of("big", LARGE),
        pod("a", node="big", cpu="1", labels={"app": "db"}),
        pdb("db", {"app": "db"}, min_available=1),  # computed: 1 healthy pod, 1 desired -> 0 allowed
    )
    decision = run_decide(state)
    assert decision.command is None
    assert why(decision, "big") == "PDB: PDB default/db allows 0 disruptions (pod default/a)"


def test_do_not_disrupt_pod_prevents_consolidation() -> None:
    state = cluster(
        nodepool(),
        node_of("big", LARGE),
        pod("a", node="big", cpu="1", annotations={"karpenter.sh/do-not-disrupt": "true"}),
    )
    decision = run_decide(state)
    assert decision.command is None and "do-not-disrupt" in why(decision, "big")


def test_budget_zero_blocks_and_is_explained() -> None:
    state = cluster(nodepool(budgets=[{"nodes": "0"}]), node_of("big", LARGE), pod("a", node="big", cpu="1"))
    decision = run_decide(state)
    assert decision.command is None and decision.budget_constrained
    assert why(decision, "big").startswith("Budget: disruption budget of NodePool default allows 0 Underutilized")


def test_budget_is_never_exceeded_counting_nodes_already_disrupting() -> None:
    state = cluster(
        nodepool(budgets=[{"nodes": "2"}]),
        *[node_of(f"n{i}", LARGE) for i in range(4)],
        *[pod(f"p{i}", node=f"n{i}", cpu="1") for i in range(4)],
    )
    state.mark_for_deletion("n0")
    command = run_decide(state).command
    assert command is not None and len(command.candidates) == 1  # 2 allowed, 1 already disrupting
    state.mark_for_deletion("n1")
    decision = run_decide(state)
    assert decision.command is None and why(decision, "n2").startswith("Budget")


def test_scheduled_zero_budget_window() -> None:
    pool = nodepool(budgets=[{"nodes": "0", "schedule": "0 9 * * *", "duration": "8h"}, {"nodes": "1"}])
    state = cluster(pool, node_of("big", LARGE), pod("a", node="big", cpu="1"))
    inside = run_decide(state, now=datetime(2026, 1, 1, 12, tzinfo=UTC))
    assert inside.command is None and why(inside, "big").startswith("Budget")
    outside = run_decide(state, now=datetime(2026, 1, 1, 18, tzinfo=UTC))
    assert outside.command is not None


def test_never_merges_two_nodes_into_one_of_the_same_type() -> None:
    state = cluster(
        nodepool(budgets=ALL),
        node_of("n1", MEDIUM),
        node_of("n2", MEDIUM),
        pod("a", node="n1", cpu="1500m"),
        pod("b", node="n2", cpu="1500m"),
    )
    command = run_decide(state).command
    # One medium for both (0.10 < 0.20) is just "delete one medium": that is what happens instead.
    assert command is not None and command.action == "delete" and len(command.candidates) == 1


def test_on_demand_replacement_is_restricted_to_spot_when_both_are_allowed() -> None:
    state = cluster(nodepool(requirements=SPOT_AND_ON_DEMAND), node_of("big", LARGE), pod("a", node="big", cpu="1"))
    command = run_decide(state).command
    assert command is not None and command.action == "replace"
    replacement = command.replacements[0]
    assert replacement.capacity_types == ("spot",)
    values = {r["key"]: r["values"] for r in replacement.manifest["spec"]["requirements"]}
    assert values["karpenter.sh/capacity-type"] == ["spot"]
    assert command.savings_per_hour == 0.18


def test_spot_to_spot_needs_the_feature_gate() -> None:
    state = cluster(
        nodepool(requirements=SPOT_ONLY),
        node_of("big", LARGE, capacity_type="spot"),
        pod("a", node="big", cpu="1"),
    )
    decision = run_decide(state)
    assert decision.command is None and why(decision, "big").startswith("SpotToSpotDisabled")
    gated = run_decide(state, gates={"SpotToSpotConsolidation": True})
    assert gated.command is None  # only 2 cheaper spot types: the 15-type rule protects against churn
    assert why(gated, "big").startswith("SpotToSpotOptions: spot-to-spot needs 15 cheaper spot instance types, found 2")


def test_spot_to_spot_single_node_launches_the_15_cheapest() -> None:
    many = [instance_type(f"t{i:02d}", 4, 8, 0.5 + i / 100, 0.01 + i / 1000) for i in range(20)]
    biggest = instance_type("huge", 16, 64, 2.0, 0.9)
    state = cluster(
        nodepool(requirements=SPOT_ONLY),
        node_of("n1", biggest, capacity_type="spot"),
        pod("a", node="n1", cpu="1"),
    )
    command = run_decide(state, [*many, biggest], gates={"SpotToSpotConsolidation": True}).command
    assert command is not None
    assert command.replacements[0].instance_type_options == tuple(f"t{i:02d}" for i in range(15))


def test_multi_node_spot_to_spot_has_no_15_type_rule() -> None:
    state = cluster(
        nodepool(requirements=SPOT_ONLY, budgets=ALL),
        node_of("n1", LARGE, capacity_type="spot"),
        node_of("n2", LARGE, capacity_type="spot"),
        pod("a", node="n1", cpu="1"),
        pod("b", node="n2", cpu="1"),
    )
    command = run_decide(state, gates={"SpotToSpotConsolidation": True}).command
    assert command is not None and command.method == "multi-node"
    # Both nodes go and one small spot node takes both pods.
    assert command.action == "replace" and command.replacements[0].capacity_types == ("spot",)


def test_when_empty_policy_leaves_busy_nodes_alone() -> None:
    state = cluster(nodepool(policy="WhenEmpty"), node_of("big", LARGE), pod("a", node="big", cpu="1"))
    decision = run_decide(state)
    assert decision.command is None and why(decision, "big").startswith("WhenEmpty")


def test_consolidate_after_counts_from_the_last_pod_event() -> None:
    state = cluster(
        nodepool(consolidate_after="10m"),
        node_of("big", LARGE, last_pod_event=NOW - timedelta(minutes=4)),
        pod("a", node="big", cpu="1"),
    )
    decision = run_decide(state)
    assert decision.command is None
    assert why(decision, "big").startswith("ConsolidateAfter: consolidateAfter 10m (default) not yet elapsed")
    assert "6m left" in why(decision, "big")
    assert run_decide(state, now=NOW + timedelta(minutes=7)).command is not None


def test_consolidate_after_never_disables_consolidation() -> None:
    state = cluster(nodepool(consolidate_after="Never"), node_of("big", LARGE), pod("a", node="big", cpu="1"))
    decision = run_decide(state)
    assert decision.command is None and why(decision, "big").startswith("ConsolidationDisabled")


def test_busy_nodes_do_not_receive_moved_pods() -> None:
    state = cluster(
        nodepool(consolidate_after="10m"),
        node_of("idle", MEDIUM),
        node_of("busy", MEDIUM, last_pod_event=NOW - timedelta(minutes=1)),
        pod("a", node="idle", cpu="1"),
        pod("b", node="busy", cpu="1"),
    )
    command = run_decide(state).command
    # "idle" may go, but not by moving its pod onto "busy" (inside consolidateAfter): it is replaced instead.
    assert command is not None and command.node_names == ["idle"] and command.action == "replace"


def test_would_leave_a_pod_pending_is_explained() -> None:
    # Only "big" carries the label the pod selects, and the NodePool cannot create it.
    big = node_of("big", LARGE)
    big[0]["metadata"]["labels"]["example.com/disk"] = "ssd"
    pinned = pod("a", node="big", cpu="1", extra_spec={"nodeSelector": {"example.com/disk": "ssd"}})
    keep = pod("keep", node="other", annotations={"karpenter.sh/do-not-disrupt": "true"})
    state = cluster(nodepool(), big, node_of("other", LARGE), pinned, keep)
    decision = run_decide(state)
    assert decision.command is None
    assert why(decision, "big").startswith("Unschedulable: would leave pod default/a pending")


def test_pods_landing_on_an_uninitialized_node_invalidate_the_command() -> None:
    _, claim = node_of("booting", MEDIUM)
    claim["status"].pop("nodeName")
    claim["status"]["conditions"] = [c for c in claim["status"]["conditions"] if c["type"] != "Initialized"]
    claim["metadata"]["labels"].pop("karpenter.sh/initialized", None)
    state = cluster(nodepool(), node_of("big", LARGE), claim, pod("a", node="big", cpu="1"))
    decision = run_decide(state)
    assert decision.command is None
    assert "would schedule against uninitialized node booting-claim" in why(decision, "big")


def test_simulation_budget_keeps_the_best_multi_node_command_found() -> None:
    state = cluster(
        nodepool(budgets=ALL),
        *[node_of(f"n{i}", LARGE) for i in range(4)],
        *[pod(f"p{i}", node=f"n{i}", cpu="100m") for i in range(4)],
    )
    full = run_decide(state).command
    assert full is not None and len(full.candidates) == 4
    cut = run_decide(state, max_simulations=1)
    assert cut.timed_out and cut.command is not None and len(cut.command.candidates) == 3


def test_every_managed_node_gets_an_explanation() -> None:
    state = cluster(
        nodepool(),
        node_of("big", LARGE),
        node_of("tiny", SMALL),
        pod("a", node="big", cpu="1"),
        pod("b", node="tiny", cpu="1500m"),
    )
    decision = run_decide(state)
    assert decision.command is not None
    assert {e.node for e in decision.explanations} | set(decision.command.node_names) == {"big", "tiny"}


def test_deterministic_replacement_names_from_the_callers_generator() -> None:
    names = iter(["default-aaaaa", "default-bbbbb"])
    state = cluster(nodepool(), node_of("big", LARGE), pod("a", node="big", cpu="1"))
    command = run_decide(state, name_for=lambda pool: next(names)).command
    assert command is not None and command.replacements[0].name == "default-aaaaa"


def test_deadline_stops_the_search_without_acting_on_partial_results() -> None:
    state = cluster(nodepool(), node_of("big", LARGE), pod("a", node="big", cpu="1"))
    decision = run_decide(state, should_stop=lambda: True)
    assert decision.command is None and decision.timed_out
    assert why(decision, "big").startswith("NotEvaluated: the consolidation deadline passed")
    assert decision.unseen_pools == ["default"]
    empty = cluster(nodepool(), node_of("idle", LARGE))
    assert run_decide(empty, should_stop=lambda: True).command is not None  # emptiness needs no simulation
