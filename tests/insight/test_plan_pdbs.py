"""``plan`` under PodDisruptionBudgets of every form, on snapshots and on a real-shaped kubectl dump.

Issue 25's first acceptance: the plan example with ``PodDisruptionBudget web {maxUnavailable: 1}`` and a
``kubectl get -A -o yaml`` dump with Deployments, ReplicaSets and PDBs (with status) both settle (exit 0),
evict within every budget (checked on each eviction by this test's own count) and end with no node billed
twice. ``data/kubectl-dump-pdb-forms.yaml`` says what the dump holds.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from insight_support import example_cluster, run_cli, write_snapshot, write_yaml

from reconciler.kube.memory import MemoryKube

DATA = Path(__file__).parent / "data"
DUMP = DATA / "kubectl-dump-pdb-forms.yaml"


def relabel(document: dict[str, Any], pool: str = "general") -> dict[str, Any]:
    """The cluster's NodePool with a new template label: every node of it drifts."""
    found = next(o for o in document["items" if "items" in document else "objects"]
                 if o["kind"] == "NodePool" and o["metadata"]["name"] == pool)
    changed = {k: copy.deepcopy(v) for k, v in found.items() if k in ("apiVersion", "kind", "spec")}
    changed["metadata"] = {"name": pool}
    changed["spec"]["template"].setdefault("metadata", {}).setdefault("labels", {})["team"] = "checkout"
    return changed


@pytest.fixture
def evictions(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str, int]]]:
    """Every eviction the simulated API server lets through, checked against the test's own reading of the
    budgets: a Deployment's or StatefulSet's expected pods are its ``spec.replicas``, healthy pods are bound,
    Ready and not terminating, and an eviction needs healthy - desired >= 1. Yields (pod, budget, margin)."""
    seen: list[tuple[str, str, int]] = []
    original = MemoryKube.evict

    async def checked(self: MemoryKube, name: str, namespace: str) -> None:
        pod = next(p for p in self.objects(_kind("Pod")) if p["metadata"]["name"] == name
                   and p["metadata"]["namespace"] == namespace)
        budgets = self.objects(_kind("PodDisruptionBudget"))
        covering = [pdb for pdb in budgets if pdb["metadata"]["namespace"] == namespace
                    and all(pod["metadata"]["labels"].get(k) == v
                            for k, v in pdb["spec"]["selector"]["matchLabels"].items())]
        running = pod["status"].get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")
        margins = [(pdb["metadata"]["name"], _margin(self, pdb, namespace)) for pdb in covering] if running else []
        await original(self, name, namespace)
        for budget, margin in margins:
            assert margin >= 1, f"evicting {namespace}/{name} took {budget} below its desired healthy pods"
            seen.append((f"{namespace}/{name}", budget, margin))

    monkeypatch.setattr(MemoryKube, "evict", checked)
    yield seen


def _kind(name: str) -> Any:
    from reconciler.kube.api import KINDS_BY_NAME

    return KINDS_BY_NAME[name]


