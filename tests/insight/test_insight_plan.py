"""``plan`` scenario tests: each builds a cluster in the simulator, snapshots it, and previews a change."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from insight_support import (
    EXAMPLES,
    example_cluster,
    example_pools,
    find,
    run_cli,
    write_snapshot,
    write_yaml,
)

from reconciler.insight.plan.compute import compute_plan
from reconciler.insight.plan.render import render_markdown, render_text
from reconciler.insight.sources import ProposedConfig, load_snapshot
from reconciler.sim.catalog import build_catalog


@pytest.fixture(scope="module")
def cluster_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example cluster: general (web, api on c5 on-demand) and gpu (2 trainer pods on g5)."""
    return write_snapshot(tmp_path_factory.mktemp("cluster"), example_cluster())


def plan_json(capsys: Any, snapshot: Path, *args: str) -> dict[str, Any]:
    code, out, err = run_cli(capsys, "plan", "--snapshot", str(snapshot), *args, "--json")
    assert code == 0, err
    return json.loads(out)


def offering_price(snapshot: Path, item: dict[str, Any]) -> float:
    catalog = build_catalog(yaml.safe_load(snapshot.read_text())["catalog"])
    instance_type = next(t for t in catalog if t.name == item["instanceType"])
    return next(
        o.price
        for o in instance_type.offerings
        if o.zone == item["zone"] and o.capacity_type == item["capacityType"]
    )


def test_relabel_drifts_and_replaces_every_node_of_the_pool(capsys: Any, cluster_snapshot: Path) -> None:
    plan = plan_json(capsys, cluster_snapshot, "--nodepools", str(EXAMPLES / "relabel-general.yaml"))

    snapshot_nodes = {
        o["metadata"]["name"]: o["metadata"]["labels"]["karpenter.sh/nodepool"]
        for o in yaml.safe_load(cluster_snapshot.read_text())["objects"]
        if o["kind"] == "Node"
    }
    general = sorted(name for name, pool in snapshot_nodes.items() if pool == "general")
    assert len(general) >= 2
    assert next(c for c in plan["nodepools"] if c["name"] == "general")["change"] == "changed"
    assert sorted(d["node"] for d in plan["drift"]) == general
    assert {d["driftReason"] for d in plan["drift"]} == {"NodePoolDrifted"}
    for drifted in plan["drift"]:
        (replacement,) = drifted["replacements"]
        assert replacement["instanceType"] and replacement["price"] > 0
        # Every cost figure is a simulated offering's price.
        assert replacement["price"] == offering_price(cluster_snapshot, replacement)
    assert plan["churn"]["nodesDisrupted"] == len(general)
    assert plan["churn"]["podsEvicted"] >= 10  # web x6 + api x4 moved
    assert plan["unschedulable"] == {"new": {}, "stillPending": {}}
    # The GPU pool is untouched; same shapes, so the cost is unchanged.
    assert plan["proposed"]["deltaPerHour"] == pytest.approx(0.0)
    assert plan["proposed"]["nodes"] == plan["current"]["nodes"]


def test_business_hours_budget_delays_drift_until_the_window_closes(
    capsys: Any, cluster_snapshot: Path
) -> None:
    # Snapshot clock: Monday 2026-01-05 10:00 UTC, inside the 09:00-17:00 no-drift window.
    plan = plan_json(capsys, cluster_snapshot, "--nodepools", str(EXAMPLES / "relabel-business-hours.yaml"))

    assert plan["drift"], "the relabel drifts the general nodes"
    # The window closes at 17:00; the default 10% budget then lets one of the two nodes disrupt at a time, so
    # the second starts when the first is drained: launch to initialized (90 s) + the pods' grace (30 s).
    assert [d["at"] for d in plan["drift"]] == ["2026-01-05T17:00:00Z", "2026-01-05T17:02:00Z"]
    assert [d["replacementsReadyAt"] for d in plan["drift"]] == ["2026-01-05T17:01:30Z", "2026-01-05T17:03:30Z"]
    assert [d["drainedAt"] for d in plan["drift"]] == ["2026-01-05T17:02:00Z", "2026-01-05T17:04:00Z"]
    assert plan["proposed"]["settledAt"] == "2026-01-05T17:04:00Z"
    assert plan["proposed"]["durationSeconds"] == 7 * 3600 + 240
    budget = [b for b in plan["blockers"] if b["code"] == "Budget"]
    assert sorted(b["node"] for b in budget) == sorted(d["node"] for d in plan["drift"])
    for blocker in budget:
        assert blocker["firstSeen"] == "2026-01-05T10:00:00Z"
        assert blocker["clearedAt"] == "2026-01-05T17:00:00Z"
        assert 'schedule "0 9 * * mon-fri" for 8h' in blocker["message"]
        assert "allows 0 Drifted disruptions" in blocker["message"]


