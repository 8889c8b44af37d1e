"""``plan``: what a NodePool change would do to a cluster, from a snapshot, with the real engine.

Three simulations of the snapshot (the simulator's cloud prices every node, so every cost is a
sum of simulated offerings):

1. **current**: the snapshot as it is (cost, node mix, pods already pending);
2. **proposed**: the proposed NodePools applied, then the reconciler left alone until stable:
   NodeClaims of removed NodePools are deleted, then provisioning and disruption passes run, and
   the virtual clock jumps to the next moment something time-bound could change (a budget window
   opening or closing, a consolidateAfter or nomination running out) until nothing is left
   waiting or ``horizon`` is reached;
3. **floor**: the proposed NodePools with every pod of a managed node made pending and one
   provisioning pass: what a fresh cluster would cost under the new config.

The stability loop (``stability``) keeps the disruption engine's explanations for the nodes it
leaves alone; those are the budget/PDB/do-not-disrupt blockers of the report.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from reconciler.api.support_check import Finding, findings_of
from reconciler.collector import free_dropped
from reconciler.disruption.budgets import UNLIMITED, BudgetError, allowance, parse_budgets
from reconciler.disruption.drift_detection import drift_reason
from reconciler.insight.catalog import narrowed_catalog
from reconciler.insight.frames import (
    Frame,
    RecordingSimulation,
    node_mix,
    node_rows,
    pool_shares,
    price_sources,
    unpriced,
)
from reconciler.insight.happenings import as_documents, happenings
from reconciler.insight.plan.impact import evictions_by_workload, replicaset_owners, workload_of
from reconciler.insight.plan.proposal import (
    PoolChange,
    apply_proposal,
    fresh_provision_objects,
    nodeclaims_of_pools,
)
from reconciler.insight.plan.stability import Blocker, run_to_stability
from reconciler.insight.plan.timeline import SIMULATED_DRAIN, TimedCommand, Timeline, settled_at
from reconciler.insight.snapshot import observed_region
from reconciler.insight.sources import ProposedConfig, Snapshot
from reconciler.kube.api import Manifest
from reconciler.model.meta import format_time
from reconciler.scheduling.context import nodeclass_problem
from reconciler.sim.environment import SimOptions
from reconciler.sim.workloads import deployment_of, replicas_of

DEFAULT_HORIZON = timedelta(days=7)


@dataclass(slots=True)
class CostSummary:
    cost_per_hour: float
    nodes: int
    node_mix: list[dict[str, Any]]
    pending: dict[str, str]
    by_pool: dict[str, dict[str, Any]] = field(default_factory=dict)  # frames.pool_shares
    price_sources: list[str] = field(default_factory=list)  # where the prices of its nodes come from
    unpriced: list[str] = field(default_factory=list)  # managed nodes without a price (not in the cost)

    def as_dict(self, baseline: CostSummary | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {
            "costPerHour": self.cost_per_hour,
            "costPerMonth": round(self.cost_per_hour * 730, 2),
            "nodes": self.nodes,
            "nodeMix": self.node_mix,
            "pendingPods": len(self.pending),
            "byNodePool": self.by_pool,
            "priceSources": self.price_sources,
            "unpricedNodes": self.unpriced,
        }
        if baseline is not None:
            data["deltaPerHour"] = round(self.cost_per_hour - baseline.cost_per_hour, 6)
            data["deltaPerMonth"] = round((self.cost_per_hour - baseline.cost_per_hour) * 730, 2)
        return data


@dataclass(slots=True)
class PlanResult:
    snapshot: str
    proposed_source: str
    start: datetime
    pool_changes: list[PoolChange]
    current: CostSummary
    proposed: CostSummary
    floor: CostSummary
    settled_at: datetime
    horizon_reached: bool
    drift: list[dict[str, Any]]
    consolidation: list[dict[str, Any]]
    churn: dict[str, int]
    blockers: list[Blocker]
    removed_nodes: list[str] = field(default_factory=list)  # deleted with their NodePool
    nodeclass_changes: list[PoolChange] = field(default_factory=list)
    # The current NodePools run to stability (``--baseline``): its summary and churn.
    baseline: tuple[CostSummary, dict[str, int]] | None = None
    baseline_disrupted: list[str] = field(default_factory=list)  # nodes the current NodePools alone disrupt
    records: list[dict[str, Any]] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    # NodePool -> why it is not Ready (its nodeClassRef resolves to nothing or another provider's class).
    unready_pools: dict[str, str] = field(default_factory=dict)
    # Nodes drifted by the change that are still there when the plan ends, each with what holds it.
    stuck_drift: list[dict[str, Any]] = field(default_factory=list)
    evictions: list[dict[str, Any]] = field(default_factory=list)  # impact.evictions_by_workload
    # Pod key -> ``namespace/Kind/name`` of its workload (pods at the start, at the end and evicted between).
    workloads: dict[str, str] = field(default_factory=dict)
    # The proposal is for another region than the snapshot's cluster (a stack's ``aws:region``): why, or "".
    region_mismatch: str = ""
    # Removing NodePools deletes their nodes at once, with no replacement first: ``_removal``.
    removal: dict[str, Any] = field(default_factory=dict)
    # NodePool -> how its disruptions were paced, counted in nodes: ``_pace``.
    pace: dict[str, dict[str, Any]] = field(default_factory=dict)
    prices: dict[str, str] = field(default_factory=dict)  # price_source: where every price came from
    # Fields the proposed NodePools / EC2NodeClasses / NodeOverlays (or the snapshot's NodeClaims) set that Adze
    # ignores (a NodeOverlay's, when the snapshot's settings turn the NodeOverlay gate off).
    unsupported: list[Finding] = field(default_factory=list)
    nodeoverlay_changes: list[PoolChange] = field(default_factory=list)
    # Whether the NodeOverlay gate is on in the runs, and why ("" when no NodeOverlay is involved).
    overlay_gate: str = ""

    @property
    def newly_pending(self) -> dict[str, str]:
        return {k: v for k, v in self.proposed.pending.items() if k not in self.current.pending}

    @property
    def still_pending(self) -> dict[str, str]:
        return {k: v for k, v in self.proposed.pending.items() if k in self.current.pending}

    @property
    def duration(self) -> timedelta:
        return self.settled_at - self.start

    @property
    def price_sources(self) -> list[str]:
        """Where every cost of the plan comes from (current, proposed and fresh-provision nodes)."""
        from reconciler.cloud import pricesource

        return pricesource.legend(
            [*self.current.price_sources, *self.proposed.price_sources, *self.floor.price_sources]
        )

    def as_dict(self) -> dict[str, Any]:
        seconds = int(self.duration.total_seconds())
        return {
            "snapshot": self.snapshot,
            "proposedFrom": self.proposed_source,
            "clock": format_time(self.start),
            "nodepools": [c.as_dict() for c in self.pool_changes],
            "nodeclasses": [c.as_dict() for c in self.nodeclass_changes],
            "nodeoverlays": [c.as_dict() for c in self.nodeoverlay_changes],
            "nodeOverlayGate": self.overlay_gate or None,
            "current": self.current.as_dict(),
            "proposed": {
                **self.proposed.as_dict(self.current),
                "settledAt": format_time(self.settled_at),
                "durationSeconds": seconds,
                "horizonReached": self.horizon_reached,
            },
            "floor": self.floor.as_dict(self.current),
            "baseline": None
            if self.baseline is None
            else {**self.baseline[0].as_dict(self.current), "churn": self.baseline[1],
                  "disruptedNodes": self.baseline_disrupted},
            "drift": self.drift,
            "consolidation": self.consolidation,
            "churn": self.churn,
            "blockers": [b.as_dict() for b in self.blockers],
            "removedNodes": self.removed_nodes,
            "notReadyNodePools": self.unready_pools,
            "stuckDrift": self.stuck_drift,
            "evictionsByWorkload": self.evictions,
            "prices": self.prices,
            "regionMismatch": self.region_mismatch or None,
            "removal": self.removal or None,
            "pace": self.pace,
            "unschedulable": {"new": self.newly_pending, "stillPending": self.still_pending},
            "floorUnschedulable": self.floor.pending,
            "steps": len(self.records),
            "timeline": as_documents(happenings(self.records)),
            "priceSources": self.price_sources,
            "unsupportedFields": [
                {"kind": f.kind, "name": f.name, "path": f.path, "message": f.message} for f in self.unsupported
            ],
        }


def _summary(sim: RecordingSimulation) -> CostSummary:
    """The cluster's Nodes priced as ``status`` prices them (managed node groups included): the cost is the sum
    of the node mix's rows, so every mix adds up to its cost."""
    rows = [row for row in node_rows(sim) if row.ready]
    return CostSummary(
        round(sum(row.price for row in rows), 6), len(rows), node_mix(rows), sim.cluster.pending_reasons(),
        pool_shares(rows), price_sources(rows), unpriced(rows),
    )