def _margin(kube: MemoryKube, pdb: dict[str, Any], namespace: str) -> int:
    app = pdb["spec"]["selector"]["matchLabels"]["app"]
    pods = [p for p in kube.objects(_kind("Pod")) if p["metadata"]["namespace"] == namespace
            and p["metadata"].get("labels", {}).get("app") == app]
    healthy = sum(1 for p in pods if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
                  and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", [])))
    workloads = [w for kind in ("Deployment", "StatefulSet") for w in kube.objects(_kind(kind))
                 if w["metadata"]["namespace"] == namespace and w["metadata"]["name"] == app]
    observed = (pdb.get("status") or {}).get("expectedPods")  # what the cluster's controller counted
    expected = workloads[0]["spec"]["replicas"] if workloads else observed if observed is not None else len(pods)
    spec = pdb["spec"]
    if "maxUnavailable" in spec:
        value = spec["maxUnavailable"]
        unavailable = math.ceil(int(value[:-1]) * expected / 100) if isinstance(value, str) else value
        return healthy - max(0, expected - unavailable)
    value = spec["minAvailable"]
    desired = math.ceil(int(value[:-1]) * expected / 100) if isinstance(value, str) else value
    return healthy - desired


def plan(capsys: Any, snapshot: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = run_cli(capsys, "plan", "--snapshot", str(snapshot), *args, "--json")
    return code, json.loads(out) if out.strip() else {}, err


def assert_settled_without_double_billing(document: dict[str, Any], drifted: set[str]) -> None:
    assert not document["proposed"]["horizonReached"]
    assert document["stuckDrift"] == []
    assert {d["node"] for d in document["drift"]} == drifted
    # Every drifted node is gone at the end: the settled mix prices only the replacements (and the rest).
    assert document["proposed"]["nodes"] == document["current"]["nodes"] - len(drifted) + len(
        {r["nodeclaim"] for d in document["drift"] for r in d["replacements"]})


def test_the_plan_example_with_a_max_unavailable_budget_settles(
    tmp_path: Path, capsys: Any, evictions: list[tuple[str, str, int]]
) -> None:
    cluster = example_cluster()
    cluster["objects"].append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                               "metadata": {"name": "web", "namespace": "default"},
                               "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    snapshot = write_snapshot(tmp_path, cluster)
    general = {o["metadata"]["name"] for o in yaml.safe_load(snapshot.read_text())["objects"]
               if o["kind"] == "Node" and o["metadata"]["labels"]["karpenter.sh/nodepool"] == "general"}
    proposal = write_yaml(tmp_path, "relabel.yaml", [relabel(yaml.safe_load(snapshot.read_text()))])
    code, document, err = plan(capsys, snapshot, "--nodepools", str(proposal))
    assert code == 0, err
    assert_settled_without_double_billing(document, general)
    # The six web pods go one at a time (each eviction waits for the last one's replacement to be Ready).
    web = [e for e in evictions if e[1] == "web"]
    assert len(web) >= 6 and all(margin == 1 for _, _, margin in web)
    [entry] = [e for e in document["evictionsByWorkload"] if e["workload"] == "Deployment/web"]
    assert (entry["evicted"], entry["replicas"]) == (6, 6)
    assert entry["pdbs"] == [{"name": "web", "rule": "maxUnavailable 1", "disruptionsAllowed": 1, "heldUp": True}]
    assert document["proposed"]["costPerHour"] == pytest.approx(document["current"]["costPerHour"])


def test_a_kubectl_dump_with_deployments_replicasets_and_pdbs_settles(
    tmp_path: Path, capsys: Any, evictions: list[tuple[str, str, int]]
) -> None:
    dump = yaml.safe_load(DUMP.read_text())
    nodes = {o["metadata"]["name"] for o in dump["items"] if o["kind"] == "Node"}
    proposal = write_yaml(tmp_path, "relabel.yaml", [relabel(dump)])
    code, document, err = plan(capsys, DUMP, "--nodepools", str(proposal))
    assert code == 0, err
    assert_settled_without_double_billing(document, nodes)
    budgets = {budget for _, budget, _ in evictions}
    assert budgets == {"web-pdb", "api-pdb", "worker-pdb", "db-pdb"}  # every form was consulted, none broken
    by_workload = {e["workload"]: e for e in document["evictionsByWorkload"]}
    assert {name: (e["evicted"], e["replicas"]) for name, e in by_workload.items()} == {
        "Deployment/web": (6, 6), "Deployment/api": (4, 4), "Deployment/worker": (5, 5), "StatefulSet/db": (3, 3)}
    rules = {name: [(p["name"], p["rule"], p["disruptionsAllowed"]) for p in e["pdbs"]]
             for name, e in by_workload.items()}
    assert rules == {"Deployment/web": [("web-pdb", "maxUnavailable 1", 1)],
                     "Deployment/api": [("api-pdb", "maxUnavailable 25%", 1)],
                     "Deployment/worker": [("worker-pdb", "minAvailable 60%", 2)],
                     "StatefulSet/db": [("db-pdb", "minAvailable 2", 1)]}


@pytest.mark.parametrize(
    ("spec", "allowed"),
    [({"maxUnavailable": 2}, 2), ({"maxUnavailable": "50%"}, 3), ({"minAvailable": 5}, 1),
     ({"minAvailable": "80%"}, 1), ({"minAvailable": "34%"}, 3)],
)
def test_every_budget_form_paces_the_dump_and_settles(
    tmp_path: Path, capsys: Any, evictions: list[tuple[str, str, int]], spec: dict[str, Any], allowed: int
) -> None:
    dump = yaml.safe_load(DUMP.read_text())
    budget = next(o for o in dump["items"] if o["kind"] == "PodDisruptionBudget" and o["metadata"]["name"] == "web-pdb")
    budget["spec"] = {"selector": budget["spec"]["selector"], **spec}
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump(dump))
    code, document, err = plan(capsys, path, "--nodepools", str(write_yaml(tmp_path, "p.yaml", [relabel(dump)])))
    assert code == 0, err
    [entry] = [e for e in document["evictionsByWorkload"] if e["workload"] == "Deployment/web"]
    assert entry["pdbs"][0]["disruptionsAllowed"] == allowed
    assert any(budget == "web-pdb" for _, budget, _ in evictions)


def test_a_budget_that_never_allows_an_eviction_blocks_the_plan_and_says_which(tmp_path: Path, capsys: Any) -> None:
    dump = yaml.safe_load(DUMP.read_text())
    budget = next(o for o in dump["items"] if o["kind"] == "PodDisruptionBudget" and o["metadata"]["name"] == "db-pdb")
    budget["spec"] = {"selector": budget["spec"]["selector"], "maxUnavailable": 0}
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump(dump))
    code, document, _ = plan(capsys, path, "--nodepools", str(write_yaml(tmp_path, "p.yaml", [relabel(dump)])),
                             "--horizon", "2h")
    assert code == 0  # the drifted nodes holding a db pod stay; everything else settles
    stuck = {s["node"]: s for s in document["stuckDrift"]}
    assert stuck and all("PDB" in s["blockedBy"] for s in stuck.values())
    assert all("shop/db-pdb" in s["message"] for s in stuck.values())


