"""A plan's risk in plain words, before any saving: the verdict, the headline figures and the risk list.

``verdict`` is what a reviewer reads first (BLOCKED / REVIEW / SAFE and the main risk), decided from
structured facts of the plan (pending pods, a stack for another region, NodePools that are not Ready, drifted
nodes left in place, fields Adze does not implement, churn), never from message text; with ``--baseline`` it
counts only what the change adds to what the current NodePools do anyway. ``risk_lines`` are the bullet points
under it: fields Adze does not implement, requirement
changes as before → after values, what removing a NodePool does to its pods, how each pool's budget paces
it (in nodes), capacity moving between spot and on-demand, architectures, zones and instance families per
pool and for the cluster (pools added, removed and emptied included), pods evicted per workload and the
PDBs pacing them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.insight.plan.compute import PlanResult
from reconciler.insight.plan.impact import describe_workload
from reconciler.insight.plan.timeline import LAUNCH_TO_INITIALIZED
from reconciler.model.money import money

MAX_NAMED = 3  # names quoted in a verdict before "..."
EMPTY_SHARES: Mapping[str, Any] = {"nodes": 0, "spot": 0, "zones": {}, "arch": {}, "family": {}}


def _named(names: list[str]) -> str:
    return ", ".join(names[:MAX_NAMED]) + (", ..." if len(names) > MAX_NAMED else "")


def own_disruptions(plan: PlanResult) -> dict[str, int]:
    """Nodes the change itself replaces, removes and adds (with ``--baseline``: beyond what the current
    NodePools would do anyway), and pods it evicts."""
    churn = plan.churn
    counts = {"replaced": churn.get("nodesReplaced", 0), "removed": churn.get("nodesRemoved", 0),
              "added": churn["nodesLaunched"], "evicted": churn["podsEvicted"]}
    if plan.baseline is not None:
        anyway = set(plan.baseline_disrupted)
        own = [i for r in plan.records for i in r["disrupted"] if i["node"] not in anyway]
        baseline = plan.baseline[1]
        counts = {
            "replaced": sum(1 for i in own if i.get("replacements")),
            "removed": sum(1 for i in own if not i.get("replacements")),
            "added": max(0, churn["nodesLaunched"] - baseline["nodesLaunched"]),
            "evicted": max(0, churn["podsEvicted"] - baseline["podsEvicted"]),
        }
    counts["removed"] += len(plan.removed_nodes)
    return counts


def verdict(plan: PlanResult) -> tuple[str, str]:
    """("blocked" | "review" | "safe", the main risk in words)."""
    pending = plan.newly_pending
    if plan.horizon_reached:
        return "blocked", ("still changing when the --horizon was reached: the cluster does not settle within "
                           "it (waiting budgets or blocked drift; see the blockers)")
    if pending:
        return "blocked", f"{len(pending)} pod(s) would become unschedulable ({_named(pending_workloads(plan))})"
    if plan.region_mismatch:
        return "review", plan.region_mismatch
    if plan.unready_pools:
        pools = sorted(plan.unready_pools)
        more = f"; {len(pools) - 1} more NodePool(s) not Ready ({_named(pools[1:])})" if len(pools) > 1 else ""
        return "review", f"{plan.unready_pools[pools[0]]}, so it launches nothing{more}"
    if plan.stuck_drift:
        first = plan.stuck_drift[0]
        held = ", ".join(first["blockedBy"]) or "not replaced"
        return "review", (f"{len(plan.stuck_drift)} drifted node(s) cannot be replaced as asked and stay as they "
                          f"are ({first['node']}: {held}); see the drift table")
    if plan.unsupported:
        field = plan.unsupported[0]
        more = f"; {len(plan.unsupported) - 1} more" if len(plan.unsupported) > 1 else ""
        return "review", (f"{field.kind} {field.name} sets {field.path}, which Adze does not act on "
                          f"({field.message}){more}")
    own = own_disruptions(plan)
    anyway = f"; the current NodePools alone disrupt {len(plan.baseline_disrupted)} node(s) anyway" if (
        plan.baseline is not None and plan.baseline_disrupted) else ""
    if own["replaced"] or own["removed"] or own["added"] or own["evicted"]:
        return "review", (f"{own['replaced']} node(s) replaced, {own['removed']} removed, {own['added']} added, "
                          f"{own['evicted']} pod(s) evicted; no pod left unschedulable{anyway}")
    if plan.baseline is not None:
        return "safe", f"the change itself disrupts no node, evicts no pod and leaves none unschedulable{anyway}"
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
    """Now, settled (or where the horizon cut it) and the difference, each labelled: now + Δ = settled. With
    ``--baseline`` the change's own Δ is against the current NodePools settled, not against now."""
    now, settled = plan.current.cost_per_hour, plan.proposed.cost_per_hour
    label = "at the horizon, still changing" if plan.horizon_reached else "settled"
    if plan.baseline is None:
        return f"now {money(now)} → {label} {money(settled)}; Δ {money(settled - now, signed=True)}"
    anyway = plan.baseline[0].cost_per_hour
    return (f"now {money(now)} → {label} {money(settled)} with the change, {money(anyway)} without it; the "
            f"change's own Δ {money(settled - anyway, signed=True)} (Δ vs now {money(settled - now, signed=True)}, "
            f"of which {money(anyway - now, signed=True)} the current NodePools do anyway)")


