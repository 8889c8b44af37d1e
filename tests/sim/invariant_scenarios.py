"""Random valid scenarios for the invariant suite (issue 19).

Several NodePools (requirements, taints, limits on cpu/memory/nodes/GPUs -- some as tight as one node --,
expiry, a terminationGracePeriod), Deployments with affinity, spreads, PDBs and do-not-disrupt, a DaemonSet,
unowned pods (some under a PDB), instances that linger shutting down, and steps that provision,
advance, scale, disrupt, expire, interrupt and *drift* (a NodePool relabelled, its requirements or
node class changed, or its EC2NodeClass edited, usually followed by a disrupt step). The weights favour
the combinations that once broke: several pods of one PDB on several nodes that all leave at once
(expire, drift, multi-node consolidation), and terminated instances under blocking PDBs.
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

from hypothesis import strategies as st

ZONES = ["z1", "z2", "z3"]
GPU = "nvidia.com/gpu"
CAPACITY_TYPES = [["on-demand"], ["spot"], ["spot", "on-demand"]]
T = TypeVar("T")


def weighted(choices: list[tuple[int, T]]) -> st.SearchStrategy[T]:
    """One of the values, each as likely as its weight (Hypothesis shrinks towards the first)."""
    return st.sampled_from([value for weight, value in choices for _ in range(weight)])


@st.composite
def instance_types(draw: st.DrawFn) -> list[dict[str, Any]]:
    types = []
    count = draw(st.integers(2, 4))
    gpu_type = draw(st.booleans()) and draw(st.booleans())  # a quarter of the scenarios
    for index in range(count):
        cpu = draw(st.sampled_from([2, 4, 8, 16]))
        base = cpu * draw(st.sampled_from([0.04, 0.05, 0.06]))
        offerings = []
        for zone in ZONES:
            offerings.append({"capacityType": "on-demand", "zone": zone, "price": round(base, 4)})
            if draw(st.booleans()):
                factor = draw(st.sampled_from([0.3, 0.4, 0.5]))
                offerings.append({"capacityType": "spot", "zone": zone, "price": round(base * factor, 4)})
        capacity = {"cpu": str(cpu), "memory": f"{cpu * 4}Gi", "pods": str(draw(st.sampled_from([8, 30])))}
        name = f"t{index}-{cpu}"
        if gpu_type and index == count - 1:
            capacity[GPU] = "2"
            name = f"g{index}-{cpu}"
        types.append({"name": name, "capacity": capacity, "offerings": offerings})
    return types


def nodeclass(name: str, tags: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "role": "KarpenterNodeRole-invariants",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "invariants"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "invariants"}}],
    }
    if tags:
        spec["tags"] = tags
    return {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name}, "spec": spec}


@st.composite
def nodepools(draw: st.DrawFn, gpu: bool) -> list[dict[str, Any]]:
    pools = []
    for index in range(draw(st.integers(1, 3))):
        requirements: list[dict[str, Any]] = [{
            "key": "karpenter.sh/capacity-type", "operator": "In", "values": draw(st.sampled_from(CAPACITY_TYPES)),
        }]
        if draw(st.booleans()):
            requirements.append({"key": "topology.kubernetes.io/zone", "operator": "NotIn",
                                 "values": [draw(st.sampled_from(ZONES))]})
        template_spec: dict[str, Any] = {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": requirements,
        }
        if draw(weighted([(2, True), (1, False)])):
            template_spec["expireAfter"] = draw(st.sampled_from(["30m", "2h"]))
        if draw(weighted([(1, True), (3, False)])):  # a drain blocked by a PDB or do-not-disrupt ends then
            template_spec["terminationGracePeriod"] = "15m"
        if index > 0 and draw(st.booleans()):
            template_spec["taints"] = [{"key": f"pool{index}", "value": "x", "effect": "NoSchedule"}]
        spec: dict[str, Any] = {
            "template": {"metadata": {"labels": {"team": "a"}}, "spec": template_spec},
            "weight": draw(st.integers(1, 50)),
            "disruption": {
                "consolidationPolicy": draw(st.sampled_from(["WhenEmptyOrUnderutilized", "WhenEmpty"])),
                "consolidateAfter": "0s",
                "budgets": [{"nodes": draw(weighted([(2, "100%"), (1, "1"), (1, "10%")]))}],
            },
        }
        limits: dict[str, str] = {}
        if draw(st.booleans()):
            limits["cpu"] = str(draw(st.sampled_from([4, 8, 16, 48])))
        if draw(st.booleans()) and draw(st.booleans()):
            limits["memory"] = draw(st.sampled_from(["32Gi", "96Gi"]))
        if draw(st.booleans()) and draw(st.booleans()):
            limits["nodes"] = str(draw(st.integers(1, 4)))
        if gpu and draw(st.booleans()):
            limits[GPU] = str(draw(st.integers(0, 4)))
        if limits:
            spec["limits"] = limits
        pools.append({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": f"pool{index}"},
                      "spec": spec})
    return pools


@st.composite
def workload(draw: st.DrawFn, index: int, pool_count: int, gpu: bool) -> list[dict[str, Any]]:
    name = f"app{index}"
    requests = {
        "cpu": draw(st.sampled_from(["250m", "500m", "1", "1500m", "3"])),
        "memory": draw(st.sampled_from(["256Mi", "1Gi", "3Gi"])),
    }
    if gpu and draw(st.booleans()):
        requests[GPU] = "1"
    pod_spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "x", "resources": {"requests": requests}}],
        "tolerations": [{"key": f"pool{i}", "operator": "Exists"} for i in range(1, pool_count)
                        if draw(st.booleans())],
    }
    affinity: dict[str, Any] = {}
    choice = draw(st.sampled_from(["none", "zone-in", "zone-notin", "capacity-notin", "selector"]))
    expressions: list[dict[str, Any]] = []
    if choice == "zone-in":
        expressions = [{"key": "topology.kubernetes.io/zone", "operator": "In",
                        "values": sorted(draw(st.sets(st.sampled_from(ZONES), min_size=1, max_size=2)))}]
    elif choice == "zone-notin":
        expressions = [{"key": "topology.kubernetes.io/zone", "operator": "NotIn",
                        "values": [draw(st.sampled_from(ZONES))]}]
    elif choice == "capacity-notin":
        expressions = [{"key": "karpenter.sh/capacity-type", "operator": "NotIn",
                        "values": [draw(st.sampled_from(["spot", "on-demand"]))]}]
    if expressions:
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": expressions}]}}
    if choice == "selector":
        pod_spec["nodeSelector"] = {"karpenter.sh/capacity-type": draw(st.sampled_from(["spot", "on-demand"]))}
    if draw(weighted([(3, True), (2, False)])):  # one pod per node: a PDB's pods spread over several nodes
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": name}}}]}
    if affinity:
        pod_spec["affinity"] = affinity
    if draw(st.booleans()):
        pod_spec["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": name}}}]
    template: dict[str, Any] = {"labels": {"app": name}}
    if draw(weighted([(1, True), (4, False)])):
        template["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    objects: list[dict[str, Any]] = [{
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": draw(st.integers(1, 6)), "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": template, "spec": pod_spec}},
    }]
    budget = draw(weighted([(4, {"maxUnavailable": 1}), (3, {"maxUnavailable": 0}), (2, None), (1, {"minAvailable": 1}),
                            (1, {"maxUnavailable": "50%"}), (1, {"minAvailable": "50%"})]))
    if budget is not None:
        objects.append(pdb(name, budget))
    return objects


def pdb(app: str, budget: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": app, "namespace": "default"},
            "spec": {**budget, "selector": {"matchLabels": {"app": app}}}}


@st.composite
def daemonset(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "agent", "image": "x",
                                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}
    if draw(st.booleans()):
        spec["tolerations"] = [{"operator": "Exists"}]  # runs on tainted pools and stays through drains
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "template": {"metadata": {"labels": {"app": "agent"}}, "spec": spec}}}


@st.composite
def unowned_pods(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Pods without a controller: the simulator must never drop them, and a maxUnavailable or percentage
    PDB over them allows nothing (the disruption controller cannot know their expected count)."""
    pod_spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m"}}}]}
    if draw(st.booleans()):
        pod_spec["tolerations"] = [{"operator": "Exists"}]
    objects: list[dict[str, Any]] = [{
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "solo", "namespace": "default",
                                                        "labels": {"app": "solo"}},
        "replicas": draw(st.integers(1, 3)), "spec": pod_spec}]
    budget = draw(weighted([(2, None), (2, {"maxUnavailable": 1}), (1, {"minAvailable": 1}),
                            (1, {"minAvailable": "50%"})]))
    if budget is not None:
        objects.append(pdb("solo", budget))
    return objects