async def compute_plan(
    snapshot: Snapshot,
    proposed: ProposedConfig,
    *,
    horizon: timedelta = DEFAULT_HORIZON,
    baseline: bool = False,
    frames: bool = True,
    progress: Callable[[str], None] | None = None,
) -> PlanResult:
    """``baseline``: also run the *current* NodePools to stability, to tell the change's own effect
    from consolidation the cluster would do anyway (a second full simulation). ``frames``: record the
    per-step node tables the HTML report charts (False is faster when no report is drawn). ``progress``
    is told what is going on (passes done, nodes settled, simulated time) as the simulations run."""
    report = progress or (lambda _text: None)
    name = f"plan-{snapshot.name}"
    applied = apply_proposal(snapshot.objects, proposed, now=snapshot.clock)
    prices = price_source(snapshot.document["catalog"], snapshot.objects)
    # One catalogue for all three simulations: what any current or proposed NodePool can launch.
    catalog = narrowed_catalog(snapshot.document["catalog"], [*snapshot.objects, *applied.objects])
    snapshot = Snapshot({**snapshot.document, "catalog": catalog}, snapshot.source, snapshot.dropped, snapshot.checked)
    report("loading the snapshot")
    quiet = SimOptions(explain_every_pass=False)
    current_sim = RecordingSimulation(snapshot.scenario(name=name), frames=False, options=quiet)
    await current_sim.load()
    current = _summary(current_sim)
    settled_current = None
    baseline_disrupted: list[str] = []
    if baseline:
        await run_to_stability(current_sim, current_sim.now + horizon, {})
        settled_current = (_summary(current_sim), _churn(current_sim.records))
        baseline_disrupted = sorted({item["node"] for r in current_sim.records for item in r["disrupted"]})
    del current_sim  # its summaries are taken: the proposed and floor simulations need the memory
    free_dropped()  # a simulation is a graph of cycles: dropping it frees nothing until a full collection

    # Each disruption command gets the time the live controller would run it at (budgets pace them).
    timeline = Timeline(snapshot.clock + horizon)

    def after_pass(sim: Any, record: dict[str, Any], first_item: int, first_event: int) -> None:
        timeline.after_pass(sim, record, first_item, first_event)
        settled = sum(len(c.nodes) for c in timeline.commands)
        report(f"{len(timeline.commands)} disruption pass(es) acted, {settled} node(s) replaced or removed, "
               f"simulated +{sim.now - start}")

    options = SimOptions(min_drain=SIMULATED_DRAIN, after_disruption_pass=after_pass, explain_every_pass=False)
    sim = RecordingSimulation(snapshot.scenario(name=name, objects=applied.objects), frames=frames, options=options)
    await sim.load()
    start = sim.now
    # The floor is priced (and its simulation dropped) before the proposed one grows: at 5,000 nodes the
    # two simulations alive at once set the command's peak memory.
    floor = await _floor(snapshot, name, applied.objects, start, quiet, report)
    free_dropped()  # the floor simulation, dropped by ``_floor``
    unready = _unready_pools(sim)
    unsupported = findings_of(
        (o for o in applied.objects if o.get("kind") in ("NodePool", "EC2NodeClass", "NodeClaim", "NodeOverlay")),
        sim.settings.feature_gates,
    )
    drifted_at_start = _drifted_nodes(sim)
    pods_before = _pods(sim)
    pool_nodes_at_start = sim.cluster.state().nodepool_node_counts()
    pool_budgets = {name: pool.disruption.get("budgets") for name, pool in sim.cluster.state().nodepools.items()}
    # What the (simulated) disruption controller counts for each budget before anything moves.
    budgets_at_start = {
        f"{(pdb['metadata'].get('namespace') or 'default')}/{pdb['metadata']['name']}":
            sim.kube.pdb_status(pdb).disruptions_allowed
        for pdb in sim.cluster.manifests("PodDisruptionBudget")
    }
    doomed = nodeclaims_of_pools(applied.objects, applied.removed_pools)
    removed_nodes = _node_names(sim, doomed)
    report("simulating the proposed NodePools until the cluster settles")
    deletion = None
    if doomed:
        deletion = await sim.run_step("delete", [{"kind": "NodeClaim", "name": claim} for claim in doomed])
    blockers: dict[tuple[str, str], Blocker] = {}
    horizon_reached = await run_to_stability(sim, start + horizon, blockers)
    sorted_blockers = sorted(blockers.values(), key=lambda b: (b.resolved, b.nodepool, b.node, b.code))

    drift, consolidation = _moves(sim.records, drifted_at_start)
    owners = {**replicaset_owners(snapshot.objects), **replicaset_owners(sim.cluster.manifests("ReplicaSet"))}
    return PlanResult(
        snapshot=snapshot.source,
        proposed_source=proposed.source,
        start=start,
        pool_changes=applied.pool_changes,
        nodeclass_changes=applied.nodeclass_changes,
        nodeoverlay_changes=applied.nodeoverlay_changes,
        overlay_gate=_overlay_gate(snapshot, [*snapshot.objects, *applied.objects]),
        current=current,
        proposed=_summary(sim),
        floor=floor,
        settled_at=settled_at(sim.records, start),
        horizon_reached=horizon_reached,
        drift=drift,
        consolidation=consolidation,
        churn=_churn(sim.records),
        blockers=sorted_blockers,
        removed_nodes=removed_nodes,
        baseline=settled_current,
        baseline_disrupted=baseline_disrupted,
        records=sim.records,
        frames=sim.frames,
        unready_pools=unready,
        unsupported=unsupported,
        prices=prices,
        stuck_drift=_stuck_drift(sim, drifted_at_start, sorted_blockers),
        evictions=evictions_by_workload(
            sim.records,
            {**pods_before, **_pods(sim)},
            [o for o in applied.objects if o.get("kind") == "PodDisruptionBudget"],
            [b.message for b in sorted_blockers],
            started=[key for key, pod in pods_before.items() if (pod.get("spec") or {}).get("nodeName")],
            owners=owners,
            replicas=_replicas(sim),
            allowed=budgets_at_start,
        ),
        region_mismatch=region_mismatch(snapshot, proposed),
        removal=_removal(deletion, current.pending, sim.cluster.pending_reasons()),
        pace=_pace(timeline.commands, pool_nodes_at_start, pool_budgets, start),
        workloads={key: f"{key.partition('/')[0]}/{workload_of(pod, key, owners)}"
                   for key, pod in {**pods_before, **_pods(sim)}.items()},
    )


