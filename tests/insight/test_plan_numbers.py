"""Numbers exact (issue 25, item 4): managed node groups in every cost, rows at the horizon labelled so, respelled
specs not reported as changes, a fresh provision that leaves pods pending not compared, limits spoken of as
usage, ``explain node`` agreeing with the engine, and no internal name in a reason."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from insight_support import EXAMPLES, example_cluster, example_pools, run_cli, write_snapshot, write_yaml

from reconciler.insight.plan.proposal import differing_paths, normalized_spec
from reconciler.scheduling.explain import explain
from reconciler.scheduling.results import Attempt

DUMP = Path(__file__).parent / "data" / "kubectl-dump-pdb-forms.yaml"


def with_managed_node_group(tmp_path: Path) -> Path:
    """The dump plus a node of an EKS managed node group (no NodeClaim, no NodePool label; EKS' capacity label)."""
    dump = yaml.safe_load(DUMP.read_text())
    node = copy.deepcopy(next(o for o in dump["items"] if o["kind"] == "Node"))
    labels = {k: v for k, v in node["metadata"]["labels"].items() if not k.startswith("karpenter")}
    labels.update({"eks.amazonaws.com/nodegroup": "system", "eks.amazonaws.com/capacityType": "ON_DEMAND",
                   "node.kubernetes.io/instance-type": "m5.large",
                   "kubernetes.io/hostname": "ip-10-0-200-1.ec2.internal"})
    node["metadata"] = {"name": "ip-10-0-200-1.ec2.internal", "uid": "uid-mng-node", "labels": labels,
                        "creationTimestamp": "2026-01-10T12:00:00Z"}
    node["spec"] = {"providerID": "aws:///us-east-1a/i-0mng000000000001"}
    dump["items"].append(node)
    path = tmp_path / "dump-mng.yaml"
    path.write_text(yaml.safe_dump(dump))
    return path


def test_a_managed_node_group_node_is_in_every_cost(tmp_path: Path, capsys: Any) -> None:
    path = with_managed_node_group(tmp_path)
    _, out, _ = run_cli(capsys, "status", "--snapshot", str(path), "--json")
    status_cost = json.loads(out)["costPerHour"]
    proposal = write_yaml(tmp_path, "same.yaml", [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                                                    "metadata": {"name": "general"},
                                                    "spec": next(o for o in yaml.safe_load(DUMP.read_text())["items"]
                                                                 if o["kind"] == "NodePool")["spec"]}])
    code, out, err = run_cli(capsys, "plan", "--snapshot", str(path), "--nodepools", str(proposal), "--json")
    assert code == 0, err
    plan = json.loads(out)
    for summary in (plan["current"], plan["proposed"]):
        assert summary["costPerHour"] == pytest.approx(sum(row["costPerHour"] for row in summary["nodeMix"]))
    assert plan["current"]["costPerHour"] == pytest.approx(status_cost)  # $0.096/h of m5.large included
    assert any(row["nodepool"] is None and row["instanceType"] == "m5.large" for row in plan["current"]["nodeMix"])


def test_rows_at_the_horizon_say_so(tmp_path: Path, capsys: Any) -> None:
    snapshot = write_snapshot(tmp_path, example_cluster())
    code, out, _ = run_cli(capsys, "plan", "--snapshot", str(snapshot), "--nodepools",
                           str(EXAMPLES / "relabel-business-hours.yaml"), "--horizon", "1h")
    assert code == 4
    assert "at horizon mix:" in out and "settled mix:" not in out
    _, markdown, _ = run_cli(capsys, "plan", "--snapshot", str(snapshot), "--nodepools",
                             str(EXAMPLES / "relabel-business-hours.yaml"), "--horizon", "1h", "--markdown")
    assert "| at horizon | " in markdown and "| settled |" not in markdown


def test_respelling_the_same_spec_is_no_change() -> None:
    [general] = [p for p in example_pools() if p["metadata"]["name"] == "general"]
    respelled = copy.deepcopy(general)
    spec = respelled["spec"]
    spec["template"]["spec"]["requirements"].reverse()
    for requirement in spec["template"]["spec"]["requirements"]:
        requirement["values"] = list(reversed(requirement["values"]))
    spec["template"]["metadata"] = {}
    assert differing_paths(normalized_spec(general), normalized_spec(respelled)) == []
    changed = copy.deepcopy(respelled)
    changed["spec"]["template"]["spec"]["requirements"][0]["values"] = ["spot"]
    assert differing_paths(normalized_spec(general), normalized_spec(changed)) == ["template.spec.requirements"]


