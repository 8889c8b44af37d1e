"""The simulator's ``nodeCondition`` and ``repair`` steps (additive scenario keys).

``nodeCondition: {node, type, status[, reason, message]}`` plays the kubelet or the EKS node monitoring
agent: the Node reports that condition from now on (its ``lastTransitionTime`` moves only when the
status changes). ``repair: {}`` runs node auto repair (gate ``NodeRepair``) once at the current clock
with the live controller's decisions (``lifecycle.repair``): nodes unhealthy past their toleration are
deleted without a drain, the displaced pods are provisioned for, and each repair is listed under the
step's optional ``repaired`` key; waits and the 20 % guard show as events.
"""

from __future__ import annotations

from typing import Any

from reconciler.kube.api import NODE, NODECLAIM, NotFoundError
from reconciler.lifecycle.repair import decide_repairs, delete_forcefully
from reconciler.model.meta import format_time
from reconciler.sim import engine
from reconciler.sim.cluster import SimulatedCluster
from reconciler.sim.scenario import ScenarioError


async def node_condition(cluster: SimulatedCluster, args: dict[str, Any], record: dict[str, Any], *,
                         path: str) -> None:
    env = cluster.env
    node = env.kube.peek(NODE, args["node"])
    if node is None:
        raise ScenarioError(f"{path}.node: no node named {args['node']!r}")
    stamp = format_time(env.now)
    conditions = [dict(c) for c in (node.get("status") or {}).get("conditions") or []]
    previous = next((c for c in conditions if c.get("type") == args["type"]), None)
    since = stamp if previous is None or previous.get("status") != args["status"] else \
        previous.get("lastTransitionTime", stamp)
    desired = {"type": args["type"], "status": args["status"], "reason": args.get("reason", ""),
               "message": args.get("message", ""), "lastHeartbeatTime": stamp, "lastTransitionTime": since}
    conditions = [c for c in conditions if c.get("type") != args["type"]] + [desired]
    await env.kube.patch(NODE, args["node"], {"status": {"conditions": conditions}}, subresource="status")
    record["events"].append({"object": f"Node/{args['node']}", "reason": "NodeCondition",
                             "message": f"{args['type']}={args['status']}"
                                        + (f" ({args['reason']})" if args.get("reason") else "")})


async def repair(cluster: SimulatedCluster, record: dict[str, Any]) -> None:
    env = cluster.env
    nodes = env.kube.objects(NODE)
    pairs = []
    for node in nodes:
        claim_name = engine.nodeclaim_for_node(env.kube, node)
        claim = env.kube.peek(NODECLAIM, claim_name) if claim_name else None
        if claim is not None:
            pairs.append((claim, node))
    repaired = record.setdefault("repaired", [])
    for decision in decide_repairs(pairs, nodes, env.now):
        if decision.action != "repair":
            reason = "NodeRepairBlocked" if decision.action == "blocked" else "NodeRepairWaiting"
            record["events"].append({"object": f"Node/{decision.node}", "reason": reason,
                                     "message": decision.message})
            continue
        claim = env.kube.peek(NODECLAIM, decision.nodeclaim)
        if claim is None:
            continue
        try:
            await delete_forcefully(env.kube, claim, env.now)
        except NotFoundError:
            continue
        repaired.append({"node": decision.node, "nodeclaim": decision.nodeclaim, "nodepool": decision.nodepool,
                         "condition": decision.unhealthy.condition, "status": decision.unhealthy.status,
                         "since": format_time(decision.unhealthy.since)})
        record["events"].append({"object": f"NodeClaim/{decision.nodeclaim}", "reason": "NodeRepair",
                                 "message": decision.message})
    if repaired:
        # As after an expiration: the provisioner plans a home for the pods of the deleting nodes, then the
        # termination deletes them at once (no eviction) and their workloads re-create them there.
        # The pods' deletion takes a second of grace (the time left before the termination timestamp, at least
        # 1 s): simulated time runs on until they are gone, as in a disrupt step.
        await cluster.provision(record, launch_ready=True)
        await cluster.finish_terminations(record)
        await cluster.settle(record)
