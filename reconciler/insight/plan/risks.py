"""A plan's risk in plain words, before any saving: the verdict, the headline figures and the risk list.

``verdict`` is what a reviewer reads first (BLOCKED / REVIEW / SAFE and the main risk), decided from
structured facts of the plan (pending pods, NodePools that are not Ready, drifted nodes left in place,
churn), never from message text. ``risk_lines`` are the bullet points under it: requirement changes
as before → after values, capacity moving between spot and on-demand, architectures and zones, pods
evicted per workload and the PDBs pacing them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.insight.money import money
from reconciler.insight.plan.compute import PlanResult
from reconciler.insight.plan.impact import describe_workload

MAX_NAMED = 3  # names quoted in a verdict before "..."


def _named(names: list[str]) -> str:
    return ", ".join(names[:MAX_NAMED]) + (", ..." if len(names) > MAX_NAMED else "")


def verdict(plan: PlanResult) -> tuple[str, str]:
    """("blocked" | "review" | "safe", the main risk in words)."""
    pending = plan.newly_pending
    if plan.horizon_reached:
        return "blocked", ("still changing when the --horizon was reached: the cluster does not settle within "
                           "it (waiting budgets or blocked drift; see the blockers)")
    if pending:
        return "blocked", f"{len(pending)} pod(s) would become unschedulable ({_named(pending_workloads(plan))})"
    if plan.unready_pools:
        pools = sorted(plan.unready_pools)
        more = f"; {len(pools) - 1} more NodePool(s) not Ready ({_named(pools[1:])})" if len(pools) > 1 else ""
        return "review", f"{plan.unready_pools[pools[0]]}, so it launches nothing{more}"
    if plan.stuck_drift:
        first = plan.stuck_drift[0]
        held = ", ".join(first["blockedBy"]) or "not replaced"
        return "review", (f"{len(plan.stuck_drift)} drifted node(s) cannot be replaced as asked and stay as they "
                          f"are ({first['node']}: {held}); see the drift table")
    if plan.region_mismatch:
        return "review", plan.region_mismatch
    churn = plan.churn
    if churn["nodesDisrupted"] or churn["podsEvicted"] or plan.removed_nodes:
        return "review", (f"{churn['nodesDisrupted']} node(s) replaced or removed, {churn['podsEvicted']} pod(s) "
                          "evicted; no pod left unschedulable")
    return "safe", "no node disrupted, no pod evicted or left unschedulable"


def pending_workloads(plan: PlanResult) -> list[str]:
    """The workloads of the pods the change leaves pending, with how many each (``ml/Deployment/trainer x2``):
    their controllers replace evicted pods under new names, so pod names alone say little."""
    counts: dict[str, int] = {}
    for key in plan.newly_pending:
        name = plan.workloads.get(key, key)
        counts[name] = counts.get(name, 0) + 1
    return [f"{name} x{count}" if count > 1 else name for name, count in sorted(counts.items())]


def headline(plan: PlanResult) -> str:
    """Now, settled (or where the horizon cut it) and the difference, each labelled: now + Δ = settled."""
    now, settled = plan.current.cost_per_hour, plan.proposed.cost_per_hour
    label = "at the horizon, still changing" if plan.horizon_reached else "settled"
    return f"now {money(now)} → {label} {money(settled)}; Δ {money(settled - now, signed=True)}"


def risk_lines(plan: PlanResult) -> list[str]:
    """Plain-words risks, most severe first (pending pods are the verdict's and their own list's)."""
    lines = [plan.region_mismatch] if plan.region_mismatch else []
    lines += [problem for _, problem in sorted(plan.unready_pools.items())]
    for stuck in plan.stuck_drift:
        held = ", ".join(stuck["blockedBy"]) or "not replaced before the plan ended"
        lines.append(f"Node {stuck['node']} ({stuck['nodepool']}) drifted ({stuck['driftReason']}) but stays: {held}")
    for change in plan.pool_changes:
        for key, before, after in change.requirements:
            lines.append(f"NodePool {change.name}: {key}: {before} → {after}")
    lines += _share_lines(plan.current.by_pool, plan.proposed.by_pool)
    lines += [f"evicted: {describe_workload(entry)}" for entry in plan.evictions]
    return lines


def _share_lines(before_pools: Mapping[str, Any], after_pools: Mapping[str, Any]) -> list[str]:
    lines = []
    empty = {"nodes": 0, "spot": 0, "zones": {}, "arch": {}}
    for pool in sorted(set(before_pools) | set(after_pools)):
        if pool == "unmanaged":
            continue
        was, now = before_pools.get(pool, empty), after_pools.get(pool, empty)
        if not was["nodes"] or not now["nodes"]:
            continue
        if was["spot"] / was["nodes"] != now["spot"] / now["nodes"]:
            lines.append(f"NodePool {pool}: spot {was['spot'] / was['nodes']:.0%} → {now['spot'] / now['nodes']:.0%} "
                         f"of its nodes ({was['spot']}/{was['nodes']} → {now['spot']}/{now['nodes']})")
        if _shares(was.get("arch", {})) != _shares(now.get("arch", {})):
            before, after = _split(was.get("arch", {})), _split(now.get("arch", {}))
            lines.append(f"NodePool {pool}: architectures {before} → {after}")
        if now["nodes"] >= 2 and len(now["zones"]) == 1 and len(was["zones"]) != 1:
            [zone] = now["zones"]
            lines.append(f"NodePool {pool}: all {now['nodes']} nodes end in one zone ({zone}); "
                         f"before: {_split(was['zones'])}")
        elif _shares(was["zones"]) != _shares(now["zones"]):
            lines.append(f"NodePool {pool}: zones {_split(was['zones'])} → {_split(now['zones'])}")
    return lines


def _shares(counts: Mapping[str, int]) -> dict[str, float]:
    total = sum(counts.values())
    return {key: round(count / total, 2) for key, count in counts.items()} if total else {}


def _split(counts: Mapping[str, int]) -> str:
    """``us-east-1a 50% (1), us-east-1b 50% (1)``."""
    total = sum(counts.values())
    if not total:
        return "no nodes"
    return ", ".join(f"{key} {count / total:.0%} ({count})" for key, count in sorted(counts.items()))


def price_note(plan: PlanResult) -> str:
    """Where the prices come from, saying plainly when they are estimates."""
    source = plan.prices
    if source.get("kind") == "estimate":
        text = f"prices are ESTIMATES from the bundled {source['catalog']} catalogue, not this cluster's live prices"
        region = source.get("nodeRegion")
        if region and not source["catalog"].endswith(region):
            text += f" (its nodes run in {region})"
        return text
    region = f" for {source['region']}" if source.get("region") else ""
    return f"prices: the snapshot's catalogue{region} (live EC2 and Pricing API prices when taken with --catalog live)"