def test_a_respelled_pool_in_a_plan_is_unchanged(tmp_path: Path, capsys: Any) -> None:
    snapshot = write_snapshot(tmp_path, example_cluster())
    [general] = [p for p in example_pools() if p["metadata"]["name"] == "general"]
    general["spec"]["template"]["spec"]["requirements"].reverse()
    general["spec"]["template"]["metadata"] = {}
    code, out, _ = run_cli(capsys, "plan", "--snapshot", str(snapshot), "--nodepools",
                           str(write_yaml(tmp_path, "respelled.yaml", [general])), "--json")
    plan = json.loads(out)
    assert {c["name"]: c["change"] for c in plan["nodepools"]}["general"] == "unchanged"
    assert plan["drift"] == [] and code == 0


def test_a_fresh_provision_that_leaves_pods_pending_is_not_compared(tmp_path: Path, capsys: Any) -> None:
    snapshot = write_snapshot(tmp_path, example_cluster())
    _, out, _ = run_cli(capsys, "plan", "--snapshot", str(snapshot), "--nodepools", str(EXAMPLES / "drop-gpu.yaml"),
                        "--remove", "gpu")
    assert "fresh provision (leaves 2 pod(s) pending: not comparable)" in out
    assert ("note: a fresh provision leaves 2 pod(s) pending, which cost nothing there: its price is not comparable "
            "with the settled cluster's.") in out


# -- explain agrees with the engine --------------------------------------------------------------------------


def zonal_prices_cluster() -> dict[str, Any]:
    """One 8-CPU node at $1.00/h running two 1-CPU pods; a 2-CPU type costs $0.90/h in the node's zone but $1.20/h
    in the other zone the NodePool allows: consolidation compares the worst case ($1.20) and refuses (NotCheaper).
    (Both pods are pinned to the big type to get there; the snapshot then drops the pins.)"""
    document = example_cluster()
    document["catalog"] = {"region": "us-east-1", "zones": ["us-east-1a", "us-east-1b"], "instanceTypes": [
        {"name": "big.2xlarge", "capacity": {"cpu": "8", "memory": "32Gi", "pods": "58"},
         "offerings": [{"capacityType": "on-demand", "zone": "us-east-1a", "price": 1.0}]},
        {"name": "small.large", "capacity": {"cpu": "4", "memory": "8Gi", "pods": "29"},
         "offerings": [{"capacityType": "on-demand", "zone": "us-east-1a", "price": 0.9},
                       {"capacityType": "on-demand", "zone": "us-east-1b", "price": 1.2}]},
    ]}
    objects = [o for o in document["objects"] if o["kind"] in ("EC2NodeClass", "NodePool")
               and o["metadata"]["name"] in ("default", "general")]
    pool = next(o for o in objects if o["kind"] == "NodePool")
    pool["spec"]["template"]["spec"]["requirements"] = [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
    pool["spec"]["disruption"] = {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"app-{i}", "namespace": "default"},
             "spec": {"nodeSelector": {"node.kubernetes.io/instance-type": "big.2xlarge"},
                      "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}
            for i in range(2)]
    document["objects"] = [*objects, *pods]
    document["steps"] = [{"provision": {}}]
    return document


def test_explain_node_never_calls_cheaper_what_the_engine_refuses_as_not_cheaper(tmp_path: Path, capsys: Any) -> None:
    snapshot = write_snapshot(tmp_path, zonal_prices_cluster())
    document = yaml.safe_load(snapshot.read_text())
    for manifest in document["objects"]:
        if manifest["kind"] == "Pod":
            manifest["spec"].pop("nodeSelector")
    snapshot.write_text(yaml.safe_dump(document))
    node = next(o["metadata"]["name"] for o in yaml.safe_load(snapshot.read_text())["objects"] if o["kind"] == "Node")
    code, out, err = run_cli(capsys, "explain", "node", node, "--snapshot", str(snapshot), "--json")
    assert code == 0, err
    reasons = json.loads(out)["reasons"]
    assert any(r.startswith("NotCheaper") for r in reasons), reasons
    [what_if] = [r for r in reasons if "replacement" in r and not r.startswith("NotCheaper")]
    assert what_if.startswith("replacement not cheaper: the pods need 1 new node(s), at best big.2xlarge at up "
                              "to $1.0000/h (the dearest offering it may launch on, which consolidation compares) vs "
                              "$1.0000/h now")
    # The cheapest offering alone ($0.90/h for small.large in us-east-1a) would have looked cheaper: never said.
    assert not any("$0.9000/h" in r for r in reasons)


def test_a_planned_claims_internal_hostname_never_reaches_a_reason() -> None:
    attempt = Attempt(templates={"default": "topology spread on kubernetes.io/hostname for pods matching app=web: "
                                            "counts {hostname-placeholder-0001: 1, hostname-placeholder-0012: 2}"})
    reason = explain(attempt, [], {})
    assert "placeholder" not in reason
    assert "counts {new node #1 of this run: 1, new node #12 of this run: 2}" in reason