class Plan:
    """The steps drawn so far and the objects as the latest ``apply`` left them."""

    def __init__(self, pools: list[dict[str, Any]], deployments: list[dict[str, Any]]) -> None:
        self.steps: list[dict[str, Any]] = []
        self.pools = {p["metadata"]["name"]: p for p in pools}
        self.deployments = {d["metadata"]["name"]: d for d in deployments}
        self.nodeclass_revision = 0

    def apply(self, manifest: dict[str, Any]) -> None:
        self.steps.append({"apply": [manifest]})


def _drift(draw: st.DrawFn, plan: Plan) -> None:
    """Change what nodes were launched from, so they drift: template labels, requirements, node class."""
    name = draw(st.sampled_from(sorted(plan.pools)))
    pool = copy.deepcopy(plan.pools[name])
    template = pool["spec"]["template"]
    change = draw(st.sampled_from(["relabel", "requirements", "nodeclass-ref", "nodeclass-spec"]))
    if change == "relabel":
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        labels["team"] = "b" if labels.get("team") == "a" else "a"
    elif change == "requirements":
        requirements = template["spec"]["requirements"]
        if draw(st.booleans()):
            current = requirements[0]["values"]
            requirements[0]["values"] = draw(st.sampled_from([v for v in CAPACITY_TYPES if v != current]))
        else:
            zone_rules = [r for r in requirements if r["key"] == "topology.kubernetes.io/zone"]
            if zone_rules:
                zone_rules[0]["values"] = [draw(st.sampled_from([z for z in ZONES if z != zone_rules[0]["values"][0]]))]
            else:
                requirements.append({"key": "topology.kubernetes.io/zone", "operator": "NotIn",
                                     "values": [draw(st.sampled_from(ZONES))]})
    elif change == "nodeclass-ref":
        ref = template["spec"]["nodeClassRef"]
        ref["name"] = "alt" if ref["name"] == "default" else "default"
    else:
        plan.nodeclass_revision += 1
        plan.apply(nodeclass("default", {"revision": str(plan.nodeclass_revision)}))
        pool = None
    if pool is not None:
        plan.pools[name] = pool
        plan.apply(copy.deepcopy(pool))
    if draw(weighted([(3, True), (1, False)])):
        plan.steps.append({"disrupt": {"until": "stable"}} if draw(st.booleans()) else {"disrupt": {}})