def risk_lines(plan: PlanResult) -> list[str]:
    """Plain-words risks, most severe first (pending pods are the verdict's and their own list's)."""
    lines = [plan.region_mismatch] if plan.region_mismatch else []
    lines += [problem for _, problem in sorted(plan.unready_pools.items())]
    lines += [f"not implemented by Adze: {finding.describe()}" for finding in plan.unsupported]
    for stuck in plan.stuck_drift:
        held = ", ".join(stuck["blockedBy"]) or "not replaced before the plan ended"
        lines.append(f"Node {stuck['node']} ({stuck['nodepool']}) drifted ({stuck['driftReason']}) but stays: {held}")
    lines += _removal_lines(plan)
    for change in plan.pool_changes:
        for key, before, after in change.requirements:
            lines.append(f"NodePool {change.name}: {key}: {before} → {after}")
    lines += _pace_lines(plan.pace)
    removed = {c.name for c in plan.pool_changes if c.change == "removed"}
    lines += share_lines(plan.current.by_pool, plan.proposed.by_pool, removed)
    lines += [f"evicted: {describe_workload(entry)}" for entry in plan.evictions]
    return lines


def _removal_lines(plan: PlanResult) -> list[str]:
    removal = plan.removal
    removed = sorted(c.name for c in plan.pool_changes if c.change == "removed")
    if not removed or not removal:
        return []
    text = (f"NodePool(s) {', '.join(removed)} removed: their {len(plan.removed_nodes)} node(s) are deleted at once, "
            f"without replacements first (drift replaces before draining; removal does not)")
    if removal["waited"]:
        seconds = int(LAUNCH_TO_INITIALIZED.total_seconds())
        text += (f"; {len(removal['waited'])} pod(s) wait about {seconds} s for new nodes "
                 f"({_named(_workloads(plan, removal['waited']))})")
    if removal["stranded"]:
        text += f"; {len(removal['stranded'])} pod(s) find no node at all"
    if not removal["waited"] and not removal["stranded"] and removal["podsEvicted"]:
        text += f"; their {removal['podsEvicted']} pod(s) fit on the remaining nodes at once"
    return [text]


def _workloads(plan: PlanResult, keys: list[str]) -> list[str]:
    counts: dict[str, int] = {}
    for key in keys:
        name = plan.workloads.get(key, key)
        counts[name] = counts.get(name, 0) + 1
    return [f"{name} x{count}" if count > 1 else name for name, count in sorted(counts.items())]


