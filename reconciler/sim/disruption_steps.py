"""The simulator's ``disrupt``, ``expire`` and ``interrupt`` steps, called by the runner.

Decisions come from Adze's pure disruption engine; a command is carried out by
the live controller's own loop (``lifecycle.disruption_run.carry_out``: validation
wait, validate, start, advance) on the virtual clock, through the same
``CommandExecutor`` and ``Terminator``; an interruption goes through the live
interruption path (message parsed, decided, executed). The simulator plays the
kubelet for replacements.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.cloud.aws.instances import parse_provider_id
from reconciler.cloud.types import InstanceNotFoundError, InstanceType
from reconciler.disruption.decide import decide
from reconciler.disruption.types import Command
from reconciler.interruption import actions
from reconciler.interruption.actions import ActionKind
from reconciler.interruption.execution import execute, nodeclaims_by_instance
from reconciler.interruption.messages import Kind, MessageParseError, eventbridge_event, parse
from reconciler.kube.api import NODE, NODECLAIM, Manifest
from reconciler.lifecycle.capacityreservation import capacity_block_expirations
from reconciler.lifecycle.disruption_run import carry_out
from reconciler.lifecycle.expiration import expired
from reconciler.lifecycle.nodepool_types import instance_types_by_nodepool
from reconciler.lifecycle.orchestration import CommandExecutor, InFlightCommand
from reconciler.model import labels as wk
from reconciler.sim import engine
from reconciler.sim.cluster import SimulatedCluster
from reconciler.sim.scenario import ScenarioError
from reconciler.state.cluster import ClusterState

# How often an in-flight command is advanced while its replacements initialize (the live default).
COMMAND_POLL_SECONDS = 1.0
# Result-document reasons of forceful deletions (docs/scenario-format.md); Karpenter's own reasons go in events.
EXPIRED = "Expired"
INTERRUPTED = "Interrupted"


async def _decide(cluster: SimulatedCluster) -> Any:
    env = cluster.env
    await cluster.stamp_pod_events()
    state = cluster.state()
    types = await instance_types_by_nodepool(env.cloud, state, env.settings)
    return decide(state, types, env.settings, env.now, name_for=env.names)


class _SimReporter:
    """The simulator's side of the shared command loop (``lifecycle.disruption_run``): the result document,
    and the kubelet for replacements (booted as soon as they are launched)."""

    def __init__(self, cluster: SimulatedCluster, record: dict[str, Any]) -> None:
        self.cluster = cluster
        self.record = record
        self.command: Command | None = None  # as validated and started

    async def abandoned(self, command: Command, reason: str) -> None:
        self.record["events"].append(
            {"object": f"Node/{command.candidates[0].name}", "reason": "DisruptionAborted", "message": reason})

    def hold(self, command: Command) -> bool:
        return True  # one command at a time: no provisioning pass runs beside it

    def release(self, command: Command) -> None:
        return None

    async def starting(self, command: Command) -> None:
        return None

    async def started(self, command: Command, flight: InFlightCommand) -> None:
        self.command = command
        for name in flight.launched:
            await self.cluster.boot(name)

    async def finished(self, command: Command, flight: InFlightCommand) -> None:
        if flight.state == "aborted":
            self.record["events"].append({"object": f"Node/{command.candidates[0].name}",
                                          "reason": "DisruptionAborted", "message": flight.message})


async def disrupt_once(cluster: SimulatedCluster, record: dict[str, Any]) -> bool:
    """One disruption pass; True when a command was carried out (so ``until: stable`` goes on)."""
    env = cluster.env
    decision = await _decide(cluster)
    # Every pass's explanations belong to the result document; a caller reading only the final,
    # command-less pass (plan) keeps memory flat over thousands of passes without them.
    explained = decision.command is None or env.options.explain_every_pass
    for explanation in decision.explanations if explained else ():
        record["events"].append(
            {"object": f"Node/{explanation.node}", "reason": "DisruptionBlocked",
             "message": f"{explanation.code}: {explanation.message}",
             "code": explanation.code, "nodepool": explanation.nodepool, "method": explanation.method}
        )
    if decision.command is None:
        return False

    async def sleep(seconds: float) -> None:  # virtual time: terminations and pod events go on meanwhile
        env.advance(seconds)
        await cluster.settle(record)

    async def fresh_view() -> tuple[ClusterState, Mapping[str, Sequence[InstanceType]]]:
        state = cluster.state()
        return state, await instance_types_by_nodepool(env.cloud, state, env.settings)

    reporter = _SimReporter(cluster, record)
    flight = await carry_out(decision.command, CommandExecutor(env.kube, env.cloud), reporter,
                             settings=env.settings, now=env.clock, sleep=sleep, fresh_view=fresh_view,
                             poll=COMMAND_POLL_SECONDS)
    command = reporter.command
    if flight is None or flight.state == "aborted" or command is None:
        return False
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
        claim = env.kube.peek(NODECLAIM, name) or {}
        labels = (claim.get("metadata") or {}).get("labels") or {}
        record["launched"].append(
            {
                "nodeclaim": name,
                "nodepool": replacement.nodepool,
                "node": name,
                "instanceType": labels.get(wk.INSTANCE_TYPE),
                "zone": labels.get(wk.ZONE),
                "capacityType": labels.get(wk.CAPACITY_TYPE),
                "price": env.cloud.price_of(
                    labels.get(wk.INSTANCE_TYPE, ""), labels.get(wk.ZONE, ""), labels.get(wk.CAPACITY_TYPE, ""),
                    nodepool=replacement.nodepool,
                ),
                "priceSource": env.cloud.price_source_of(
                    labels.get(wk.INSTANCE_TYPE, ""), labels.get(wk.ZONE, ""), labels.get(wk.CAPACITY_TYPE, ""),
                    nodepool=replacement.nodepool,
                ) or None,
                "instanceTypeOptions": list(replacement.instance_type_options),
                "pods": list(replacement.pods),
            }
        )
    await cluster.finish_terminations(record)
    return True


def _record_deleted(record: dict[str, Any], claim: Manifest, reason: str) -> None:
    name = claim["metadata"]["name"]
    node_name = (claim.get("status") or {}).get("nodeName") or name
    record["disrupted"].append(
        {"node": node_name, "nodeclaim": name, "reason": reason, "method": reason.lower(),
         "action": "delete", "replacements": [], "savingsPerHour": 0.0}
    )


async def _reschedule(cluster: SimulatedCluster, reason: str, record: dict[str, Any]) -> None:
    """After a forceful deletion (expiration, interruption) there is no pre-spun replacement: the provisioner
    reacts to the pods the termination displaces."""
    before = {item["nodeclaim"] for item in record["launched"]}
    await cluster.provision(record, launch_ready=True)
    launched = [item["nodeclaim"] for item in record["launched"] if item["nodeclaim"] not in before]
    for item in record["disrupted"]:
        if item["reason"] == reason and not item["replacements"]:
            item["replacements"] = launched
    await cluster.drain_out(record)
    cluster.env.advance(0)
    await cluster.settle(record)


async def expire(cluster: SimulatedCluster, record: dict[str, Any]) -> None:
    """NodeClaims past ``expireAfter``, and those in capacity blocks within 40 minutes of their end (the
    ``capacityreservation.expiration`` controller: drained ahead of EC2's reclaim)."""
    env = cluster.env
    for item in expired(env.kube.objects(NODECLAIM), env.now):
        claim = env.kube.peek(NODECLAIM, item.nodeclaim)
        if claim is None or claim["metadata"].get("deletionTimestamp"):
            continue
        await env.kube.delete(NODECLAIM, item.nodeclaim)
        _record_deleted(record, claim, EXPIRED)
    for name in await capacity_block_expirations(env.kube.objects(NODECLAIM), env.cloud, env.now):
        claim = env.kube.peek(NODECLAIM, name)
        if claim is None:
            continue
        await env.kube.delete(NODECLAIM, name)
        _record_deleted(record, claim, EXPIRED)
        record["disrupted"][-1]["method"] = "capacity-block-expiration"
        record["events"].append({"object": f"NodeClaim/{name}", "reason": "CapacityBlockExpiring",
                                 "message": "its capacity block ends within 40 minutes: draining ahead of EC2's "
                                            "reclaim"})
    await _reschedule(cluster, EXPIRED, record)


async def interrupt(cluster: SimulatedCluster, node_name: str, kind: str, record: dict[str, Any], *, path: str) -> None:
    """The message the queue would carry for the node's instance, through the live controller's path: parsed,
    decided (``interruption.actions.decide``) and carried out (``interruption.execution.execute``)."""
    env = cluster.env
    node = env.kube.peek(NODE, node_name)
    if node is None:
        raise ScenarioError(f"{path}: no node named {node_name!r}")
    claim_name = engine.nodeclaim_for_node(env.kube, node) or ""
    claim = env.kube.peek(NODECLAIM, claim_name) if claim_name else None
    if claim is None:
        _ignored(record, node_name, f"{kind}: the node is not managed by Adze (no NodeClaim)")
        return
    try:
        _, instance_id = parse_provider_id(str((claim.get("status") or {}).get("providerID") or ""))
        message = parse(json.dumps(eventbridge_event(Kind(kind), instance_id, env.now)))
    except (ValueError, MessageParseError) as err:  # the queue never carries such a message
        _ignored(record, node_name, f"{kind}: {err}")
        return
    index = await nodeclaims_by_instance(env.kube)
    for action in actions.decide(message, index, rebalance=env.settings.rebalance_handling):
        record["events"].append({"object": f"Node/{node_name}", "reason": action.reason, "message": action.message})
        if message.kind is Kind.INSTANCE_TERMINATED:
            # EC2 terminated it, whatever the controller decides (even "already being deleted": a drain held
            # by a PDB then finds the machine gone and releases the node).
            await _machine_died(cluster, node, claim_name)
        await execute(env.kube, action, env.now, env.cloud.unavailable)
        if action.kind is not ActionKind.NO_OP:
            _record_deleted(record, claim, INTERRUPTED)
    if any(item["reason"] == INTERRUPTED for item in record["disrupted"]):
        await _reschedule(cluster, INTERRUPTED, record)
    elif message.kind is Kind.INSTANCE_TERMINATED:
        await cluster.settle(record)  # the deletion already under way goes on, without a drain now


def _ignored(record: dict[str, Any], node_name: str, why: str) -> None:
    record["events"].append({"object": f"Node/{node_name}", "reason": "InterruptionIgnored", "message": why})


async def _machine_died(cluster: SimulatedCluster, node: Any, claim_name: str) -> None:
    """EC2 already terminated the instance: it is gone from the cloud and its kubelet stops reporting."""
    env = cluster.env
    claim = env.kube.peek(NODECLAIM, claim_name)
    provider_id = ((claim or {}).get("status") or {}).get("providerID")
    if provider_id:
        gone = getattr(env.cloud, "terminated_now", None)  # the simulated cloud skips its shutdown time
        with contextlib.suppress(InstanceNotFoundError):
            await (gone(provider_id) if gone is not None else env.cloud.delete(provider_id))
    conditions = [c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") != "Ready"]
    conditions.append({"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                       "message": "Kubelet stopped posting node status."})
    await env.kube.patch(NODE, node["metadata"]["name"], {"status": {"conditions": conditions}},
                         subresource="status")

