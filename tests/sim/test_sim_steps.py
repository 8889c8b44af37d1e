"""Simulator steps beyond provisioning: expire, interrupt, delete, launch: pending, workloads, DaemonSets."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from reconciler.sim import workloads
from reconciler.sim.runner import run_scenario
from reconciler.sim.scenario import ScenarioError, parse_scenario

ZONES = ["z1", "z2"]


def instance_type(name: str, cpu: int, price: float) -> dict[str, Any]:
    return {
        "name": name,
        "capacity": {"cpu": str(cpu), "memory": f"{cpu * 4}Gi", "pods": "32"},
        "offerings": [
            {"capacityType": ct, "zone": z, "price": price * (0.4 if ct == "spot" else 1.0)}
            for z in ZONES
            for ct in ("on-demand", "spot")
        ],
    }


CATALOG = {
    "zones": ZONES,
    "overhead": {"cpu": "100m", "memory": "100Mi"},
    "instanceTypes": [
        instance_type("small", 2, 0.1),
        instance_type("medium", 4, 0.2),
        instance_type("large", 8, 0.4),
    ],
}


def nodepool(name: str = "default", **spec: Any) -> dict[str, Any]:
    template_spec = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
    }
    template_spec.update(spec.pop("template_spec", {}))
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"template": {"spec": template_spec}, **spec},
    }


def deployment(name: str, replicas: int, cpu: str = "1", **pod_spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}],
                    **pod_spec,
                },
            },
        },
    }


def run(objects: list[dict[str, Any]], steps: list[dict[str, Any]], **settings: Any) -> dict[str, Any]:
    document = {
        "name": "steps",
        "settings": {"clock": "2026-01-01T00:00:00Z", **settings},
        "catalog": copy.deepcopy(CATALOG),
        "objects": objects,
        "steps": steps,
    }
    return run_scenario(parse_scenario(document))


def test_expire_deletes_expired_claims_and_reprovisions_their_pods() -> None:
    result = run(
        [nodepool(template_spec={"expireAfter": "1h"}), deployment("app", 3)],
        [{"provision": {}}, {"advance": "30m"}, {"expire": {}}, {"advance": "31m"}, {"expire": {}}],
    )
    first = result["steps"][0]["launched"][0]["nodeclaim"]
    assert result["steps"][2]["disrupted"] == []
    expired = result["steps"][4]
    assert [(d["nodeclaim"], d["reason"], d["action"]) for d in expired["disrupted"]] == [
        (first, "Expired", "delete")
    ]
    (replacement,) = expired["launched"]
    assert expired["disrupted"][0]["replacements"] == [replacement["nodeclaim"]]
    (node,) = result["final"]["nodes"]
    assert node["name"] == replacement["node"] and len(node["pods"]) == 3
    assert result["final"]["pending"] == []


def test_spot_interruption_replaces_the_node_and_rebalance_is_ignored() -> None:
    pool = nodepool(
        template_spec={
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]
        }
    )
    result = run([pool, deployment("app", 2)], [{"provision": {}}])
    node = result["steps"][0]["launched"][0]["node"]
    result = run(
        [pool, deployment("app", 2)],
        [
            {"provision": {}},
            {"interrupt": {"node": node, "kind": "rebalance_recommendation"}},
            {"interrupt": {"node": node, "kind": "spot_interrupted"}},
        ],
    )
    rebalance, interrupted = result["steps"][1], result["steps"][2]
    # The same decision as the live controller (interruption/actions.decide), with Karpenter's event reasons.
    assert rebalance["disrupted"] == [] and rebalance["events"][0]["reason"] == "SpotRebalanceRecommendation"
    assert [(d["node"], d["reason"]) for d in interrupted["disrupted"]] == [(node, "Interrupted")]
    assert interrupted["events"][0]["reason"] == "SpotInterrupted"
    (final_node,) = result["final"]["nodes"]
    assert (
        final_node["name"] != node and len(final_node["pods"]) == 2 and final_node["capacityType"] == "spot"
    )
    # The interrupted spot offering is avoided for 3 minutes, as the live provider's cache does.
    first = result["steps"][0]["launched"][0]
    assert (final_node["instanceType"], final_node["zone"]) != (first["instanceType"], first["zone"])


def test_rebalance_under_drain_cordons_drains_and_replaces_the_node() -> None:
    pool = nodepool(
        template_spec={"requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]}
    )
    first = run([pool, deployment("app", 2)], [{"provision": {}}])["steps"][0]["launched"][0]["node"]
    steps = [{"provision": {}}, {"interrupt": {"node": first, "kind": "rebalance_recommendation"}}]
    result = run([pool, deployment("app", 2)], steps, rebalanceHandling="drain")
    step = result["steps"][1]
    assert step["events"][0]["reason"] == "SpotRebalanceRecommendation"
    assert step["events"][0]["message"].startswith("EC2 Instance Rebalance Recommendation for instance i-")
    assert [(d["node"], d["reason"], d["action"]) for d in step["disrupted"]] == [(first, "Interrupted", "delete")]
    assert sorted(e["object"] for e in step["events"] if e["reason"] == "Evicted") == [
        "Pod/default/app-0", "Pod/default/app-1"]
    (final,) = result["final"]["nodes"]
    assert final["name"] != first and len(final["pods"]) == 2 and result["final"]["pending"] == []
    # Under the default ("event", Karpenter's behaviour) the same message only records the event.
    assert run([pool, deployment("app", 2)], steps)["steps"][1]["disrupted"] == []


def test_rebalance_handling_in_a_scenario_is_validated() -> None:
    import pytest

    from reconciler.sim.scenario import ScenarioError

    with pytest.raises(ScenarioError, match=r"^settings.rebalanceHandling: 'cordon' must be one of event, drain$"):
        run([nodepool()], [], rebalanceHandling="cordon")


def test_an_interrupted_spot_offering_is_available_again_after_three_minutes() -> None:
    pool = nodepool(
        template_spec={"requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]}
    )
    first = run([pool, deployment("app", 1)], [{"provision": {}}])["steps"][0]["launched"][0]
    steps = [{"provision": {}}, {"interrupt": {"node": first["node"], "kind": "spot_interrupted"}},
             {"advance": "3m"}, {"apply": [deployment("late", 1)]}, {"provision": {}}]
    result = run([pool, deployment("app", 1)], steps)
    replaced = result["steps"][1]["launched"][0]
    late = result["steps"][4]["launched"][0]
    assert (replaced["instanceType"], replaced["zone"]) != (first["instanceType"], first["zone"])
    assert (late["instanceType"], late["zone"], late["capacityType"]) == (
        first["instanceType"], first["zone"], "spot")


def test_interrupt_of_an_unknown_node_is_a_scenario_error() -> None:
    import pytest

    from reconciler.sim.scenario import ScenarioError

    with pytest.raises(ScenarioError, match=r"steps\[1\].interrupt.node: no node named 'ghost'"):
        run([nodepool(), deployment("app", 1)], [{"provision": {}}, {"interrupt": {"node": "ghost"}}])


def test_launch_pending_boots_on_advance_and_counts_as_in_flight_capacity() -> None:
    result = run(
        [nodepool(), deployment("app", 1, cpu="500m")],
        [
            {"provision": {"launch": "pending"}},
            {"apply": [deployment("app", 2, cpu="500m")]},
            {"provision": {}},
            {"advance": "1m"},
        ],
    )
    first, _, second, _ = result["steps"]
    assert len(first["launched"]) == 1 and first["bound"] == {}
    assert second["launched"] == []  # the in-flight claim has room for the new pod
    assert result["final"]["nodes"][0]["name"] == first["launched"][0]["node"]


def test_deleting_a_node_drains_it_through_termination() -> None:
    result = run([nodepool(), deployment("app", 2)], [{"provision": {}}])
    node = result["steps"][0]["launched"][0]["node"]
    result = run(
        [nodepool(), deployment("app", 2)],
        [{"provision": {}}, {"delete": [{"kind": "Node", "name": node}]}, {"provision": {}}],
    )
    deleted = result["steps"][1]
    assert any(e["reason"] == "Evicted" for e in deleted["events"])
    assert len(deleted["pending"]) == 2
    assert result["final"]["pending"] == [] and result["final"]["nodes"][0]["name"] != node


def test_workload_controllers_and_pod_replicas() -> None:
    statefulset = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "data"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "db"}},
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "batch", "namespace": "default"},
        "spec": {"parallelism": 3, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}},
    }
    bare = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "solo", "namespace": "default"},
        "replicas": 2,
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    result = run([nodepool(), statefulset, job, bare], [{"provision": {}}])
    bound = set(result["steps"][0]["bound"])
    assert bound == {
        "data/db-0",
        "data/db-1",
        "default/batch-0",
        "default/batch-1",
        "default/batch-2",
        "default/solo-0",
        "default/solo-1",
    }


def test_daemonset_pods_follow_nodes_and_count_as_overhead() -> None:
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {
                    "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]
                },
            },
        },
    }
    # 1 CPU of app + 1 CPU of daemon does not fit a 2-CPU node (1900m allocatable): medium is chosen.
    result = run([nodepool(), daemonset, deployment("app", 1)], [{"provision": {}}])
    (launched,) = result["steps"][0]["launched"]
    assert launched["instanceType"] == "medium"
    (node,) = result["final"]["nodes"]
    assert f"kube-system/agent-{node['name']}" in node["pods"]


AGENT = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {"name": "agent", "namespace": "default"},
    "spec": {
        "selector": {"matchLabels": {"app": "agent"}},
        "template": {"metadata": {"labels": {"app": "agent"}},
                     "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}},
    },
}


def unmanaged_node(name: str) -> dict[str, Any]:
    capacity = {"cpu": "4", "memory": "16Gi", "pods": "20"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": "z1"}},
            "status": {"capacity": capacity, "allocatable": capacity}}


def agent_pod(name: str, node: str = "", *, owned: bool = False) -> dict[str, Any]:
    """A pod named like the DaemonSet's: unowned, or the DaemonSet's own (as a snapshot records it)."""
    metadata: dict[str, Any] = {"name": name, "namespace": "default", "labels": {"app": "agent"}}
    if owned:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                                        "uid": "u-agent", "controller": True}]
        metadata["annotations"] = {"sim.adze.dev/owner": "DaemonSet/default/agent"}
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec,
            "status": {"phase": "Running"} if node else {}}


def test_daemonset_pods_never_take_a_name_another_pod_has() -> None:
    """The real controller names its pods with generateName, so a pod already called ``agent-n1`` (unowned,
    or a snapshot's DaemonSet pod that has moved to another node or lost its owner) is no obstacle."""
    cases = {
        "unowned": [unmanaged_node("n1"), agent_pod("agent-n1")],
        "moved": [unmanaged_node("n1"), unmanaged_node("n2"), agent_pod("agent-n1", "n2", owned=True)],
        "lost its owner": [unmanaged_node("n1"), agent_pod("agent-n1", "n1")],
    }
    for case, objects in cases.items():
        result = run([nodepool(), AGENT, *objects], [{"provision": {}}])
        pods = {pod for node in result["final"]["nodes"] for pod in node["pods"]}
        assert {"default/agent-n1", "default/agent-n1-2"} <= pods, (case, result["final"])


def test_daemonset_pods_past_the_total_pod_bound_are_a_scenario_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workloads, "MAX_TOTAL_PODS", 3)  # the real bound is 100,000
    objects = [nodepool(), AGENT, unmanaged_node("n1"), unmanaged_node("n2"), agent_pod("solo")]
    run(objects[:-1], [{"provision": {}}])  # 2 DaemonSet pods: within
    with pytest.raises(ScenarioError, match=r"^objects: DaemonSet default/agent: its pods would take the cluster "
                                            r"past 3 pods"):
        run([*objects, unmanaged_node("n3")], [{"provision": {}}])


