"""No endless drift on the real catalogue: a node Adze launches for a NodePool never counts as drifted from it.

Before instance types declared DoesNotExist for labels they lack, Karpenter's own
``instance-store-ephemeral-storage.yaml`` example launched a c6a.xlarge (no NVMe),
and every later ``disrupt`` pass marked it Drifted and replaced it with the same type.
"""

from __future__ import annotations

import copy
import json
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.sim.runner import run_scenario
from reconciler.sim.scenario import parse_scenario

_DATA = resources.files("reconciler.cloud").joinpath("data")
_FACTS = json.loads(_DATA.joinpath("aws-instance-types.json").read_text())["types"]
CATALOGUE = {
    **json.loads(_DATA.joinpath("aws-us-east-1-supplement.json").read_text())["types"],
    **{name: {**_FACTS[name], **offered}
       for name, offered in json.loads(_DATA.joinpath("aws-us-east-1.json").read_text())["types"].items()},
}
AWS = "karpenter.k8s.aws/"


def _example(shared_dir: Path, name: str) -> list[dict[str, Any]]:
    path = shared_dir / "data" / "karpenter-examples" / name
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _inflate(shared_dir: Path, replicas: int) -> dict[str, Any]:
    [deployment] = _example(shared_dir, "workloads/inflate.yaml")
    deployment["spec"]["replicas"] = replicas
    return deployment


def test_instance_store_example_launches_nvme_and_settles(shared_dir: Path) -> None:
    objects = [*_example(shared_dir, "v1/instance-store-ephemeral-storage.yaml"), _inflate(shared_dir, 3)]
    scenario = {"catalog": {"preset": "aws-us-east-1"}, "objects": objects,
                "steps": [{"provision": {}}, {"advance": "10m"}, {"disrupt": {"until": "stable"}},
                          {"advance": "1h"}, {"disrupt": {}}]}

    result = run_scenario(parse_scenario(scenario))

    launched = result["steps"][0]["launched"]
    assert launched and result["final"]["pending"] == []
    for claim in launched:
        for name in claim["instanceTypeOptions"]:
            record = CATALOGUE[name]
            assert record.get("nvme", 0) > 300 and name[0] in "cmr", name
    drifted = [d for step in result["steps"] for d in step["disrupted"] if d["reason"] == "Drifted"]
    assert drifted == []
    assert {n["name"] for n in result["final"]["nodes"]} == {c["node"] for c in launched}


# Requirements a user may put on a pool; any combination, satisfiable or not.
REQUIREMENTS = [
    {"key": AWS + "instance-local-nvme", "operator": "Gt", "values": ["300"]},
    {"key": AWS + "instance-local-nvme", "operator": "Exists"},
    {"key": AWS + "instance-gpu-count", "operator": "Gt", "values": ["0"]},
    {"key": AWS + "instance-gpu-manufacturer", "operator": "In", "values": ["nvidia"]},
    {"key": AWS + "instance-accelerator-count", "operator": "Gt", "values": ["0"]},
    {"key": AWS + "instance-generation", "operator": "Gt", "values": ["5"]},
    {"key": AWS + "instance-category", "operator": "In", "values": ["c", "m", "r"]},
    {"key": AWS + "instance-hypervisor", "operator": "In", "values": ["nitro"]},
    {"key": AWS + "instance-cpu-manufacturer", "operator": "NotIn", "values": ["aws"]},
    {"key": AWS + "instance-network-bandwidth", "operator": "Gt", "values": ["10000"]},
    {"key": AWS + "instance-gpu-name", "operator": "DoesNotExist"},
    {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
    {"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": ["us-east-1a"]},
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(chosen=st.lists(st.sampled_from(range(len(REQUIREMENTS))), min_size=1, max_size=3, unique=True))
def test_nodes_launched_for_a_pool_never_drift_from_it(shared_dir: Path, chosen: list[int]) -> None:
    pool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"}, "spec": {"template": {
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": [copy.deepcopy(REQUIREMENTS[i]) for i in chosen]}}}}
    scenario = {"catalog": {"preset": "aws-us-east-1"}, "objects": [pool, _inflate(shared_dir, 2)],
                "steps": [{"provision": {}}, {"advance": "2h"}, {"disrupt": {"until": "stable"}}]}

    result = run_scenario(parse_scenario(scenario))

    drifted = [d["node"] for d in result["steps"][2]["disrupted"] if d["reason"] == "Drifted"]
    assert drifted == [], f"requirements {[REQUIREMENTS[i] for i in chosen]} launched nodes that drift"


def test_drifted_node_whose_pods_no_type_can_hold_stays_with_its_reason() -> None:
    """The pool now asks for NVMe no type has: the drifted node keeps running and says why."""
    pool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"}, "spec": {"template": {
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}}}}
    changed = copy.deepcopy(pool)
    changed["spec"]["template"]["spec"]["requirements"] = [
        {"key": AWS + "instance-local-nvme", "operator": "Gt", "values": ["10000000"]}
    ]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}
    scenario = {"catalog": {"preset": "aws-us-east-1"}, "objects": [pool, pod],
                "steps": [{"provision": {}}, {"advance": "10m"}, {"apply": [changed]},
                          {"disrupt": {"until": "stable"}}]}

    result = run_scenario(parse_scenario(scenario))

    [launched] = result["steps"][0]["launched"]
    assert result["steps"][3]["disrupted"] == []
    assert [n["name"] for n in result["final"]["nodes"]] == [launched["node"]]
    blocked = [e["message"] for e in result["steps"][3]["events"]
               if e["object"] == f"Node/{launched['node']}" and e["reason"] == "DisruptionBlocked"]
    assert any(m.startswith("Unschedulable: drifted, but would leave pod default/a pending") and
               "instance-local-nvme" in m for m in blocked), blocked