def _pace_lines(pace: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """How each pool's disruption budget paces it, in nodes."""
    lines = []
    for pool, entry in sorted(pace.items()):
        text = f"NodePool {pool}: {entry['nodes']} node(s) disrupted, at most {entry['atOnce']} at a time"
        if entry.get("budget"):
            text += f" (its {entry['budget']})"
        lines.append(text)
    return lines


def share_lines(
    before_pools: Mapping[str, Any], after_pools: Mapping[str, Any], removed: set[str] | frozenset[str] = frozenset()
) -> list[str]:
    """What moves between spot and on-demand, architectures, zones and instance families: per NodePool (added,
    removed and emptied pools included) and, when there are several pools, for the cluster's managed nodes."""
    pools = sorted((set(before_pools) | set(after_pools)) - {"unmanaged"})
    lines = []
    for pool in pools:
        lines += _shift_lines(f"NodePool {pool}", before_pools.get(pool, EMPTY_SHARES),
                              after_pools.get(pool, EMPTY_SHARES), removed=pool in removed)
    if len(pools) > 1:
        lines += _shift_lines("the cluster's managed nodes", _total(before_pools, pools), _total(after_pools, pools),
                              removed=False)
    return lines


def _total(shares: Mapping[str, Any], pools: list[str]) -> dict[str, Any]:
    total: dict[str, Any] = {"nodes": 0, "spot": 0, "zones": {}, "arch": {}, "family": {}}
    for pool in pools:
        entry = shares.get(pool, EMPTY_SHARES)
        total["nodes"] += entry["nodes"]
        total["spot"] += entry["spot"]
        for key in ("zones", "arch", "family"):
            for name, count in entry.get(key, {}).items():
                total[key][name] = total[key].get(name, 0) + count
    return total


def _shift_lines(label: str, was: Mapping[str, Any], now: Mapping[str, Any], *, removed: bool) -> list[str]:
    if not was["nodes"] and not now["nodes"]:
        return []
    if not was["nodes"]:
        return [f"{label} is new: {now['nodes']} node(s), {_describe(now)}" + _all_spot_warning(now)]
    if not now["nodes"]:
        how = "removed" if removed else "emptied (its pods move to other pools)"
        return [f"{label} {how}: its {was['nodes']} node(s) go ({_describe(was)})"]
    lines = []
    spot_before, spot_after = was["spot"] / was["nodes"], now["spot"] / now["nodes"]
    if spot_after == 1 and spot_before < 1:
        lines.append(f"{label} moves 100% to spot ({was['spot']}/{was['nodes']} → {now['spot']}/{now['nodes']} "
                     "nodes): a spot interruption can take any of them, and a price spike all at once")
    elif spot_before != spot_after:
        lines.append(f"{label}: spot {spot_before:.0%} → {spot_after:.0%} of its nodes "
                     f"({was['spot']}/{was['nodes']} → {now['spot']}/{now['nodes']})")
    for key, title in (("arch", "architectures"), ("family", "instance families")):
        if _shares(was.get(key, {})) != _shares(now.get(key, {})):
            lines.append(f"{label}: {title} {_split(was.get(key, {}))} → {_split(now.get(key, {}))}")
    # One node is always in one zone: only two or more ending in one zone (from several) is a new risk.
    if now["nodes"] >= 2 and len(now["zones"]) == 1 and len(was["zones"]) != 1:
        [zone] = now["zones"]
        lines.append(f"{label}: all {now['nodes']} nodes end in one zone ({zone}); before: {_split(was['zones'])}")
    elif _shares(was["zones"]) != _shares(now["zones"]):
        lines.append(f"{label}: zones {_split(was['zones'])} → {_split(now['zones'])}")
    return lines


def _describe(shares: Mapping[str, Any]) -> str:
    """``spot 100% (3/3); amd64 100% (3); zones us-east-1a 67% (2), ...; families c6g 100% (3)``."""
    return (f"spot {shares['spot'] / shares['nodes']:.0%} ({shares['spot']}/{shares['nodes']}); "
            f"{_split(shares.get('arch', {}))}; zones {_split(shares['zones'])}; "
            f"families {_split(shares.get('family', {}))}")


def _all_spot_warning(shares: Mapping[str, Any]) -> str:
    if shares["nodes"] and shares["spot"] == shares["nodes"]:
        return ": 100% spot, a spot interruption can take any of them"
    return ""


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