def test_a_clock_in_year_one_writes_four_digit_years() -> None:
    result = run([nodepool(), deployment("app", 1)], [{"provision": {}}, {"advance": "1m"}],
                 clock="0001-01-01T00:00:00Z")
    assert [step["clock"] for step in result["steps"]] == ["0001-01-01T00:00:00Z", "0001-01-01T00:01:00Z"]
    assert result["final"]["pending"] == [] and len(result["final"]["nodes"]) == 1


def test_an_unowned_pod_force_deleted_with_a_grace_period_comes_back_once_it_is_gone() -> None:
    # The PDB refuses eviction; the NodeClaim's terminationGracePeriod (2m) is shorter than the pod's own (600 s),
    # so termination deletes the pod at once with the 120 s that remain. The simulator recreates unowned pods
    # (its convention for bare pods): that must happen once the pod is really gone, not be skipped.
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "solo", "namespace": "default", "labels": {"app": "solo"}},
        "spec": {
            "terminationGracePeriodSeconds": 600,
            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}],
        },
    }
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "solo", "namespace": "default"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "solo"}}},
    }
    pool = nodepool(template_spec={"terminationGracePeriod": "2m"})
    first = run([pool, pdb, pod], [{"provision": {}}])
    node = first["steps"][0]["launched"][0]["node"]
    result = run(
        [pool, pdb, pod],
        [{"provision": {}}, {"delete": [{"kind": "Node", "name": node}]}, {"advance": "3m"}, {"provision": {}}],
    )
    assert result["final"]["pending"] == []
    (final_node,) = result["final"]["nodes"]
    assert final_node["name"] != node and final_node["pods"] == ["default/solo"]