def test_after_business_hours_the_same_change_drifts_at_once(capsys: Any, cluster_snapshot: Path) -> None:
    plan = plan_json(
        capsys,
        cluster_snapshot,
        "--nodepools",
        str(EXAMPLES / "relabel-business-hours.yaml"),
        "--clock",
        "2026-01-05T18:00:00Z",
    )
    assert [d["at"] for d in plan["drift"]] == ["2026-01-05T18:00:00Z", "2026-01-05T18:02:00Z"]
    assert not [b for b in plan["blockers"] if b["code"] == "Budget"]


def test_removing_the_gpu_pool_strands_the_gpu_pods(capsys: Any, cluster_snapshot: Path) -> None:
    given = ("plan", "--snapshot", str(cluster_snapshot), "--nodepools", str(EXAMPLES / "drop-gpu.yaml"))
    code, out, _ = run_cli(capsys, *given, "--json")  # merged over the cluster's: gpu stays
    assert {c["name"]: c["change"] for c in json.loads(out)["nodepools"]} == {"general": "unchanged",
                                                                            "gpu": "unchanged"}
    code, out, _ = run_cli(capsys, *given, "--replace-all", "--json")  # the given set is complete
    assert {c["name"]: c["change"] for c in json.loads(out)["nodepools"]}["gpu"] == "removed"
    args = (*given, "--remove", "gpu")
    code, out, err = run_cli(capsys, *args, "--json")
    assert code == 0, err
    plan = json.loads(out)

    assert {c["name"]: c["change"] for c in plan["nodepools"]} == {"general": "unchanged", "gpu": "removed"}
    stranded = plan["unschedulable"]["new"]
    # The two trainer pods are evicted with their nodes; the Deployment's replacements find no GPU node.
    assert len(stranded) == 2 and all(key.startswith("ml/trainer-") for key in stranded)
    assert plan["evictionsByWorkload"] == [{"namespace": "ml", "workload": "Deployment/trainer", "evicted": 2,
                                            "evictions": 2, "replicas": 2, "pdbs": []}]
    for reason in stranded.values():
        assert "NodePool general" in reason
        assert "nvidia.com/gpu 1" in reason  # the resource the pod needs, with its amount
    assert sorted(plan["removedNodes"]) == sorted(
        o["metadata"]["name"]
        for o in yaml.safe_load(cluster_snapshot.read_text())["objects"]
        if o["kind"] == "Node" and o["metadata"]["labels"]["karpenter.sh/nodepool"] == "gpu"
    )
    assert plan["proposed"]["deltaPerHour"] < -2.0  # two g5.xlarge on-demand gone
    assert sorted(plan["floorUnschedulable"]) == ["ml/trainer-0", "ml/trainer-1"]

    code, out, err = run_cli(capsys, *args, "--fail-on-pending")
    assert code == 3
    assert "ml/Deployment/trainer x2" in out and "2 pod(s) would be left unschedulable" in err


def test_consolidation_blocked_by_a_pdb_names_the_pdb(capsys: Any, tmp_path: Path) -> None:
    document = example_cluster()
    find(document, "NodePool", "general")["spec"]["disruption"]["consolidateAfter"] = "Never"
    web = find(document, "Deployment", "web")
    scaled_down = json.loads(json.dumps(web))
    scaled_down["spec"]["replicas"] = 1
    document["steps"] = [{"provision": {}}, {"apply": [scaled_down]}]
    unprotected = write_snapshot(tmp_path, document, "unprotected.yaml")
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "api-pdb", "namespace": "default"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "api"}}},
    }
    document["objects"].append(pdb)
    protected = write_snapshot(tmp_path, document, "protected.yaml")
    # The change: turn consolidation on for `general` (consolidateAfter Never -> 5m).
    proposal = write_yaml(tmp_path, "consolidate.yaml", example_pools())

    free = plan_json(capsys, unprotected, "--nodepools", str(proposal))
    assert free["consolidation"], "without the PDB the underutilized general nodes are consolidated"
    assert free["proposed"]["deltaPerHour"] < 0

    blocked = plan_json(capsys, protected, "--nodepools", str(proposal))
    pdb_blockers = [b for b in blocked["blockers"] if b["code"] == "PDB"]
    assert pdb_blockers
    for blocker in pdb_blockers:
        assert "PDB default/api-pdb allows 0 disruptions" in blocker["message"]
        assert blocker["clearedAt"] is None
    blocked_nodes = {b["node"] for b in pdb_blockers}
    moved = {node for move in blocked["consolidation"] for node in move["nodes"]}
    assert not blocked_nodes & moved
    assert blocked["proposed"]["costPerHour"] > free["proposed"]["costPerHour"]


