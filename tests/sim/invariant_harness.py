"""Random valid scenarios and the invariants every simulator step must keep.

The checks are written from the scenario format and Kubernetes' rules, not from the engine's code: a pod
is on an existing node or pending with a reason; no node holds more than its allocatable; NodePool limits
hold for the capacity not being deleted; an eviction never takes a PDB below its desired healthy count;
bound pods satisfy their nodeSelector, required node affinity and the NodePool's taints; unowned scenario
pods never vanish. ``run_checked`` runs a scenario with those checks after every step (and on every
eviction) and returns the result document.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

from reconciler.kube.api import KINDS_BY_NAME, NODE, NODECLAIM, NODEPOOL, PDB, POD
from reconciler.model.quantity import parse_quantity
from reconciler.sim.runner import Simulation
from reconciler.sim.scenario import Step, parse_scenario

ZONES = ["z1", "z2", "z3"]
IGNORED_TAINT_KEYS = ("karpenter.sh/disrupted", "karpenter.sh/unregistered", "node.kubernetes.io/")


class InvariantViolation(AssertionError):
    pass


# -- generation ----------------------------------------------------------------------------------

@st.composite
def instance_types(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(2, 4))
    types = []
    for index in range(count):
        cpu = draw(st.sampled_from([2, 4, 8, 16]))
        base = cpu * draw(st.sampled_from([0.04, 0.05, 0.06]))
        offerings = []
        for zone in ZONES:
            offerings.append({"capacityType": "on-demand", "zone": zone, "price": round(base, 4)})
            if draw(st.booleans()):
                factor = draw(st.sampled_from([0.3, 0.4, 0.5]))
                offerings.append({"capacityType": "spot", "zone": zone, "price": round(base * factor, 4)})
        types.append({
            "name": f"t{index}-{cpu}",
            "capacity": {"cpu": str(cpu), "memory": f"{cpu * 4}Gi", "pods": "30"},
            "offerings": offerings,
        })
    return types


@st.composite
def nodepools(draw: st.DrawFn) -> list[dict[str, Any]]:
    pools = []
    for index in range(draw(st.integers(1, 3))):
        requirements: list[dict[str, Any]] = [{
            "key": "karpenter.sh/capacity-type", "operator": "In",
            "values": draw(st.sampled_from([["on-demand"], ["spot"], ["spot", "on-demand"]])),
        }]
        if draw(st.booleans()):
            requirements.append({"key": "topology.kubernetes.io/zone", "operator": "NotIn",
                                 "values": [draw(st.sampled_from(ZONES))]})
        template_spec: dict[str, Any] = {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": requirements,
        }
        if draw(st.booleans()):
            template_spec["expireAfter"] = draw(st.sampled_from(["30m", "2h"]))
        if index > 0 and draw(st.booleans()):
            template_spec["taints"] = [{"key": f"pool{index}", "value": "x", "effect": "NoSchedule"}]
        spec: dict[str, Any] = {
            "template": {"spec": template_spec},
            "weight": draw(st.integers(1, 50)),
            "disruption": {
                "consolidationPolicy": draw(st.sampled_from(["WhenEmpty", "WhenEmptyOrUnderutilized"])),
                "consolidateAfter": "0s",
                "budgets": [{"nodes": draw(st.sampled_from(["1", "10%", "100%"]))}],
            },
        }
        if draw(st.booleans()):
            spec["limits"] = {"cpu": str(draw(st.sampled_from([8, 16, 48])))}
        pools.append({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": f"pool{index}"},
                      "spec": spec})
    return pools


@st.composite
def workload(draw: st.DrawFn, index: int, pool_count: int) -> list[dict[str, Any]]:
    name = f"app{index}"
    pod_spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {
            "cpu": draw(st.sampled_from(["250m", "500m", "1", "1500m", "3"])),
            "memory": draw(st.sampled_from(["256Mi", "1Gi", "3Gi"])),
        }}}],
        "tolerations": [{"key": f"pool{i}", "operator": "Exists"} for i in range(1, pool_count)
                        if draw(st.booleans())],
    }
    affinity: dict[str, Any] = {}
    choice = draw(st.sampled_from(["none", "zone-in", "zone-notin", "capacity-notin", "selector"]))
    if choice == "zone-in":
        expressions = [{"key": "topology.kubernetes.io/zone", "operator": "In",
                        "values": sorted(draw(st.sets(st.sampled_from(ZONES), min_size=1, max_size=2)))}]
    elif choice == "zone-notin":
        expressions = [{"key": "topology.kubernetes.io/zone", "operator": "NotIn",
                        "values": [draw(st.sampled_from(ZONES))]}]
    elif choice == "capacity-notin":
        expressions = [{"key": "karpenter.sh/capacity-type", "operator": "NotIn",
                        "values": [draw(st.sampled_from(["spot", "on-demand"]))]}]
    else:
        expressions = []
    if expressions:
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": expressions}]}}
    if choice == "selector":
        pod_spec["nodeSelector"] = {"karpenter.sh/capacity-type": draw(st.sampled_from(["spot", "on-demand"]))}
    if draw(st.booleans()):
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": name}}}]}
    if affinity:
        pod_spec["affinity"] = affinity
    if draw(st.booleans()):
        pod_spec["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": name}}}]
    objects: list[dict[str, Any]] = [{
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": draw(st.integers(1, 6)), "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}},
    }]
    budget = draw(st.sampled_from([None, {"maxUnavailable": 1}, {"maxUnavailable": 0}, {"minAvailable": 1},
                                   {"maxUnavailable": "50%"}]))
    if budget is not None:
        objects.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                        "metadata": {"name": name, "namespace": "default"},
                        "spec": {**budget, "selector": {"matchLabels": {"app": name}}}})
    return objects


@st.composite
def steps(draw: st.DrawFn, workload_count: int) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = [{"provision": {}}]
    for _ in range(draw(st.integers(2, 7))):
        kind = draw(st.sampled_from(["provision", "pending", "advance", "disrupt", "stable", "expire",
                                     "interrupt", "scale"]))
        if kind == "provision":
            result.append({"provision": {}})
        elif kind == "pending":
            result.append({"provision": {"launch": "pending"}})
        elif kind == "advance":
            result.append({"advance": draw(st.sampled_from(["30s", "5m", "1h", "3h"]))})
        elif kind == "disrupt":
            result.append({"disrupt": {}})
        elif kind == "stable":
            result.append({"disrupt": {"until": "stable"}})
        elif kind == "expire":
            result.append({"expire": {}})
        elif kind == "interrupt":
            result.append({"interrupt": {"node": f"@{draw(st.integers(0, 5))}", "kind": draw(st.sampled_from(
                ["spot_interrupted", "rebalance_recommendation", "instance_stopped", "scheduled_change",
                 "instance_terminated"]))}})
        else:
            index = draw(st.integers(0, workload_count - 1))
            result.append({"apply": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                      "metadata": {"name": f"app{index}", "namespace": "default"},
                                      "__scale__": draw(st.integers(0, 8))}]})
    return result


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    pools = draw(nodepools())
    objects: list[dict[str, Any]] = list(pools)
    count = draw(st.integers(1, 3))
    for index in range(count):
        objects.extend(draw(workload(index, len(pools))))
    if draw(st.booleans()):  # unowned pods: the simulator must never drop them
        pod_spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x",
                                                    "resources": {"requests": {"cpu": "500m"}}}]}
        if draw(st.booleans()):
            pod_spec["tolerations"] = [{"operator": "Exists"}]
        objects.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "solo", "namespace": "default"},
                        "replicas": draw(st.integers(1, 3)), "spec": pod_spec})
    plan = draw(steps(count))
    deployments = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Deployment"}
    for step in plan:  # a scale step replaces the Deployment with its new replica count
        if "apply" in step:
            ref = step["apply"][0]
            scaled = {**deployments[ref["metadata"]["name"]]}
            scaled["spec"] = {**scaled["spec"], "replicas": ref["__scale__"]}
            step["apply"] = [scaled]
    return {"name": "invariants", "catalog": {"zones": ZONES, "instanceTypes": draw(instance_types())},
            "objects": objects, "steps": plan}


# -- checking ------------------------------------------------------------------------------------

def _quantity(value: Any) -> float:
    return float(parse_quantity(str(value)))


def _requests(pod: Mapping[str, Any]) -> dict[str, float]:
    total: dict[str, float] = {"cpu": 0.0, "memory": 0.0}
    for container in (pod.get("spec") or {}).get("containers") or []:
        for resource, value in ((container.get("resources") or {}).get("requests") or {}).items():
            if resource in total:
                total[resource] += _quantity(value)
    return total


def _expression_holds(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
    if operator == "In":
        return labels.get(key) in values
    if operator == "NotIn":
        return labels.get(key) not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    raise AssertionError(f"operator {operator} not generated")


def _tolerates(pod: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    for toleration in (pod.get("spec") or {}).get("tolerations") or []:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        if toleration.get("operator") == "Exists" and toleration.get("key") in (None, "", taint.get("key")):
            return True
        if toleration.get("key") == taint.get("key") and toleration.get("value") == taint.get("value"):
            return True
    return False


def _running(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


class Checker:
    """Checks one simulation after every step and on every eviction; raises ``InvariantViolation``."""

    def __init__(self, simulation: Simulation) -> None:
        self.sim = simulation
        self.step_index = 0
        original_evict = simulation.kube.evict

        async def checked_evict(name: str, namespace: str) -> None:
            before = self._budget_margins(name, namespace)
            await original_evict(name, namespace)
            for pdb, margin in before:
                if margin < 1:
                    raise InvariantViolation(
                        f"step {self.step_index}: evicting {namespace}/{name} took PDB {pdb} below its desired "
                        f"healthy count (margin before the eviction: {margin})")

        simulation.kube.evict = checked_evict  # type: ignore[method-assign]
        # Unowned pods of the scenario (no step here deletes pods): evicted or not, they must stay.
        self.unowned = {
            f"{o['metadata'].get('namespace', 'default')}/{name}" for o in simulation.scenario.objects
            if o.get("kind") == "Pod" and not o["metadata"].get("ownerReferences")
            for name in ([f"{o['metadata']['name']}-{i}" for i in range(int(o["replicas"]))] if "replicas" in o
                         else [o["metadata"]["name"]])
        }

    def _objects(self, kind: Any) -> list[dict[str, Any]]:
        return self.sim.kube.objects(kind)

    def _budget_margins(self, name: str, namespace: str) -> list[tuple[str, int]]:
        """(PDB, healthy - desired) for every budget covering a healthy pod about to be evicted."""
        pod = self.sim.kube.peek(POD, name, namespace)
        if pod is None or (pod["metadata"].get("deletionTimestamp")) or not (pod.get("spec") or {}).get("nodeName"):
            return []
        nodes = {n["metadata"]["name"] for n in self._objects(NODE)}
        labels = pod["metadata"].get("labels") or {}
        margins = []
        for pdb in self._objects(PDB):
            selector = pdb["spec"]["selector"]["matchLabels"]
            if pdb["metadata"].get("namespace") != namespace or any(labels.get(k) != v for k, v in selector.items()):
                continue
            deployment = self.sim.kube.peek(KINDS_BY_NAME["Deployment"], selector["app"], namespace)
            expected = int(deployment["spec"]["replicas"]) if deployment else 0
            healthy = sum(
                1 for p in self._objects(POD)
                if p["metadata"].get("namespace") == namespace
                and all((p["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())
                and not p["metadata"].get("deletionTimestamp") and _running(p)
                and (p.get("spec") or {}).get("nodeName") in nodes
            )
            spec = pdb["spec"]
            if "maxUnavailable" in spec:
                value = spec["maxUnavailable"]
                unavailable = -(-int(value[:-1]) * expected // 100) if isinstance(value, str) else int(value)
                desired = expected - unavailable
            else:
                desired = int(spec["minAvailable"])
            margins.append((pdb["metadata"]["name"], healthy - desired))
        return margins

    def after_step(self, step: Step, record: dict[str, Any]) -> None:
        where = f"step {self.step_index} ({step.kind})"
        self.step_index += 1
        nodes = {n["metadata"]["name"]: n for n in self._objects(NODE)}
        present = {f"{p['metadata'].get('namespace', 'default')}/{p['metadata']['name']}" for p in self._objects(POD)}
        if self.unowned - present:
            raise InvariantViolation(f"{where}: unowned pod(s) {sorted(self.unowned - present)} vanished")
        used: dict[str, dict[str, float]] = {}
        for pod in self._objects(POD):
            if not _running(pod) or pod["metadata"].get("deletionTimestamp"):
                continue
            key = f"{pod['metadata'].get('namespace', 'default')}/{pod['metadata']['name']}"
            node_name = (pod.get("spec") or {}).get("nodeName")
            if not node_name:
                if key not in record["pending"] or not record["pending"][key]:
                    raise InvariantViolation(f"{where}: pod {key} is neither on a node nor pending with a reason")
                continue
            node = nodes.get(node_name)
            if node is None:
                raise InvariantViolation(f"{where}: pod {key} is bound to {node_name}, which is not a Node")
            self._check_placement(where, key, pod, node)
            totals = used.setdefault(node_name, {"cpu": 0.0, "memory": 0.0})
            for resource, amount in _requests(pod).items():
                totals[resource] += amount
        for node_name, totals in used.items():
            allocatable = nodes[node_name].get("status", {}).get("allocatable") or {}
            for resource, amount in totals.items():
                if resource in allocatable and amount > _quantity(allocatable[resource]) + 1e-9:
                    raise InvariantViolation(
                        f"{where}: node {node_name} holds {amount} {resource}, allocatable {allocatable[resource]}")
        self._check_limits(where)

    def _check_placement(self, where: str, key: str, pod: Mapping[str, Any], node: Mapping[str, Any]) -> None:
        labels = node["metadata"].get("labels") or {}
        spec = pod.get("spec") or {}
        for label, value in (spec.get("nodeSelector") or {}).items():
            if labels.get(label) != value:
                raise InvariantViolation(f"{where}: pod {key} needs {label}={value}, node has {labels.get(label)}")
        required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                    .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
        terms = required.get("nodeSelectorTerms") or []
        if terms and not any(all(_expression_holds(e, labels) for e in t.get("matchExpressions") or [])
                             for t in terms):
            raise InvariantViolation(f"{where}: pod {key} on {node['metadata']['name']} breaks its node affinity "
                                     f"{terms} (node labels {labels})")
        for taint in (node.get("spec") or {}).get("taints") or []:
            if taint.get("effect") not in ("NoSchedule", "NoExecute") or str(taint.get("key", "")).startswith(
                    IGNORED_TAINT_KEYS):
                continue
            if not _tolerates(pod, taint):
                raise InvariantViolation(f"{where}: pod {key} does not tolerate {taint} of {node['metadata']['name']}")

    def _check_limits(self, where: str) -> None:
        pools = {p["metadata"]["name"]: p for p in self._objects(NODEPOOL)}
        cpu: dict[str, float] = {}
        for claim in self._objects(NODECLAIM):
            # As Karpenter, limits bound the capacity that is not being deleted: a deleting node's
            # replacement may launch before it is gone.
            if claim["metadata"].get("deletionTimestamp"):
                continue
            pool = (claim["metadata"].get("labels") or {}).get("karpenter.sh/nodepool", "")
            capacity = (claim.get("status") or {}).get("capacity") or {}
            cpu[pool] = cpu.get(pool, 0.0) + _quantity(capacity.get("cpu", "0"))
        for name, total in cpu.items():
            limit = ((pools.get(name) or {}).get("spec") or {}).get("limits", {}).get("cpu")
            if limit is not None and total > _quantity(limit) + 1e-9:
                raise InvariantViolation(f"{where}: NodePool {name} has {total} CPU, limit {limit}")


class InterruptingSimulation(Simulation):
    """Resolves ``interrupt: {node: "@k"}`` to the k-th managed node (mod count) when the step runs."""

    async def _step_interrupt(self, step: Step, record: dict[str, Any]) -> None:
        target = str(step.args.get("node", ""))
        if target.startswith("@"):
            managed = sorted(n["metadata"]["name"] for n in self.kube.objects(NODE)
                             if "karpenter.sh/nodepool" in (n["metadata"].get("labels") or {})
                             and not n["metadata"].get("deletionTimestamp"))
            if not managed:
                return
            step = Step(step.kind, {**step.args, "node": managed[int(target[1:]) % len(managed)]}, step.path)
        await super()._step_interrupt(step, record)
        if step.args.get("kind") == "instance_terminated" and self.kube.peek(NODE, step.args["node"]) is not None:
            raise InvariantViolation(f"{step.path}: the node of terminated instance {step.args['node']} outlived it")


def run_checked(document: Mapping[str, Any]) -> dict[str, Any]:
    """Run a scenario document with every invariant checked after each step; return the result."""
    simulation = InterruptingSimulation(parse_scenario(document))
    checker = Checker(simulation)
    result = asyncio.run(simulation.run(after_step=checker.after_step))
    final = result["final"]
    on_nodes = {pod for node in final["nodes"] for pod in node["pods"]}
    for pod in simulation.kube.objects(POD):
        key = f"{pod['metadata'].get('namespace', 'default')}/{pod['metadata']['name']}"
        if _running(pod) and not pod["metadata"].get("deletionTimestamp") and key not in on_nodes \
                and key not in final["pending"]:
            raise InvariantViolation(f"final: pod {key} is neither on a node nor pending")
    return result