def test_pods_without_a_controller_under_max_unavailable_are_never_evicted_and_the_plan_says_why(
    tmp_path: Path, capsys: Any
) -> None:
    """Kubernetes leaves pods without a controller out of a maxUnavailable budget's expected count: over only
    such pods it expects none and allows nothing. An integer minAvailable counts them and lets them go."""
    dump = yaml.safe_load(DUMP.read_text())
    node = next(o["metadata"]["name"] for o in dump["items"] if o["kind"] == "Node")
    for index in range(2):
        bare = copy.deepcopy(next(o for o in dump["items"] if o["kind"] == "Pod" and o["metadata"]["name"] == "db-0"))
        bare["metadata"] = {"name": f"debug-{index}", "namespace": "shop", "uid": f"uid-debug-{index}",
                            "labels": {"app": "debug"}}
        bare["spec"]["nodeName"] = node
        dump["items"].append(bare)
    dump["items"].append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                          "metadata": {"name": "debug", "namespace": "shop"},
                          "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "debug"}}}})
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump(dump))
    proposal = str(write_yaml(tmp_path, "p.yaml", [relabel(dump)]))
    code, document, _ = plan(capsys, path, "--nodepools", proposal, "--horizon", "2h")
    assert code == 0
    assert [s["node"] for s in document["stuckDrift"]] == [node]
    assert "PDB" in document["stuckDrift"][0]["blockedBy"]
    dump["items"][-1]["spec"] = {"minAvailable": 1, "selector": {"matchLabels": {"app": "debug"}}}
    path.write_text(yaml.safe_dump(dump))
    code, document, _ = plan(capsys, path, "--nodepools", proposal)
    assert code == 0 and document["stuckDrift"] == []