async def _floor(snapshot: Snapshot, name: str, objects: Sequence[Manifest], start: datetime,
                 options: SimOptions, report: Callable[[str], None]) -> CostSummary:
    """What a fresh provision of the proposed NodePools costs: every managed node's pods pending, one pass."""
    report("pricing a fresh provision of the proposed NodePools")
    floor_sim = RecordingSimulation(
        snapshot.scenario(name=name, objects=fresh_provision_objects(objects, start)), frames=False, options=options
    )
    await floor_sim.load()
    await floor_sim.run_step("provision", {})
    return _summary(floor_sim)


def _overlay_gate(snapshot: Snapshot, objects: Sequence[Mapping[str, Any]]) -> str:
    """The NodeOverlay gate the runs used and where that comes from, when any NodeOverlay is involved
    (``Snapshot.scenario`` turns it on for a run with NodeOverlays unless the snapshot's settings say)."""
    if not any(o.get("kind") == "NodeOverlay" for o in objects):
        return ""
    if snapshot.overlay_gate is not None:
        return f"{'on' if snapshot.overlay_gate else 'off'}, from the snapshot's settings.featureGates"
    return "on, assumed: the snapshot does not record the cluster's feature gates"


def _replicas(sim: RecordingSimulation) -> dict[tuple[str, str], int]:
    """(namespace, ``Kind/name``) -> replicas of each Deployment, StatefulSet and ReplicaSet of no Deployment."""
    found = {}
    for kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        for manifest in sim.cluster.manifests(kind):
            metadata = manifest["metadata"]
            if kind == "ReplicaSet" and deployment_of(manifest) is not None:
                continue
            found[str(metadata.get("namespace") or "default"), f"{kind}/{metadata['name']}"] = replicas_of(manifest)
    return found