ACTIONS = weighted([(3, "provision"), (2, "pending"), (2, "advance"), (1, "disrupt"), (2, "stable"), (3, "expire"),
                    (3, "interrupt"), (3, "scale"), (3, "drift")])
INTERRUPTIONS = weighted([(3, "instance_terminated"), (2, "spot_interrupted"), (1, "rebalance_recommendation"),
                          (1, "instance_stopped"), (1, "scheduled_change")])


@st.composite
def steps(draw: st.DrawFn, plan: Plan) -> list[dict[str, Any]]:
    plan.steps.append({"provision": draw(weighted([(3, {}), (1, {"launch": "pending"})]))})
    for _ in range(draw(st.integers(2, 7))):
        action = draw(ACTIONS)
        if action == "provision":
            plan.steps.append({"provision": {}})
        elif action == "pending":
            plan.steps.append({"provision": {"launch": "pending"}})
            if draw(weighted([(3, True), (1, False)])):  # a pass that plans onto the still-booting claims
                plan.steps.append({"provision": {}})
        elif action == "advance":
            plan.steps.append({"advance": draw(st.sampled_from(["30s", "5m", "1h", "3h"]))})
        elif action == "disrupt":
            plan.steps.append({"disrupt": {}})
        elif action == "stable":
            plan.steps.append({"disrupt": {"until": "stable"}})
        elif action == "expire":
            if draw(weighted([(3, True), (1, False)])):  # past every expireAfter drawn: a pool's nodes at once
                plan.steps.append({"advance": "3h"})
            plan.steps.append({"expire": {}})
        elif action == "interrupt":
            plan.steps.append({"interrupt": {"node": f"@{draw(st.integers(0, 5))}", "kind": draw(INTERRUPTIONS)}})
        elif action == "scale":
            name = draw(st.sampled_from(sorted(plan.deployments)))
            scaled = copy.deepcopy(plan.deployments[name])
            scaled["spec"]["replicas"] = draw(st.integers(0, 8))
            plan.deployments[name] = scaled
            plan.apply(copy.deepcopy(scaled))
            if draw(st.booleans()):  # scaled down: consolidation (single and multi-node) gets its chance
                plan.steps.append({"disrupt": {"until": "stable"}} if draw(st.booleans()) else {"disrupt": {}})
        else:
            _drift(draw, plan)
    return plan.steps


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    types = draw(instance_types())
    gpu = any(GPU in t["capacity"] for t in types)
    pools = draw(nodepools(gpu))
    objects: list[dict[str, Any]] = [nodeclass("default"), nodeclass("alt"), *pools]
    for index in range(draw(st.integers(1, 3))):
        objects.extend(draw(workload(index, len(pools), gpu)))
    if draw(st.booleans()):
        objects.extend(draw(unowned_pods()))
    if draw(st.booleans()) and draw(st.booleans()):
        objects.append(draw(daemonset()))
    plan = Plan(pools, [o for o in objects if o["kind"] == "Deployment"])
    catalog: dict[str, Any] = {"zones": ZONES, "instanceTypes": types}
    if draw(weighted([(1, True), (2, False)])):  # terminated instances linger (shutting-down), claims with them
        catalog["shutdownDuration"] = "2m"
    return {"name": "invariants", "catalog": catalog, "objects": copy.deepcopy(objects), "steps": draw(steps(plan))}