def test_a_dump_without_its_controllers_paces_by_the_budgets_observed_status(
    tmp_path: Path, capsys: Any, evictions: list[tuple[str, str, int]]
) -> None:
    """``kubectl get pods,pdb,...`` without Deployments and ReplicaSets: a budget's ``status.expectedPods`` (as
    the cluster's disruption controller wrote it) stands in for the missing scale, so the plan still settles
    and evicts within the budgets; the pods, nobody's in the simulation, come back under their names."""
    dump = yaml.safe_load(DUMP.read_text())
    dump["items"] = [o for o in dump["items"] if o["kind"] not in ("Deployment", "ReplicaSet", "StatefulSet")]
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump(dump))
    nodes = {o["metadata"]["name"] for o in dump["items"] if o["kind"] == "Node"}
    code, document, err = plan(capsys, path, "--nodepools", str(write_yaml(tmp_path, "p.yaml", [relabel(dump)])))
    assert code == 0, err
    assert {d["node"] for d in document["drift"]} == nodes and document["stuckDrift"] == []
    assert {budget for _, budget, _ in evictions} >= {"web-pdb", "api-pdb", "worker-pdb"}


def _with_namespace_being_deleted(dump: dict[str, Any], *, terminating: bool) -> dict[str, Any]:
    """``shop``'s Deployment ``web``, its ReplicaSets and its budget copied into namespace ``leaving``, whose pods
    are already gone: the state a dump catches while ``kubectl delete namespace leaving`` is under way."""
    dump = copy.deepcopy(dump)
    namespace = {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": "leaving", "uid": "uid-leaving", "creationTimestamp": "2026-01-10T12:00:00Z"},
                 "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
    if terminating:
        namespace["metadata"]["deletionTimestamp"] = "2026-01-12T08:00:00Z"
        namespace["status"]["phase"] = "Terminating"
    copies = []
    for manifest in dump["items"]:
        owner = ((manifest["metadata"].get("ownerReferences") or [{}])[0]).get("name")
        if manifest["metadata"].get("namespace") == "shop" and (
                (manifest["kind"], manifest["metadata"]["name"]) in (("Deployment", "web"),
                                                                     ("PodDisruptionBudget", "web-pdb"))
                or (manifest["kind"] == "ReplicaSet" and owner == "web")):
            duplicate = copy.deepcopy(manifest)
            duplicate["metadata"]["namespace"] = "leaving"
            duplicate["metadata"]["uid"] = f"leaving-{duplicate['metadata']['uid']}"
            copies.append(duplicate)
    dump["items"] += [namespace, *copies]
    return dump


@pytest.mark.parametrize("terminating", [True, False])
def test_a_namespace_being_deleted_gets_no_new_pods_so_the_plan_evicts_none_of_its(
    tmp_path: Path, capsys: Any, terminating: bool
) -> None:
    """The API server admits nothing new into a namespace that is being deleted (NamespaceLifecycle), so a
    Deployment left there by a dump taken mid-deletion never gets its pods back, and the plan must not place and
    then evict them (the real control plane's insight test caught 3 such phantom evictions). The same objects
    in a live namespace do get their pods: the control case."""
    dump = yaml.safe_load(DUMP.read_text())
    proposal = write_yaml(tmp_path, "p.yaml", [relabel(dump)])
    _, alone, _ = plan(capsys, DUMP, "--nodepools", str(proposal))
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump(_with_namespace_being_deleted(dump, terminating=terminating)))
    code, document, err = plan(capsys, path, "--nodepools", str(proposal))
    assert code == 0, err
    leaving = [e for e in document["evictionsByWorkload"] if e["namespace"] == "leaving"]
    if terminating:
        assert leaving == [], leaving
        assert document["churn"] == alone["churn"] and document["proposed"]["nodeMix"] == alone["proposed"]["nodeMix"]
    else:
        assert leaving and leaving[0]["evictions"] > 0, document["evictionsByWorkload"]
        assert document["churn"]["podsEvicted"] > alone["churn"]["podsEvicted"]