def _pace(commands: Sequence[TimedCommand], nodes_at_start: Mapping[str, int], budgets: Mapping[str, Any],
          start: datetime) -> dict[str, dict[str, Any]]:
    """Per NodePool whose nodes were disrupted: how many, the most disrupting at once (in flight together, as
    timed), and what its budget allowed at the start for the reason of its first command."""
    paced: dict[str, dict[str, Any]] = {}
    for pool in sorted({c.nodepool for c in commands}):
        ours = [c for c in commands if c.nodepool == pool]
        at_once = max(sum(len(o.nodes) for o in ours if o.in_flight(c.started)) for c in ours)
        entry: dict[str, Any] = {"nodes": sum(len(c.nodes) for c in ours), "atOnce": at_once, "budgetLimit": None,
                                 "budget": ""}
        try:
            left = allowance(pool, parse_budgets(budgets.get(pool)), ours[0].reason,
                             node_count=nodes_at_start.get(pool, 0), disrupting=0, now=start)
        except BudgetError:
            left = None
        if left is not None and left.limit != UNLIMITED:
            entry["budgetLimit"], entry["budget"] = left.limit, left.limited_by
        paced[pool] = entry
    return paced


def _removal(
    deletion: Mapping[str, Any] | None, pending_before: Mapping[str, str], pending_at_end: Mapping[str, str]
) -> dict[str, Any]:
    """What deleting the removed NodePools' nodes does to their pods: evicted at once (Karpenter replaces a
    drifted node before draining it, but a removed pool's nodes are simply deleted), those left pending
    then waiting for new capacity (``waited``) or never placed (``stranded``)."""
    if deletion is None:
        return {}
    evicted = sorted({str(e["object"]).partition("/")[2] for e in deletion["events"] if e.get("reason") == "Evicted"})
    left = sorted(key for key in deletion["pending"] if key not in pending_before)
    return {
        "podsEvicted": len(evicted),
        "waited": [key for key in left if key not in pending_at_end],
        "stranded": [key for key in left if key in pending_at_end],
    }


