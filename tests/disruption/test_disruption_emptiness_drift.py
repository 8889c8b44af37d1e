"""Emptiness and drift through ``decide``, and the order in which methods act."""

from __future__ import annotations

import copy
from datetime import timedelta

from disruption_factories import LARGE, MEDIUM, NOW, SMALL, cluster, node_of, nodepool, pod, run_decide, why

from reconciler.provisioning.drift_hashes import nodeclass_hash_annotations, nodepool_hash_annotations


def test_empty_nodes_are_deleted_together_within_the_budget() -> None:
    state = cluster(
        nodepool(budgets=[{"nodes": "2"}]),
        node_of("e1", SMALL),
        node_of("e2", LARGE),
        node_of("e3", MEDIUM),
        node_of("busy", MEDIUM),
        pod("a", node="busy", cpu="3"),
        pod("ds", node="e1", owner="DaemonSet"),  # DaemonSet pods don't make a node busy
    )
    decision = run_decide(state)
    command = decision.command
    assert command is not None and (command.reason, command.method, command.action) == (
        "Empty",
        "emptiness",
        "delete",
    )
    assert command.node_names == ["e2", "e3"]  # most expensive first, two allowed
    assert decision.budget_constrained and why(decision, "e1").startswith("Budget")
    assert command.savings_per_hour == 0.3


def test_emptiness_waits_for_consolidate_after_and_respects_never() -> None:
    waiting = cluster(
        nodepool(consolidate_after="1m"), node_of("e1", SMALL, last_pod_event=NOW - timedelta(seconds=30))
    )
    decision = run_decide(waiting)
    assert decision.command is None and "30s left" in why(decision, "e1")
    assert run_decide(waiting, now=NOW + timedelta(seconds=31)).command is not None
    never = cluster(nodepool(consolidate_after="Never"), node_of("e1", SMALL))
    assert why(run_decide(never), "e1").startswith("ConsolidationDisabled")


def test_emptiness_applies_to_when_empty_pools() -> None:
    state = cluster(nodepool(policy="WhenEmpty"), node_of("e1", SMALL))
    command = run_decide(state).command
    assert command is not None and command.reason == "Empty"


def test_do_not_disrupt_daemonset_pod_still_protects_an_empty_node() -> None:
    state = cluster(
        nodepool(),
        node_of("e1", SMALL),
        pod("ds", node="e1", owner="DaemonSet", annotations={"karpenter.sh/do-not-disrupt": "true"}),
    )
    decision = run_decide(state)
    assert decision.command is None and why(decision, "e1").startswith("DoNotDisrupt")


def drifted_cluster(*extra: object, budgets: list | None = None, tgp: str | None = None) -> object:
    old = nodepool(labels={"team": "a"})
    new = nodepool(labels={"team": "b"}, budgets=budgets, termination_grace_period=tgp)
    stamp = nodepool_hash_annotations(old)
    return cluster(
        new,
        node_of("old-busy", MEDIUM, claim_annotations=stamp, created=NOW - timedelta(days=2)),
        node_of("old-empty", MEDIUM, claim_annotations=stamp, created=NOW - timedelta(days=1)),
        pod("a", node="old-busy", cpu="1"),
        *extra,
    )


def test_drift_replaces_one_node_per_pass_empty_first() -> None:
    state = drifted_cluster(budgets=[{"nodes": "100%"}], tgp=None)
    # Emptiness first: "old-empty" is empty and consolidatable, so it goes as Empty, not Drifted.
    first = run_decide(state)
    assert first.command is not None and first.command.reason == "Empty"
    quiet = drifted_cluster(budgets=[{"nodes": "100%", "reasons": ["Drifted"]}, {"nodes": "0", "reasons": ["Empty"]}])
    command = run_decide(quiet).command
    assert command is not None and (command.reason, command.method) == ("Drifted", "drift")
    assert command.node_names == ["old-empty"] and command.action == "delete"


def test_drift_replacement_has_no_price_check() -> None:
    state = drifted_cluster(budgets=[{"nodes": "100%", "reasons": ["Drifted"]}, {"nodes": "0", "reasons": ["Empty"]}])
    state.remove({"kind": "Node", "metadata": {"name": "old-empty"}})
    state.remove({"kind": "NodeClaim", "metadata": {"name": "old-empty-claim"}})
    decision = run_decide(state)
    command = decision.command
    assert command is not None and command.reason == "Drifted" and command.node_names == ["old-busy"]
    assert command.action == "replace" and command.replacements[0].pods == ("default/a",)
    labels = command.replacements[0].manifest["metadata"]["labels"]
    assert labels["team"] == "b"  # the replacement follows the current template


