"""The simulator's ``disrupt``, ``expire`` and ``interrupt`` steps.

Decisions come from Adze's pure disruption engine; execution goes through the
same ``CommandExecutor`` and ``Terminator`` the live controllers use. The
simulator adds the validation wait to its virtual clock and plays the kubelet
for replacements.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from reconciler.cloud.types import InstanceNotFoundError
from reconciler.disruption.controller import decide
from reconciler.disruption.types import VALIDATED_METHODS
from reconciler.disruption.validation import validate
from reconciler.interruption import actions
from reconciler.interruption.actions import ActionKind
from reconciler.interruption.messages import Kind, Message
from reconciler.kube.api import NODE, NODECLAIM
from reconciler.lifecycle.expiration import expired
from reconciler.lifecycle.orchestration import CommandExecutor
from reconciler.model import labels as wk
from reconciler.sim import engine
from reconciler.sim.scenario import ScenarioError

if TYPE_CHECKING:
    from reconciler.sim.cluster import SimulatedCluster


# How long an interrupted spot offering stays unavailable (the live provider's unavailable-offerings TTL).
UNAVAILABLE_AFTER_INTERRUPTION = timedelta(minutes=3)


async def _decide(cluster: SimulatedCluster) -> Any:
    sim = cluster.sim
    state = cluster.state()
    types = await engine.types_by_nodepool(state, sim.cloud)
    return decide(state, types, sim.settings, sim.now, name_for=sim.names)


async def disrupt_once(cluster: SimulatedCluster, record: dict[str, Any]) -> bool:
    """One disruption pass; True when a command was carried out (so ``until: stable`` goes on)."""
    sim = cluster.sim
    decision = await _decide(cluster)
    # Every pass's explanations belong to the result document; a caller reading only the final,
    # command-less pass (plan) keeps memory flat over thousands of passes without them.
    explained = decision.command is None or getattr(sim, "explain_every_pass", True)
    for explanation in decision.explanations if explained else ():
        record["events"].append(
            {"object": f"Node/{explanation.node}", "reason": "DisruptionBlocked",
             "message": f"{explanation.code}: {explanation.message}",
             "code": explanation.code, "nodepool": explanation.nodepool, "method": explanation.method}
        )
    command = decision.command
    if command is None:
        return False
    if command.method in VALIDATED_METHODS:
        sim.advance(sim.settings.consolidation_validation_wait)
        await cluster.settle(record)
        state = cluster.state()
        types = await engine.types_by_nodepool(state, sim.cloud)
        checked = validate(command, state, types, sim.settings, sim.now)
        if not checked.valid or checked.command is None:
            record["events"].append(
                {"object": f"Node/{command.candidates[0].name}", "reason": "DisruptionAborted",
                 "message": checked.reason}
            )
            return False
        command = checked.command
    executor = CommandExecutor(sim.kube, sim.cloud)
    flight = await executor.start(command, sim.now)
    if flight.state == "aborted":
        record["events"].append(
            {"object": f"Node/{command.candidates[0].name}", "reason": "DisruptionAborted", "message": flight.message}
        )
        return False
    for name in flight.launched:
        await cluster.boot(name)
    flight = await executor.advance(flight, sim.now)
    for candidate in command.candidates:
        record["disrupted"].append(
            {
                "node": candidate.name,
                "nodeclaim": candidate.nodeclaim,
                "nodepool": candidate.pool,
                "reason": command.reason,
                "method": command.method,
                "action": command.action,
                "replacements": [r.name for r in command.replacements],
                "savingsPerHour": command.savings_per_hour if candidate is command.candidates[0] else 0.0,
            }
        )
    for replacement, name in zip(command.replacements, flight.launched, strict=False):
        claim = sim.kube.peek(NODECLAIM, name) or {}
        labels = (claim.get("metadata") or {}).get("labels") or {}
        record["launched"].append(
            {
                "nodeclaim": name,
                "nodepool": replacement.nodepool,
                "node": name,
                "instanceType": labels.get(wk.INSTANCE_TYPE),
                "zone": labels.get(wk.ZONE),
                "capacityType": labels.get(wk.CAPACITY_TYPE),
                "price": sim.cloud.price_of(
                    labels.get(wk.INSTANCE_TYPE, ""), labels.get(wk.ZONE, ""), labels.get(wk.CAPACITY_TYPE, "")
                ),
                "priceSource": sim.cloud.price_source_of(
                    labels.get(wk.INSTANCE_TYPE, ""), labels.get(wk.ZONE, ""), labels.get(wk.CAPACITY_TYPE, "")
                ) or None,
                "instanceTypeOptions": list(replacement.instance_type_options),
                "pods": list(replacement.pods),
            }
        )
    await cluster.finish_terminations(record)
    return True


async def _delete_and_reschedule(
    cluster: SimulatedCluster, claims: list[str], reason: str, record: dict[str, Any]
) -> None:
    """Forceful deletion (expiration, interruption): no pre-spun replacement; the provisioner reacts."""
    sim = cluster.sim
    for claim_name in claims:
        claim = sim.kube.peek(NODECLAIM, claim_name)
        if claim is None or claim["metadata"].get("deletionTimestamp"):
            continue
        node_name = (claim.get("status") or {}).get("nodeName") or claim_name
        await sim.kube.delete(NODECLAIM, claim_name)
        record["disrupted"].append(
            {"node": node_name, "nodeclaim": claim_name, "reason": reason, "method": reason.lower(),
             "action": "delete", "replacements": [], "savingsPerHour": 0.0}
        )
    before = {item["nodeclaim"] for item in record["launched"]}
    await cluster.provision(record, launch_ready=True)
    launched = [item["nodeclaim"] for item in record["launched"] if item["nodeclaim"] not in before]
    for item in record["disrupted"]:
        if item["reason"] == reason and not item["replacements"]:
            item["replacements"] = launched
    await cluster.drain_out(record)
    sim.advance(0)
    await cluster.settle(record)


async def expire(cluster: SimulatedCluster, record: dict[str, Any]) -> None:
    sim = cluster.sim
    claims = [item.nodeclaim for item in expired(sim.kube.objects(NODECLAIM), sim.now)]
    await _delete_and_reschedule(cluster, claims, "Expired", record)


async def interrupt(cluster: SimulatedCluster, node_name: str, kind: str, record: dict[str, Any], *, path: str) -> None:
    sim = cluster.sim
    node = sim.kube.peek(NODE, node_name)
    if node is None:
        raise ScenarioError(f"{path}: no node named {node_name!r}")
    claim = engine.nodeclaim_for_node(sim.kube, node)
    if claim is None:
        record["events"].append(
            {"object": f"Node/{node_name}", "reason": "InterruptionIgnored",
             "message": f"{kind}: the node is not managed by Adze (no NodeClaim)"}
        )
        return
    # The live controller's decision, from the message the queue would carry for this instance.
    nodeclaim = sim.kube.peek(NODECLAIM, claim) or {}
    provider_id = str((nodeclaim.get("status") or {}).get("providerID") or "")
    instance_id = provider_id.rsplit("/", 1)[-1] or claim
    [action] = actions.decide(Message(Kind(kind), (instance_id,), detail_type=kind), {instance_id: nodeclaim},
                              rebalance=sim.settings.rebalance_handling)
    record["events"].append({"object": f"Node/{node_name}", "reason": action.reason, "message": action.message})
    if action.kind is ActionKind.NO_OP:
        return
    if action.unavailable_offering is not None:
        capacity_type, instance_type, zone = action.unavailable_offering
        with contextlib.suppress(KeyError):
            sim.cloud.mark_unavailable(instance_type, zone, capacity_type,
                                       until=sim.now + UNAVAILABLE_AFTER_INTERRUPTION)
    if kind == "instance_terminated":
        await _machine_died(cluster, node, claim)
    # Delete (or, for a rebalance under "drain", cordon and drain): the termination drains either way.
    await _delete_and_reschedule(cluster, [claim], "Interrupted", record)


async def _machine_died(cluster: SimulatedCluster, node: Any, claim_name: str) -> None:
    """EC2 already terminated the instance: it is gone from the cloud and its kubelet stops reporting."""
    sim = cluster.sim
    claim = sim.kube.peek(NODECLAIM, claim_name)
    provider_id = ((claim or {}).get("status") or {}).get("providerID")
    if provider_id:
        with contextlib.suppress(InstanceNotFoundError):
            await sim.cloud.delete(provider_id)
    conditions = [c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") != "Ready"]
    conditions.append({"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                       "message": "Kubelet stopped posting node status."})
    await sim.kube.patch(NODE, node["metadata"]["name"], {"status": {"conditions": conditions}},
                         subresource="status")