def test_plan_is_deterministic_and_renders_every_format(capsys: Any, cluster_snapshot: Path) -> None:
    args = ("--nodepools", str(EXAMPLES / "relabel-business-hours.yaml"))
    first = plan_json(capsys, cluster_snapshot, *args)
    second = plan_json(capsys, cluster_snapshot, *args)
    assert first == second

    code, markdown, _ = run_cli(capsys, "plan", "--snapshot", str(cluster_snapshot), *args, "--markdown")
    assert code == 0
    verdict_line, _, heading = markdown.split("\n")[:3]
    assert verdict_line == (":warning: **REVIEW**: 2 node(s) replaced, 0 removed, 2 added, 10 pod(s) evicted; "
                            "no pod left unschedulable")
    assert heading == "### Adze NodePool plan"
    assert "| now |" in markdown and "<details><summary>Drifted nodes, in replacement order (2)</summary>" in markdown
    assert "Budget" in markdown
    # Risks, then the money, then the collapsed tables.
    assert markdown.index("- evicted: default/") < markdown.index("**Cost:**") < markdown.index("<details>")

    code, text, _ = run_cli(capsys, "plan", "--snapshot", str(cluster_snapshot), *args)
    assert code == 0
    assert "settled after the change" in text and "settles after 7h4m (at 2026-01-05T17:04:00Z)" in text
    assert text.startswith("REVIEW: ")
    plan = first
    now, settled = plan["current"]["costPerHour"], plan["proposed"]["costPerHour"]
    assert f"cost: now ${now:,.4f}/h (${now * 730:,.2f}/month) → settled ${settled:,.4f}/h" in text
    assert plan["proposed"]["deltaPerHour"] == pytest.approx(settled - now)


def test_plan_still_changing_at_the_horizon_exits_4_and_says_so_first(capsys: Any, cluster_snapshot: Path) -> None:
    args = ("plan", "--snapshot", str(cluster_snapshot), "--nodepools", str(EXAMPLES / "relabel-business-hours.yaml"),
            "--horizon", "1h")
    code, text, err = run_cli(capsys, *args)
    assert code == 4
    assert text.startswith("BLOCKED: still changing when the --horizon was reached")
    assert err.strip().endswith("the cluster does not settle within it (waiting budgets or blocked drift; see the "
                                "blockers)")
    code, markdown, _ = run_cli(capsys, *args, "--markdown")
    assert code == 4 and markdown.startswith(":no_entry: **BLOCKED**: still changing")
    # Never "settled" when the horizon cut it short.
    assert "**Cost:** now $2.4370/h ($1,779.01/month) → at the horizon, still changing $2.4370/h" in markdown
    assert "settled" not in markdown.split("<details>")[0]


def test_plan_from_a_pulumi_stack_file(capsys: Any, cluster_snapshot: Path, tmp_path: Path) -> None:
    pools = example_pools()
    entries = [
        {"name": p["metadata"]["name"], **p["spec"]} for p in pools if p["metadata"]["name"] == "general"
    ]
    entries[0]["template"]["metadata"] = {"labels": {"team": "platform"}}
    stack = {
        "config": {
            "aws:region": "us-east-1",
            "adze:clusterName": "plan-example",
            "adze:deployerRoleArn": {"secure": "v1:abcdef"},
            "adze:nodeClasses": [{"name": "default", "amiSelectorTerms": [{"alias": "al2023@latest"}]}],
            "adze:nodePools": entries,
        }
    }
    path = tmp_path / "Pulumi.preview.yaml"
    path.write_text(yaml.safe_dump(stack))
    plan = plan_json(capsys, cluster_snapshot, "--stack", str(path))
    assert {c["name"]: c["change"] for c in plan["nodepools"]} == {"general": "changed", "gpu": "removed"}
    assert plan["drift"] and plan["unschedulable"]["new"]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": {"name": "general"},
                "spec": {"template": {"spec": {"requirements": []}}},
            },
            "NodePool general: spec.template.spec.nodeClassRef",
        ),
        (
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},
            "only karpenter.sh/v1 NodePool, karpenter.k8s.aws/v1 EC2NodeClass and karpenter.sh/v1alpha1 NodeOverlay",
        ),
    ],
)
def test_invalid_nodepools_exit_2_with_one_line(
    capsys: Any, cluster_snapshot: Path, tmp_path: Path, content: dict[str, Any], expected: str
) -> None:
    path = write_yaml(tmp_path, "bad.yaml", [content])
    code, out, err = run_cli(capsys, "plan", "--snapshot", str(cluster_snapshot), "--nodepools", str(path))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and expected in err and str(path) in err


