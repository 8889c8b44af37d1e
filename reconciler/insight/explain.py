"""``explain pod`` / ``explain node``: the engine's own reasons, for one object, in plain words.

A pending pod is run through the provisioner exactly as the live reconciler would (same snapshot,
same instance types), so the reason shown is the one the engine acts on: per NodePool, the
requirement, taint, resource, spread/affinity, limit or volume that rejected it, with numbers.
A node gets the disruption engine's decision for this moment, plus a what-if: the scheduling
simulation of removing it (which pods fit where, what a replacement would cost).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.api.support_check import findings_of
from reconciler.disruption.consolidation import worst_launch_price
from reconciler.disruption.decide import decide
from reconciler.disruption.drift_detection import drift_reason
from reconciler.disruption.policy import consolidation_wait, settings_of
from reconciler.insight.errors import InsightError
from reconciler.insight.frames import RecordingSimulation
from reconciler.lifecycle.nodepool_types import instance_types_by_nodepool
from reconciler.model.durations import format_duration_short
from reconciler.model.labels import capacity_type_of
from reconciler.model.money import money
from reconciler.model.pod import Pod
from reconciler.model.quantity import format_quantity
from reconciler.provisioning.provisioner import plan as provision
from reconciler.scheduling import SchedulingContext, simulate
from reconciler.state.cluster import ClusterState
from reconciler.state.node import StateNode


@dataclass(slots=True)
class Explanation:
    subject: str  # "Pod default/web-0" or "Node ip-10-0-1-2"
    verdict: str  # one line: the answer
    reasons: list[str] = field(default_factory=list)  # the concrete blockers, one per line
    facts: list[str] = field(default_factory=list)  # what the answer is based on
    # Fields of the objects involved that Adze does not act on (``reconciler.api.support``).
    risks: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "verdict": self.verdict,
            "reasons": self.reasons,
            "facts": self.facts,
            "risks": self.risks,
        }

    def render(self) -> str:
        lines = [f"{self.subject}: {self.verdict}"]
        if self.reasons:
            lines.append("because:")
            lines += [
                f"      {reason.strip()}" if reason.startswith("  ") else f"  - {reason}"
                for reason in self.reasons
            ]
        if self.facts:
            lines.append("facts:")
            lines += [f"  - {fact}" for fact in self.facts]
        if self.risks:
            lines.append("risks:")
            lines += [f"  - {risk}" for risk in self.risks]
        return "\n".join(lines) + "\n"


def _describe(amounts: Mapping[str, int]) -> str:
    order = {"cpu": 0, "memory": 1, "pods": 9}
    names = sorted((n for n, v in amounts.items() if v), key=lambda n: (order.get(n, 5), n))
    return ", ".join(f"{n} {format_quantity(amounts[n], n)}" for n in names) or "nothing"


# Where the provisioner's reason starts a new part (it joins parts with "; ", as do some parts).
_PART_STARTS = ("NodePool ", "did not fit ", "no NodePool", "ignoring pod", "not attempted")


def _split_top_level(text: str, separator: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += char in "([{"
        depth -= char in ")]}"
        if depth == 0 and text.startswith(separator, index):
            parts.append(text[start:index])
            start = index + len(separator)
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def split_reason(reason: str) -> list[str]:
    """One line per NodePool / existing-node verdict of a provisioner reason."""
    lines: list[str] = []
    for part in _split_top_level(reason, "; "):
        if lines and not part.startswith(_PART_STARTS):
            lines[-1] += f"; {part}"
            continue
        prefix = "did not fit existing nodes ("
        if part.startswith(prefix) and part.endswith(")"):
            lines.append("did not fit existing nodes:")
            nodes = _split_top_level(part[len(prefix) : -1], "; node ")
            lines.extend(f"  {n if n.startswith('node ') else 'node ' + n}" for n in nodes)
            continue
        lines.append(part)
    return lines


async def _loaded(sim: RecordingSimulation) -> tuple[ClusterState, Any]:
    await sim.load()
    state = sim.cluster.state()
    return state, await instance_types_by_nodepool(sim.cloud, state, sim.settings)


def _namer() -> Any:
    counter = iter(range(1, 10**6))
    return lambda pool: f"{pool}-planned-{next(counter)}"


def _risks(sim: RecordingSimulation, manifests: Sequence[Mapping[str, Any] | None]) -> list[str]:
    """Fields of these objects Adze does not act on, as explain shows them."""
    present = [m for m in manifests if m is not None]
    return [f"not implemented by Adze: {f.describe()}" for f in findings_of(present, sim.settings.feature_gates)]


def _pool_objects(state: ClusterState, pools: Sequence[str]) -> list[Mapping[str, Any] | None]:
    """The NodePools' manifests and their EC2NodeClasses' (each class once)."""
    found: list[Mapping[str, Any] | None] = []
    classes: dict[str, Mapping[str, Any] | None] = {}
    for name in pools:
        pool = state.nodepools.get(name)
        found.append(state.nodepool_manifests.get(name))
        if pool is not None:
            classes.setdefault(str(pool.node_class_ref.get("name", "")), state.nodeclass(pool))
    return found + list(classes.values())


async def explain_pod(sim: RecordingSimulation, key: str) -> Explanation:
    explanation = await _explain_pod(sim, key)
    state = sim.cluster.state()
    if not (state.pods.get(key) and state.pods[key].node_name):
        explanation.risks = _risks(sim, _pool_objects(state, sorted(state.nodepools)))
    return explanation


async def _explain_pod(sim: RecordingSimulation, key: str) -> Explanation:
    if key.count("/") != 1:
        raise InsightError(f"pod: {key!r} must be NAMESPACE/NAME")
    state, types = await _loaded(sim)
    pod = state.pods.get(key)
    if pod is None:
        close = sorted(k for k in state.pods if k.split("/")[1].startswith(key.split("/")[1][:3]))[:5]
        hint = f" (similar: {', '.join(close)})" if close else ""
        raise InsightError(f"pod: {key} is not in the snapshot{hint}")
    subject = f"Pod {key}"
    facts = pod_facts(pod, state.pod_manifests.get(key) or {})
    if pod.node_name:
        return Explanation(subject, f"running on node {pod.node_name}; nothing to explain", facts=facts)
    if not pod.is_provisionable():
        return Explanation(
            subject, "pending, but Adze does not provision for it", [_not_provisionable(pod)], facts
        )
    plan = provision(state, types, sim.settings, sim.now, _namer())
    if key in plan.existing:
        node = plan.existing[key]
        return Explanation(
            subject,
            f"fits existing capacity on {node}; kube-scheduler can bind it, no new node is needed",
            facts=facts,
        )
    for claim in plan.nodeclaims:
        if key in claim.pods:
            more = len(claim.instance_type_options) - 5
            options = ", ".join(claim.instance_type_options[:5]) + (f" and {more} more" if more > 0 else "")
            return Explanation(
                subject,
                f"schedulable: Adze would launch a NodeClaim from NodePool {claim.nodepool} for it "
                f"(with {len(claim.pods)} pod(s); instance types {options})",
                facts=facts,
            )
    reason = plan.pending.get(key, "no reason recorded by the provisioner")
    return Explanation(
        subject, "cannot be scheduled on existing or new capacity", split_reason(reason), facts
    )


def _not_provisionable(pod: Pod) -> str:
    if pod.scheduling_gated:
        return "the pod has schedulingGates; kube-scheduler (and Adze) wait until they are removed"
    if pod.nominated_node_name:
        return f"kube-scheduler nominated node {pod.nominated_node_name} for it (preemption in progress)"
    if pod.is_daemonset_pod:
        return "it is a DaemonSet pod: the DaemonSet controller places it, Adze only reserves room for it"
    if pod.is_static:
        return "it is a static (mirror) pod of a node"
    if not pod.is_active:
        return "it is terminating or finished"
    if pod.unschedulable_condition is False:
        return "kube-scheduler reports it schedulable (PodScheduled is not False/Unschedulable)"
    return "it is not marked Unschedulable by kube-scheduler"


def pod_facts(pod: Pod, manifest: Mapping[str, Any]) -> list[str]:
    spec = manifest.get("spec") or {}
    facts = [f"requests {_describe(pod.requests)}"]
    if spec.get("nodeSelector"):
        facts.append("nodeSelector " + ", ".join(f"{k}={v}" for k, v in sorted(spec["nodeSelector"].items())))
    terms = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or []
    for index, term in enumerate(terms):
        expressions = "; ".join(
            f"{e.get('key')} {e.get('operator')} {','.join(map(str, e.get('values') or []))}".strip()
            for e in term.get("matchExpressions") or []
        )
        facts.append(f"required node affinity term {index}: {expressions or '(empty)'}")
    for constraint in spec.get("topologySpreadConstraints") or []:
        facts.append(
            f"topology spread on {constraint.get('topologyKey')} maxSkew {constraint.get('maxSkew')} "
            f"({constraint.get('whenUnsatisfiable', 'DoNotSchedule')})"
        )
    if pod.anti_affinity_required:
        facts.append(f"{len(pod.anti_affinity_required)} required pod anti-affinity term(s)")
    if pod.affinity_required:
        facts.append(f"{len(pod.affinity_required)} required pod affinity term(s)")
    if pod.tolerations:
        facts.append(
            "tolerates "
            + ", ".join(
                f"{t.key or '*'}{'=' + t.value if t.value else ''}:{t.effect or '*'}" for t in pod.tolerations
            )
        )
    if pod.volumes:
        facts.append("volumes " + ", ".join(f"PVC {pod.namespace}/{v.claim_name}" for v in pod.volumes))
    return facts


async def explain_node(sim: RecordingSimulation, name: str) -> Explanation:
    explanation = await _explain_node(sim, name)
    state = sim.cluster.state()
    node = state.state_node(name)
    if node is not None and node.managed:
        claim = state.nodeclaim_manifests.get(node.nodeclaim_name) if node.nodeclaim_name else None
        explanation.risks = _risks(sim, [claim, *_pool_objects(state, [node.nodepool])])
    return explanation


async def _explain_node(sim: RecordingSimulation, name: str) -> Explanation:
    state, types = await _loaded(sim)
    node = state.state_node(name)
    if node is None:
        raise InsightError(f"node: {name} is neither a Node nor a NodeClaim in the snapshot")
    subject = f"Node {node.name}"
    facts = node_facts(sim, node)
    if not node.managed:
        return Explanation(
            subject,
            "not managed by Adze (no NodeClaim, no karpenter.sh/nodepool label): never disrupted",
            facts=facts,
        )
    decision = decide(state, types, sim.settings, sim.now)
    command = decision.command
    if command is not None and node.name in command.node_names:
        replacements = "; ".join(
            f"{r.name} ({', '.join(r.instance_type_options[:3])} at {money(r.price, month=False)})"
            for r in command.replacements
        )
        verdict = f"would be disrupted now: {command.reason} by {command.method}, {command.action}"
        reasons = [f"saves {money(command.savings_per_hour)}"]
        reasons += [f"replacement(s): {replacements}"] if replacements else []
        return Explanation(subject, verdict, reasons, facts)
    mine = [e for e in decision.explanations if e.node == node.name]
    reasons = [f"{e.code}{f' ({e.method})' if e.method else ''}: {e.message}" for e in mine]
    if command is not None:
        reasons.append(f"this pass acts on other nodes first: {command.describe()}")
    reasons += _what_if_removed(state, types, sim, node)
    verdict = "not disrupted now" if mine or command is not None else "no disruption applies now"
    return Explanation(subject, verdict, reasons, facts)


def _priced(sim: RecordingSimulation, node: StateNode, capacity_type: str) -> str:
    """"at $x/h [source]", or that no offering prices the node (never a made-up $0)."""
    price = sim.cloud.price_of(node.instance_type, node.zone, capacity_type, nodepool=node.nodepool)
    if price is None:
        return "unpriced (no such offering in the catalogue)"
    source = sim.cloud.price_source_of(node.instance_type, node.zone, capacity_type, nodepool=node.nodepool)
    return f"at {money(price, month=False, source=source or None)}"


def node_facts(sim: RecordingSimulation, node: StateNode) -> list[str]:
    capacity_type = capacity_type_of(node.labels)  # a managed node group's own label too
    facts = [
        f"{node.instance_type or '?'} {capacity_type or '?'} in {node.zone or '?'} "
        f"{_priced(sim, node, capacity_type)}, NodePool {node.nodepool or '(none)'}",
        f"requests {_describe(node.pod_requests)} of allocatable {_describe(node.allocatable)}",
        f"{len(node.reschedulable_pods())} pod(s) that would move, {len(node.pods)} in total",
    ]
    state = sim.cluster.state()
    pool = state.nodepools.get(node.nodepool)
    if pool is not None and node.nodeclaim is not None:
        settings = settings_of(pool)
        wait = consolidation_wait(node, settings, sim.now)
        after = "Never" if settings.consolidate_after is None else format_duration_short(settings.consolidate_after)
        if wait is None:
            facts.append(f"consolidateAfter {after} has elapsed ({settings.policy})")
        elif settings.consolidate_after is not None:
            facts.append(f"consolidateAfter {after}: {format_duration_short(round(wait.total_seconds()))} left")
        drifted = drift_reason(
            pool, node.nodeclaim, now=sim.now, nodeclass=state.nodeclass(pool), node_labels=node.labels
        )
        facts.append(f"drifted: {drifted[0]} ({drifted[1]})" if drifted else "not drifted")
    return facts


def _what_if_removed(state: ClusterState, types: Any, sim: RecordingSimulation, node: StateNode) -> list[str]:
    """What the scheduler says about this node's pods if it went away (Adze's own simulation)."""
    pods: Sequence[Pod] = node.reschedulable_pods()
    if not pods:
        return ["it is empty: deleting it needs no room elsewhere"]
    context = SchedulingContext.build(state, types, sim.settings)
    result = simulate(state, types, sim.settings, sim.now, remove={node.name}, include_pending=False, context=context)
    lines = []
    failed = {k: v for k, v in result.errors.items() if k in {p.key for p in pods}}
    for key, reason in sorted(failed.items()):
        lines.append(f"if removed, pod {key} would not fit anywhere: {reason}")
    if failed:
        return lines
    price = sim.cloud.price_of(node.instance_type, node.zone, capacity_type_of(node.labels), nodepool=node.nodepool)
    if not result.new_claims:
        lines.append(
            f"if removed, all {len(pods)} pod(s) fit on other nodes "
            f"({', '.join(sorted(set(result.existing.values())))})"
        )
        return lines
    # Consolidation compares a replacement's worst case (the dearest offering of the capacity type it would launch)
    # with the node's price, not its cheapest offering: say the same, so the two never disagree.
    worst, cheapest_type = _worst_case(context, result.new_claims)
    options = ", ".join(result.new_claims[0].instance_type_names[:3])
    if price is None:
        lines.append(
            f"a replacement ({options}) would cost up to {money(worst, month=False)}; this node has no price to compare"
        )
    elif worst >= price:
        lines.append(
            f"replacement not cheaper: the pods need {len(result.new_claims)} new node(s), at best {cheapest_type} "
            f"at up to {money(worst, month=False)} (the dearest offering it may launch on, which consolidation "
            f"compares) vs {money(price, month=False)} now (difference {money(worst - price, month=False, signed=True)}"
            "; a replacement must cost less)"
        )
    else:
        lines.append(
            f"a replacement ({cheapest_type}) would cost at most {money(worst, month=False)} vs "
            f"{money(price, month=False)} now"
        )
    return lines


def _worst_case(context: SchedulingContext, claims: Sequence[Any]) -> tuple[float, str]:
    """The replacement's price as consolidation sees it: per claim the least worst-case launch price among its
    options, summed; and the type of the first claim that has it."""
    total, first = 0.0, ""
    for claim in claims:
        priced = sorted((worst_launch_price(context.index.info(it), claim.requirements), it.name)
                        for it in claim.instance_types)
        if not priced:
            return math.inf, first
        total += priced[0][0]
        first = first or priced[0][1]
    return total, first