def region_mismatch(snapshot: Snapshot, proposed: ProposedConfig) -> str:
    """Why the proposal does not fit the snapshot's cluster: a stack deployed to another region ("" when the
    regions agree or one is unknown)."""
    catalog = snapshot.document.get("catalog") or {}
    preset = str(catalog.get("preset") or "")
    ours = observed_region(snapshot.objects) or str(catalog.get("region") or "") or preset.removeprefix("aws-")
    if not proposed.region or not ours or proposed.region == ours:
        return ""
    return (f"{proposed.source} deploys to {proposed.region}, but the snapshot's cluster runs in {ours}: "
            "is it the cluster this stack manages?")


def _node_names(sim: RecordingSimulation, claims: Sequence[str]) -> list[str]:
    state = sim.cluster.state()
    names = []
    for claim in claims:
        node = state.state_node(claim)
        names.append(node.name if node is not None else claim)
    return sorted(names)


def price_source(catalog: Mapping[str, Any], objects: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Where the plan's prices come from: ``estimate`` (a bundled preset, with the region the nodes really
    run in) or ``catalogue`` (the instance types and prices the snapshot carries: ``snapshot --catalog live``
    writes EC2's offerings and the Pricing API's prices for the cluster's region there)."""
    if catalog.get("preset"):
        return {"kind": "estimate", "catalog": str(catalog["preset"]), "nodeRegion": observed_region(objects) or ""}
    return {"kind": "catalogue", "region": str(catalog.get("region") or "")}


def _unready_pools(sim: RecordingSimulation) -> dict[str, str]:
    state = sim.cluster.state()
    found = {}
    for name, pool in sorted(state.nodepools.items()):
        problem = nodeclass_problem(pool, state, require_nodeclass=sim.settings.require_nodeclass)
        if problem is not None:
            found[name] = problem
    return found


def _pods(sim: RecordingSimulation) -> dict[str, dict[str, Any]]:
    return {
        f"{(pod.get('metadata') or {}).get('namespace', 'default')}/{pod['metadata']['name']}": pod
        for pod in sim.cluster.manifests("Pod")
    }


def _stuck_drift(
    sim: RecordingSimulation, drifted: Mapping[str, tuple[str, str]], blockers: Sequence[Blocker]
) -> list[dict[str, Any]]:
    """Drifted nodes the change leaves in place, with the blockers the engine gave for each (structured:
    every node still there that drifted at the start, whatever method's explanation came last)."""
    present = {node.name: node for node in sim.cluster.state().state_nodes()}
    stuck = []
    for name, (reason, detail) in sorted(drifted.items()):
        node = present.get(name)
        if node is None:
            continue
        held = [b for b in blockers if b.node == name and not b.resolved]
        stuck.append(
            {
                "node": name,
                "nodepool": node.nodepool,
                "driftReason": reason,
                "detail": detail,
                "blockedBy": [b.code for b in held],
                "message": held[0].message if held else "not replaced before the plan ended",
            }
        )
    return stuck


def _drifted_nodes(sim: RecordingSimulation) -> dict[str, tuple[str, str]]:
    """Node -> (drift reason, detail) right after the proposal is applied."""
    state = sim.cluster.state()
    found = {}
    for node in state.state_nodes():
        pool = state.nodepools.get(node.nodepool)
        if pool is None or node.nodeclaim is None:
            continue
        reason = drift_reason(
            pool, node.nodeclaim, now=sim.now, nodeclass=state.nodeclass(pool), node_labels=node.labels
        )
        if reason is not None:
            found[node.name] = reason
    return found


def _launched_by_claim(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    return {item["nodeclaim"]: item for record in records for item in record["launched"]}


def _replacement(item: Mapping[str, Any] | None, name: str) -> dict[str, Any]:
    if item is None:
        return {"nodeclaim": name}
    return {
        "nodeclaim": name,
        "instanceType": item.get("instanceType"),
        "capacityType": item.get("capacityType"),
        "zone": item.get("zone"),
        "price": item.get("price"),
    }


def _moves(
    records: Sequence[Mapping[str, Any]], drifted: Mapping[str, tuple[str, str]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    launched = _launched_by_claim(records)
    drift, consolidation = [], []
    for record in records:
        group: dict[tuple[str, str, tuple[str, ...]], dict[str, Any]] = {}
        for item in record["disrupted"]:
            replacements = [_replacement(launched.get(name), name) for name in item.get("replacements") or []]
            if item["reason"] == "Drifted":
                reason, detail = drifted.get(item["node"], ("Drifted", ""))
                drift.append(
                    {
                        "node": item["node"],
                        "nodeclaim": item.get("nodeclaim"),
                        "nodepool": item.get("nodepool"),
                        "driftReason": reason,
                        "detail": detail,
                        "at": item.get("startedAt", record["clock"]),
                        "replacementsReadyAt": item.get("readyAt"),
                        "drainedAt": item.get("finishedAt"),
                        "replacements": replacements,
                    }
                )
                continue
            key = (item["reason"], item["method"], tuple(item.get("replacements") or []))
            move = group.get(key)
            if move is None:
                move = group[key] = {
                    "nodes": [],
                    "reason": item["reason"],
                    "method": item["method"],
                    "action": item["action"],
                    "replacements": replacements,
                    "savingsPerHour": 0.0,
                    "at": item.get("startedAt", record["clock"]),
                    "drainedAt": item.get("finishedAt"),
                }
                consolidation.append(move)
            move["nodes"].append(item["node"])
            move["savingsPerHour"] = round(
                move["savingsPerHour"] + float(item.get("savingsPerHour") or 0.0), 6
            )
    return drift, consolidation


def _churn(records: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Nodes disrupted (``nodesReplaced`` with replacements launched for them, ``nodesRemoved`` without), nodes
    launched (replacements and fresh capacity), and evictions."""
    disrupted = [item for r in records for item in r["disrupted"]]
    return {
        "nodesDisrupted": len(disrupted),
        "nodesReplaced": sum(1 for item in disrupted if item.get("replacements")),
        "nodesRemoved": sum(1 for item in disrupted if not item.get("replacements")),
        "nodesLaunched": sum(len(r["launched"]) for r in records),
        "podsEvicted": sum(1 for r in records for e in r["events"] if e.get("reason") == "Evicted"),
    }
