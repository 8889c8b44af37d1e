"""The invariants every simulator step must keep, checked after every step and on every eviction.

The checks are written from the scenario format and Kubernetes' rules, not from the engine's code:

(a) a pod is on a node that exists or pending with a reason (and unowned scenario pods never vanish);
(b) no node holds more than its allocatable: cpu, memory, extended resources and the pod count;
(c) NodePool limits hold for every limited resource, ``nodes`` included, over every NodeClaim -- launching,
    disrupted, draining and shutting down ones too;
(d) an eviction never takes a PDB below its desired healthy count -- and, the other way round, the
    Eviction API never refuses one the budget allows (else a simulator that never evicts would pass);
    a ``maxUnavailable`` or percentage budget counts the scale of its pods' controllers (pods without one left
    out) and allows nothing when it expects no pod;
(e) bound pods satisfy their nodeSelector, required node affinity and the node's taints;
(f) (in the tests) the same input gives the same result document.

``run_checked`` runs a scenario document with those checks and returns the result document.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from reconciler.kube.api import KINDS_BY_NAME, NODE, NODECLAIM, NODEPOOL, PDB, POD, TooManyRequestsError
from reconciler.model.quantity import format_quantity, parse_quantity
from reconciler.sim.catalog import build_catalog
from reconciler.sim.runner import Simulation
from reconciler.sim.scenario import Step, parse_scenario

IGNORED_TAINT_KEYS = ("karpenter.sh/disrupted", "karpenter.sh/unregistered", "node.kubernetes.io/")


class InvariantViolation(AssertionError):
    pass


MILLI = 1000.0  # parse_quantity counts milli-units: "2" cpu, "30" pods and "3" nodes are 2000, 30000 and 3000


def _quantity(value: Any) -> float:
    return float(parse_quantity(str(value)))


def _add(total: dict[str, float], requests: Mapping[str, Any]) -> None:
    for resource, value in requests.items():
        total[resource] = total.get(resource, 0.0) + _quantity(value)


def _requests(pod: Mapping[str, Any]) -> dict[str, float]:
    """A pod's effective requests, as kube-scheduler counts them: the containers' sum or the largest init
    container's, whichever is more, plus the pod overhead; and one pod."""
    spec = pod.get("spec") or {}
    total: dict[str, float] = {}
    for container in spec.get("containers") or []:
        _add(total, (container.get("resources") or {}).get("requests") or {})
    for container in spec.get("initContainers") or []:
        init: dict[str, float] = {}
        _add(init, (container.get("resources") or {}).get("requests") or {})
        for resource, amount in init.items():
            total[resource] = max(total.get(resource, 0.0), amount)
    _add(total, spec.get("overhead") or {})
    total["pods"] = MILLI  # one pod, in the milli-units every quantity here is counted in
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
        # Instance type -> capacity, to count a claim that has not launched yet.
        self.capacities = {t.name: t.capacity.to_manifest() for t in build_catalog(simulation.scenario.catalog)}
        self.step_index = 0
        self.evictions = 0
        original_evict = simulation.kube.evict

        async def checked_evict(name: str, namespace: str) -> None:
            before = self._budget_margins(name, namespace)
            try:
                await original_evict(name, namespace)
            except TooManyRequestsError as err:
                # Progress, not only safety: a budget with room must let the eviction through.
                if before and all(margin >= 1 for _, margin, _ in before):
                    raise InvariantViolation(
                        f"step {self.step_index}: the Eviction API refused {namespace}/{name} although its "
                        f"budget(s) allow it ({before}): {err.message}") from None
                raise
            self.evictions += 1
            for pdb, margin, how in before:
                if margin < 1:
                    raise InvariantViolation(
                        f"step {self.step_index}: evicting {namespace}/{name} took PDB {pdb} below its desired "
                        f"healthy count (margin before the eviction: {margin}; {how})")

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

    def _budget_margins(self, name: str, namespace: str) -> list[tuple[str, int, str]]:
        """(PDB, healthy - desired, how) for every budget covering a healthy pod about to be evicted."""
        pod = self.sim.kube.peek(POD, name, namespace)
        if pod is None or (pod["metadata"].get("deletionTimestamp")) or not (pod.get("spec") or {}).get("nodeName"):
            return []
        labels = pod["metadata"].get("labels") or {}
        margins = []
        for pdb in self._objects(PDB):
            selector = pdb["spec"]["selector"]["matchLabels"]
            if pdb["metadata"].get("namespace") == namespace and all(labels.get(k) == v for k, v in selector.items()):
                margins.append((pdb["metadata"]["name"], *self._margin(pdb, selector, namespace)))
        return margins

    def _margin(self, pdb: Mapping[str, Any], selector: Mapping[str, str], namespace: str) -> tuple[int, str]:
        """Kubernetes' disruption controller: healthy pods minus the desired healthy count."""
        nodes = {n["metadata"]["name"] for n in self._objects(NODE)}
        selected = [p for p in self._objects(POD) if p["metadata"].get("namespace") == namespace and _running(p)
                    and all((p["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())]
        healthy = sum(1 for p in selected if not p["metadata"].get("deletionTimestamp")
                      and (p.get("spec") or {}).get("nodeName") in nodes)
        spec = pdb["spec"]
        if "maxUnavailable" not in spec and isinstance(spec["minAvailable"], int):
            return healthy - spec["minAvailable"], f"{healthy} healthy, minAvailable {spec['minAvailable']}"
        # maxUnavailable or a percentage: the expected count is the scale of the pods' controllers (a ReplicaSet's
        # Deployment's); pods without a controller are left out of it, and with no pod expected nothing is allowed.
        expected, seen = 0, set()
        for pod in selected:
            owners = [o for o in pod["metadata"].get("ownerReferences") or [] if o.get("controller")]
            if not owners:
                continue
            replicaset = self.sim.kube.peek(KINDS_BY_NAME["ReplicaSet"], owners[0]["name"], namespace)
            parents = [o for o in ((replicaset or {}).get("metadata") or {}).get("ownerReferences") or []
                       if o.get("controller") and o.get("kind") == "Deployment"]
            controller = (self.sim.kube.peek(KINDS_BY_NAME["Deployment"], parents[0]["name"], namespace)
                          if parents else replicaset)
            if controller is None:
                return 0, f"the controller of pod {pod['metadata']['name']} is gone: the budget allows nothing"
            if controller["metadata"]["uid"] not in seen:
                seen.add(controller["metadata"]["uid"])
                expected += int(controller["spec"].get("replicas", 1))
        if expected == 0:
            return 0, "no pod it selects has a controller: it expects none and allows nothing"
        budget = spec.get("maxUnavailable", spec.get("minAvailable"))
        scaled = -(-int(budget[:-1]) * expected // 100) if isinstance(budget, str) else int(budget)
        desired = max(0, expected - scaled) if "maxUnavailable" in spec else scaled
        return healthy - desired, f"{healthy} healthy of {expected} expected, desired {desired}"

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
            totals = used.setdefault(node_name, {})
            for resource, amount in _requests(pod).items():
                totals[resource] = totals.get(resource, 0.0) + amount
        for node_name, totals in used.items():
            allocatable = nodes[node_name].get("status", {}).get("allocatable") or {}
            for resource, amount in totals.items():
                room = _quantity(allocatable[resource]) if resource in allocatable else 0.0
                if amount > room + 1e-9:
                    raise InvariantViolation(f"{where}: node {node_name} holds "
                                             f"{format_quantity(round(amount), resource)} {resource}, "
                                             f"allocatable {allocatable.get(resource, 'none')}")
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
        """Every limited resource of every NodePool, ``nodes`` counting NodeClaims. Every claim that holds or may
        still get an instance counts: launched and still booting, disrupted, draining or shutting down alike, so
        a replacement may not take the room of a node that is still there (stricter than Karpenter, which stops
        counting a node once it is marked for deletion and so overshoots while a blocked drain lasts). A claim
        not launched yet counts as the largest instance type it may still become."""
        used: dict[str, dict[str, float]] = {}
        for claim in self._objects(NODECLAIM):
            pool = used.setdefault((claim["metadata"].get("labels") or {}).get("karpenter.sh/nodepool", ""), {})
            _add(pool, (claim.get("status") or {}).get("capacity") or self._largest_option(claim))
            pool["nodes"] = pool.get("nodes", 0.0) + MILLI
        for nodepool in self._objects(NODEPOOL):
            totals = used.get(nodepool["metadata"]["name"], {})
            for resource, limit in ((nodepool.get("spec") or {}).get("limits") or {}).items():
                if totals.get(resource, 0.0) > _quantity(limit) + 1e-9:
                    raise InvariantViolation(f"{where}: NodePool {nodepool['metadata']['name']} has "
                                             f"{format_quantity(round(totals[resource]), resource)} {resource}, "
                                             f"limit {limit} (claims: {self._claims_of(nodepool['metadata']['name'])})")

    def _largest_option(self, claim: Mapping[str, Any]) -> dict[str, str]:
        """Per resource, the most any of the claim's instance-type options has (Karpenter's pessimistic count)."""
        options = [value for requirement in (claim.get("spec") or {}).get("requirements") or []
                   if requirement.get("key") == "node.kubernetes.io/instance-type"
                   and requirement.get("operator") == "In" for value in requirement.get("values") or []]
        if not options:
            raise InvariantViolation(f"NodeClaim {claim['metadata']['name']} has neither a capacity nor an "
                                     "instance-type requirement to count against its NodePool's limits")
        largest: dict[str, str] = {}
        for name in options:
            for resource, amount in self.capacities[name].items():
                if _quantity(amount) > _quantity(largest.get(resource, "0")):
                    largest[resource] = amount
        return largest

    def _claims_of(self, pool: str) -> list[str]:
        return sorted(f"{c['metadata']['name']} {((c.get('status') or {}).get('capacity') or {}).get('cpu', '?')} cpu"
                      + (" deleting" if c["metadata"].get("deletionTimestamp") else "")
                      for c in self._objects(NODECLAIM)
                      if (c["metadata"].get("labels") or {}).get("karpenter.sh/nodepool") == pool)


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