def test_invalid_stack_config_names_the_config_path(
    capsys: Any, cluster_snapshot: Path, tmp_path: Path
) -> None:
    stack = {"config": {"adze:clusterName": "x", "adze:nodePools": [{"name": "general", "weight": "heavy"}]}}
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(yaml.safe_dump(stack))
    code, _, err = run_cli(capsys, "plan", "--snapshot", str(cluster_snapshot), "--stack", str(path))
    assert code == 2
    assert err.startswith(f"error: {path}: adze:nodePools[0]") and err.count("\n") == 1


def test_missing_snapshot_file_is_a_clean_error(capsys: Any, tmp_path: Path) -> None:
    code, _, err = run_cli(
        capsys,
        "plan",
        "--snapshot",
        str(tmp_path / "nope.yaml"),
        "--nodepools",
        str(EXAMPLES / "drop-gpu.yaml"),
    )
    assert code == 2 and "nope.yaml: cannot read" in err


def test_baseline_separates_pending_consolidation_from_the_change(capsys: Any, tmp_path: Path) -> None:
    document = example_cluster()
    web = json.loads(json.dumps(find(document, "Deployment", "web")))
    web["spec"]["replicas"] = 1
    document["steps"] = [{"provision": {}}, {"apply": [web]}]
    snapshot = write_snapshot(tmp_path, document)  # underutilized: consolidation is pending anyway
    same = write_yaml(tmp_path, "same.yaml", example_pools())

    plan = plan_json(capsys, snapshot, "--nodepools", str(same), "--baseline")
    assert {c["change"] for c in plan["nodepools"]} == {"unchanged"}
    assert plan["consolidation"], "the snapshot is not stable: consolidation acts even without a change"
    baseline = plan["baseline"]
    # An unchanged configuration settles exactly where the current one does.
    assert baseline["churn"] == plan["churn"]
    assert baseline["costPerHour"] == plan["proposed"]["costPerHour"] < plan["current"]["costPerHour"]
    assert plan_json(capsys, snapshot, "--nodepools", str(same))["baseline"] is None


def test_fresh_provision_dearer_than_the_settled_cluster_is_called_out(cluster_snapshot: Path) -> None:
    plan = asyncio.run(compute_plan(load_snapshot(cluster_snapshot), ProposedConfig(example_pools(), [], "same")))
    assert "fresh provision" in render_text(plan) and "note: a fresh provision" not in render_text(plan)
    dearer = dataclasses.replace(
        plan, floor=dataclasses.replace(plan.floor, cost_per_hour=plan.proposed.cost_per_hour + 0.25)
    )
    for rendered in (render_text(dearer), render_markdown(dearer)):
        assert "a fresh provision places every pod in one batch and costs $0.2500/h ($182.50/month) more" in rendered


def test_a_karpenter_cluster_drifts_on_a_template_change_as_after_adze_adopts_it(
        capsys: Any, cluster_snapshot: Path, tmp_path: Path) -> None:
    """NodeClaims stamped by Karpenter (hash versions v3 / v4) are re-stamped against the snapshot's own NodePools
    as Adze's controller does on taking over, so a template change drifts them and no change drifts nothing."""
    document = yaml.safe_load(cluster_snapshot.read_text())
    karpenter = {"karpenter.sh/nodepool-hash": "6821555240594823858", "karpenter.sh/nodepool-hash-version": "v3",
                 "karpenter.k8s.aws/ec2nodeclass-hash": "12693305387582539540",
                 "karpenter.k8s.aws/ec2nodeclass-hash-version": "v4"}
    claims = [o for o in document["objects"] if o["kind"] == "NodeClaim"]
    assert claims
    for claim in claims:
        claim["metadata"]["annotations"] = {**(claim["metadata"].get("annotations") or {}), **karpenter}
    snapshot = tmp_path / "karpenter-cluster.yaml"
    snapshot.write_text(yaml.safe_dump(document, sort_keys=False))

    relabeled = plan_json(capsys, snapshot, "--nodepools", str(EXAMPLES / "relabel-general.yaml"))
    general = sorted(o["metadata"]["name"] for o in document["objects"]
                     if o["kind"] == "Node" and o["metadata"]["labels"]["karpenter.sh/nodepool"] == "general")
    assert sorted(d["node"] for d in relabeled["drift"]) == general
    assert {d["driftReason"] for d in relabeled["drift"]} == {"NodePoolDrifted"}
    unchanged = plan_json(capsys, snapshot, "--nodepools", str(write_yaml(tmp_path, "same.yaml", example_pools())))
    assert unchanged["drift"] == []