def test_disrupt_step_waits_out_terminating_pods_and_removes_the_empty_node(shared_dir: Any) -> None:
    """An empty node whose only pod is already terminating: the step lets its grace period elapse in
    simulated time, the kubelet removes the pod and the node goes within the same step."""
    import yaml

    scenario = yaml.safe_load((shared_dir / "scenarios" / "consolidation-replace.yaml").read_text())
    node = next(o for o in scenario["objects"] if o["kind"] == "Node")["metadata"]["name"]
    scenario["objects"] = [o for o in scenario["objects"] if o["kind"] != "Pod"]
    scenario["objects"].append({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "dying", "namespace": "default", "deletionTimestamp": "2026-01-01T09:04:00Z",
                     "deletionGracePeriodSeconds": 300},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 300,
                 "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m"}}}]},
        "status": {"phase": "Running"},
    })
    scenario["steps"] = [{"disrupt": {}}]

    result = run_scenario(parse_scenario(scenario))

    [step] = result["steps"]
    assert [(d["node"], d["reason"]) for d in step["disrupted"]] == [(node, "Empty")]
    assert step["clock"] == "2026-01-01T09:04:00Z"  # 09:00 + the pod's remaining grace period
    assert result["final"]["nodes"] == [] and result["final"]["costPerHour"] == 0.0


def test_a_node_deleted_in_a_step_is_drained_for_five_simulated_seconds_and_gone_at_its_end() -> None:
    """Termination as Karpenter's (issue 17): the drain lasts at least 5 s, so the step's clock moves on by
    that much and the node is gone when the step ends (the same Terminator as the live controller)."""
    result = run([nodepool(), deployment("app", 2)], [{"provision": {}}])
    node = result["steps"][0]["launched"][0]["node"]
    result = run([nodepool(), deployment("app", 2)],
                 [{"provision": {}}, {"delete": [{"kind": "Node", "name": node}]}])
    provisioned, deleted = result["steps"]
    assert provisioned["clock"] == "2026-01-01T00:00:00Z"
    assert deleted["clock"] == "2026-01-01T00:00:05Z"
    assert node not in [n["name"] for n in result["final"]["nodes"]]