def test_drift_budget_and_explanation() -> None:
    state = drifted_cluster(budgets=[{"nodes": "0"}])
    decision = run_decide(state)
    assert decision.command is None
    text = why(decision, "old-busy")
    assert "Budget: drifted (NodePool default template changed" in text and "allows 0 Drifted" in text


def test_drift_ignores_do_not_disrupt_only_with_termination_grace_period() -> None:
    protected = pod("p", node="old-busy", annotations={"karpenter.sh/do-not-disrupt": "true"})
    budgets = [{"nodes": "100%", "reasons": ["Drifted"]}, {"nodes": "0", "reasons": ["Empty"]}]
    blocked = drifted_cluster(protected, budgets=budgets)
    blocked.remove({"kind": "NodeClaim", "metadata": {"name": "old-empty-claim"}})
    blocked.remove({"kind": "Node", "metadata": {"name": "old-empty"}})
    decision = run_decide(blocked)
    assert decision.command is None and "do-not-disrupt" in why(decision, "old-busy")
    bounded = copy.deepcopy(drifted_cluster(protected, budgets=budgets, tgp="1h"))
    bounded.remove({"kind": "NodeClaim", "metadata": {"name": "old-empty-claim"}})
    bounded.remove({"kind": "Node", "metadata": {"name": "old-empty"}})
    # The NodeClaims were stamped before TGP was set; give the claim its TGP (it is copied at launch).
    claim = bounded.nodeclaim_manifests["old-busy-claim"]
    claim["spec"]["terminationGracePeriod"] = "1h"
    bounded.upsert(claim)
    command = run_decide(bounded).command
    assert command is not None and command.reason == "Drifted"
    assert command.replacements[0].pods == ("default/a",)  # the protected pod is not planned for


def test_requirement_drift_and_nodeclass_drift() -> None:
    pool = nodepool(requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}])
    pool["spec"]["disruption"]["budgets"] = [{"nodes": "100%"}]
    state = cluster(pool, node_of("n1", MEDIUM, claim_annotations=nodepool_hash_annotations(pool)), pod("a", node="n1"))
    command = run_decide(state).command
    assert command is not None and command.reason == "Drifted"
    assert "RequirementsDrifted" not in command.describe()  # describe is about the action
    nodeclass = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {"role": "A", "amiSelectorTerms": [{"alias": "al2023@latest"}]},
    }
    stamped = {**nodepool_hash_annotations(nodepool()), **nodeclass_hash_annotations(nodeclass)}
    changed = copy.deepcopy(nodeclass)
    changed["spec"]["role"] = "B"
    drifted = cluster(
        nodepool(budgets=[{"nodes": "100%"}]),
        changed,
        node_of("n1", MEDIUM, claim_annotations=stamped),
        pod("a", node="n1"),
    )
    assert run_decide(drifted).command.reason == "Drifted"
    current = cluster(
        nodepool(budgets=[{"nodes": "100%"}]),
        nodeclass,
        node_of("n1", MEDIUM, claim_annotations=stamped),
        pod("a", node="n1", cpu="3"),
    )
    assert run_decide(current).command is None


def test_emptiness_acts_before_consolidation_and_others_are_told_why() -> None:
    state = cluster(
        nodepool(budgets=[{"nodes": "100%"}]),
        node_of("empty", SMALL),
        node_of("big", LARGE),
        pod("a", node="big", cpu="1"),
    )
    decision = run_decide(state)
    assert decision.command is not None and decision.command.node_names == ["empty"]
    assert why(decision, "big").startswith("NotEvaluated: emptiness acted this pass")


def test_a_drift_replacement_fits_the_pools_limits_beside_the_node_it_replaces() -> None:
    """The drifted node runs until its replacement is up and it is drained, so both count against the
    NodePool's limits ("limits.nodes constrains the maximum number of nodes during ... drift replacement"):
    Karpenter lets the replacement take the candidate's room and overshoots for as long as the drain lasts
    (for ever under a PDB that blocks it); Adze replaces only within the limits, and says why it cannot."""
    def at_limit(cpu: str) -> object:
        old = nodepool(labels={"team": "a"})
        new = nodepool(labels={"team": "b"}, budgets=[{"nodes": "100%"}])
        new["spec"]["limits"] = {"cpu": cpu}
        return cluster(new, node_of("old", MEDIUM, claim_annotations=nodepool_hash_annotations(old)),
                       pod("a", node="old", cpu="1"))

    blocked = run_decide(at_limit("4"))
    assert blocked.command is None
    assert "cpu limit 4: existing nodes use 4, 0 left" in why(blocked, "old")
    room = run_decide(at_limit("6")).command  # 4 CPU of the drifted node + a 2-CPU replacement
    assert room is not None and room.reason == "Drifted" and room.action == "replace"
    assert [list(r.instance_type_options) for r in room.replacements] == [["small"]]
