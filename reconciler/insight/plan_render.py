"""``plan`` output: terminal tables, Markdown for a pull-request comment, and the HTML report section."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from reconciler.api.durations import format_duration_short
from reconciler.insight.html import pending_section, render_report
from reconciler.insight.plan import Blocker, PlanResult
from reconciler.insight.proposal import PoolChange

MAX_LISTED = 25  # rows per list in text and Markdown before "... N more"


def _money(value: float) -> str:
    return f"${value:,.4f}"


def _delta(value: float) -> str:
    return f"{'+' if value > 0 else ''}{value:,.4f}"


def _mix(node_mix: Sequence[Mapping[str, Any]]) -> str:
    parts = [
        f"{m['count']}x {m['instanceType'] or '?'} {m['capacityType'] or '?'} "
        f"({m['nodepool'] or 'unmanaged'})"
        for m in node_mix
    ]
    return ", ".join(parts) or "no nodes"


def _replacements(items: Sequence[Mapping[str, Any]]) -> str:
    return (
        ", ".join(
            f"{r['nodeclaim']} ({r.get('instanceType') or '?'} {r.get('capacityType') or '?'}"
            + (f" {_money(r['price'])}/h)" if r.get("price") is not None else ")")
            for r in items
        )
        or "none (pods fit elsewhere)"
    )


def _cost_rows(plan: PlanResult) -> list[tuple[str, str, str, str, str, str]]:
    rows = []
    baseline = (
        [
            (
                "current config (stable)",
                plan.baseline[0],
                plan.baseline[0].cost_per_hour - plan.current.cost_per_hour,
            )
        ]
        if plan.baseline
        else []
    )
    for label, summary, delta in (
        ("current", plan.current, None),
        *baseline,
        (
            "after the change (stable)",
            plan.proposed,
            plan.proposed.cost_per_hour - plan.current.cost_per_hour,
        ),
        ("fresh provision", plan.floor, plan.floor.cost_per_hour - plan.current.cost_per_hour),
    ):
        rows.append(
            (
                label,
                str(summary.nodes),
                _money(summary.cost_per_hour),
                f"${summary.cost_per_hour * 730:,.2f}",
                "-" if delta is None else _delta(delta),
                str(len(summary.pending)),
            )
        )
    return rows


def _changes_line(plan: PlanResult) -> str:
    line = "; ".join(_describe_change(c) for c in plan.pool_changes) or "no NodePools"
    if plan.nodeclass_changes:
        line += " | EC2NodeClasses: " + "; ".join(_describe_change(c) for c in plan.nodeclass_changes)
    return line


def risk_lines(plan: PlanResult) -> list[str]:
    """Plain-words risk, before any saving: requirement changes as before → after, and capacity that
    moves between spot and on-demand or ends in a single zone."""
    lines = []
    for change in plan.pool_changes:
        for key, before, after in change.requirements:
            lines.append(f"NodePool {change.name}: {key}: {before} → {after}")
    before_pools, after_pools = plan.current.by_pool, plan.proposed.by_pool
    for pool in sorted(set(before_pools) | set(after_pools)):
        if pool == "unmanaged":
            continue
        was = before_pools.get(pool, {"nodes": 0, "spot": 0, "zones": {}})
        now = after_pools.get(pool, {"nodes": 0, "spot": 0, "zones": {}})
        was_share = was["spot"] / was["nodes"] if was["nodes"] else None
        now_share = now["spot"] / now["nodes"] if now["nodes"] else None
        if was_share is not None and now_share is not None and was_share != now_share:
            lines.append(f"NodePool {pool}: spot {was_share:.0%} → {now_share:.0%} of its nodes "
                         f"({was['spot']}/{was['nodes']} → {now['spot']}/{now['nodes']})")
        if now["nodes"] >= 2 and len(now["zones"]) == 1 and len(was["zones"]) != 1:
            [zone] = now["zones"]
            lines.append(f"NodePool {pool}: all {now['nodes']} nodes end in one zone ({zone}); "
                         f"before: {_zones(was['zones'])}")
    return lines


def _zones(zones: Mapping[str, int]) -> str:
    return ", ".join(f"{zone} {count}" for zone, count in zones.items()) or "no nodes"


def _describe_change(change: PoolChange) -> str:
    text = f"{change.name}: {change.change}"
    if change.fields:
        text += f" ({', '.join(change.fields[:4])}{', ...' if len(change.fields) > 4 else ''})"
    return text


def _duration(plan: PlanResult) -> str:
    text = format_duration_short(round(plan.duration.total_seconds()))
    if plan.horizon_reached:
        text += " (horizon reached: still changing)"
    return text


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    out.extend("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)
    return out


def _limited(items: Sequence[Any]) -> tuple[Sequence[Any], int]:
    return items[:MAX_LISTED], max(0, len(items) - MAX_LISTED)


def _fresh_note(plan: PlanResult) -> str:
    """A fresh provision is not a lower bound: say so when the settled cluster beats it."""
    gap = plan.floor.cost_per_hour - plan.proposed.cost_per_hour
    if gap <= 0.0005:
        return ""
    return (
        f"note: a fresh provision places every pod in one batch and costs {_money(gap)}/h more than the "
        "settled cluster here; consolidation packs tighter than a first provision."
    )


def verdict(plan: PlanResult) -> tuple[str, str]:
    """("blocked" | "review" | "safe", the main risk in words): what a reviewer reads first."""
    pending = plan.newly_pending
    if plan.horizon_reached:
        return "blocked", ("still changing when the --horizon was reached: the cluster does not settle within "
                           "it (waiting budgets or blocked drift; see the blockers)")
    if pending:
        return "blocked", f"{len(pending)} pod(s) would become unschedulable ({', '.join(sorted(pending)[:3])}" \
                          f"{', ...' if len(pending) > 3 else ''})"
    stuck = [b for b in plan.blockers if not b.resolved and "drifted" in b.message]
    if stuck:
        return "review", (f"{len(stuck)} drifted node(s) cannot be replaced as asked and stay as they are "
                          f"({stuck[0].node}: {stuck[0].code}); see the blockers")
    churn = plan.churn
    if churn["nodesDisrupted"] or churn["podsEvicted"] or plan.removed_nodes:
        return "review", (f"{churn['nodesDisrupted']} node(s) replaced or removed, {churn['podsEvicted']} pod(s) "
                          "evicted; no pod left unschedulable")
    return "safe", "no node disrupted, no pod evicted or left unschedulable"


def headline(plan: PlanResult) -> str:
    """Now, settled and the difference, each labelled: the figures add up (now + Δ = settled)."""
    now, settled = plan.current.cost_per_hour, plan.proposed.cost_per_hour
    delta = settled - now
    return (f"now {_money(now)}/h → settled {_money(settled)}/h (Δ {_delta(delta)} $/h, "
            f"{'+' if delta > 0 else ''}{delta * 730:,.2f} $/month)")


def render_text(plan: PlanResult) -> str:
    state, risk = verdict(plan)
    lines = [
        f"{state.upper()}: {risk}",
        f"plan: {plan.proposed_source} against {plan.snapshot} @ {plan.start.strftime('%Y-%m-%dT%H:%M:%SZ')}",
        f"cost: {headline(plan)}",
    ]
    lines.append(f"NodePools: {_changes_line(plan)}")
    lines.extend(f"risk: {line}" for line in risk_lines(plan))
    lines.append("")
    lines.extend(_table(["", "NODES", "$/H", "$/MONTH", "DELTA $/H", "PENDING"], _cost_rows(plan)))
    lines.append("")
    lines.append(f"current mix:  {_mix(plan.current.node_mix)}")
    lines.append(f"after mix:    {_mix(plan.proposed.node_mix)}")
    lines.append(f"fresh mix:    {_mix(plan.floor.node_mix)}")
    note = _fresh_note(plan)
    if note:
        lines.append(note)
    churn = plan.churn
    lines.append(
        f"churn: {churn['nodesDisrupted']} node(s) disrupted, {churn['nodesLaunched']} launched, "
        f"{churn['podsEvicted']} pod(s) evicted; settles after {_duration(plan)}"
    )
    if plan.baseline is not None:
        lines.append(f"without the change: {_baseline_churn(plan)}")
    if plan.removed_nodes:
        lines += [
            "",
            f"deleted with their removed NodePool ({len(plan.removed_nodes)}): "
            + ", ".join(plan.removed_nodes),
        ]
    shown, more = _limited(plan.drift)
    if plan.drift:
        lines += ["", f"drifted nodes ({len(plan.drift)}):"]
        lines += [
            f"  {d['node']} [{d['driftReason']}] at {d['at']} -> {_replacements(d['replacements'])}"
            for d in shown
        ]
        lines += [f"  ... {more} more"] if more else []
    if plan.consolidation:
        lines += ["", f"consolidation moves ({len(plan.consolidation)}):"]
        shown, more = _limited(plan.consolidation)
        lines += [
            f"  {m['reason']}/{m['method']} {m['action']} {', '.join(m['nodes'])} at {m['at']} -> "
            f"{_replacements(m['replacements']) if m['replacements'] else 'deleted'} "
            f"(saves {_money(m['savingsPerHour'])}/h)"
            for m in shown
        ]
        lines += [f"  ... {more} more"] if more else []
    if plan.blockers:
        lines += ["", "blockers:"]
        for blocker in plan.blockers[:MAX_LISTED]:
            lines.append(
                f"  {blocker.node} ({blocker.nodepool}) {blocker.code} [{_blocker_state(blocker)}]: "
                f"{blocker.message}"
            )
    for title, pending in (
        ("pods left unschedulable by the change", plan.newly_pending),
        ("pods pending before and after", plan.still_pending),
    ):
        if pending:
            lines += ["", f"{title} ({len(pending)}):"]
            shown_items, more = _limited(sorted(pending.items()))
            lines += [f"  {key}: {reason}" for key, reason in shown_items]
            lines += [f"  ... {more} more"] if more else []
    lines += ["", *price_lines(plan)]
    return "\n".join(lines) + "\n"


def price_lines(plan: PlanResult) -> list[str]:
    """Where the costs come from, and nodes left out of them for want of a price."""
    lines = [f"prices: {source}" for source in plan.price_sources]
    missing = sorted(set(plan.current.unpriced) | set(plan.proposed.unpriced))
    if missing:
        lines.append(f"unpriced: {', '.join(missing)} (no offering in the catalogue; not in the costs)")
    return lines


def _baseline_churn(plan: PlanResult) -> str:
    assert plan.baseline is not None
    churn = plan.baseline[1]
    return (
        f"{churn['nodesDisrupted']} node(s) disrupted, {churn['nodesLaunched']} launched, "
        f"{churn['podsEvicted']} pod(s) evicted by the current NodePools alone"
    )


def _blocker_state(blocker: Blocker) -> str:
    since = blocker.first_seen.strftime("%Y-%m-%dT%H:%M:%SZ")
    if blocker.cleared_at is None:
        return f"since {since}, still blocked"
    return f"{since} until {blocker.cleared_at.strftime('%Y-%m-%dT%H:%M:%SZ')}"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out.extend("| " + " | ".join(_md_escape(c) for c in row) + " |" for row in rows)
    return out


def render_markdown(plan: PlanResult) -> str:
    """A pull-request comment: a headline, cost table, then details in collapsible sections."""
    state, risk = verdict(plan)
    icon = {"blocked": ":no_entry:", "review": ":warning:", "safe": ":white_check_mark:"}[state]
    removed = f"{len(plan.removed_nodes)} node(s) removed with their NodePool, " if plan.removed_nodes else ""
    summary = (
        f"**{headline(plan)}**; {removed}{plan.churn['nodesDisrupted']} node(s) disrupted, "
        f"{plan.churn['podsEvicted']} pod(s) evicted, settles after {_duration(plan)}."
    )
    new_pending = plan.newly_pending
    lines = [f"{icon} **{state.upper()}**: {risk}", "", "### Adze NodePool plan", "", summary, ""]
    if new_pending:
        lines += [f":warning: **{len(new_pending)} pod(s) would become unschedulable.**", ""]
    risks = risk_lines(plan)
    if risks:
        lines += [f"- {line}" for line in risks] + [""]
    lines += [f"NodePools: {_changes_line(plan)}", ""]
    if plan.baseline is not None:
        lines += [f"Without the change: {_baseline_churn(plan)}.", ""]
    lines += _md_table(["", "nodes", "$/h", "$/month", "Δ $/h", "pending pods"], _cost_rows(plan))
    lines += [
        "",
        f"- current: {_mix(plan.current.node_mix)}",
        f"- after: {_mix(plan.proposed.node_mix)}",
        f"- fresh provision: {_mix(plan.floor.node_mix)}",
        "",
    ]
    note = _fresh_note(plan)
    if note:
        lines += [note, ""]
    if plan.drift:
        rows = [[d["node"], d["driftReason"], d["at"], _replacements(d["replacements"])] for d in plan.drift]
        lines += _details(f"Drifted nodes ({len(plan.drift)})", ["node", "drift", "at", "replaced by"], rows)
    if plan.consolidation:
        rows = [
            [
                ", ".join(m["nodes"]),
                f"{m['reason']}/{m['method']}",
                m["action"],
                _replacements(m["replacements"]) if m["replacements"] else "-",
                _money(m["savingsPerHour"]),
            ]
            for m in plan.consolidation
        ]
        lines += _details(
            f"Consolidation moves ({len(plan.consolidation)})",
            ["nodes", "reason", "action", "replacements", "saves/h"],
            rows,
        )
    if plan.blockers:
        rows = [[b.node, b.code, _blocker_state(b), b.message] for b in plan.blockers]
        lines += _details(f"Blockers ({len(plan.blockers)})", ["node", "blocker", "state", "detail"], rows)
    if new_pending:
        rows = [[key, reason] for key, reason in sorted(new_pending.items())]
        lines += _details(f"Pods left unschedulable ({len(new_pending)})", ["pod", "why"], rows, open_=True)
    lines.append(
        "<sub>Computed offline by `python -m reconciler plan` with Adze's provisioning and disruption "
        "engine on a cluster snapshot; prices are the simulated offerings' list prices.</sub>"
    )
    lines += [f"<sub>{_md_escape(line)}</sub>" for line in price_lines(plan)]
    return "\n".join(lines) + "\n"


def _details(
    summary: str, headers: Sequence[str], rows: Sequence[Sequence[str]], open_: bool = False
) -> list[str]:
    shown, more = _limited(rows)
    out = [f"<details{' open' if open_ else ''}><summary>{escape(summary)}</summary>", ""]
    out += _md_table(headers, shown)
    if more:
        out.append(f"\n... and {more} more")
    out += ["", "</details>", ""]
    return out


def render_html(plan: PlanResult) -> str:
    cost_rows = "".join(
        "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in _cost_rows(plan)
    )
    section = (
        '<section id="plan"><h2>Plan</h2>'
        f"<p>NodePools: {escape(_changes_line(plan))}</p>"
        '<table id="plan-costs"><thead><tr><th></th><th>Nodes</th><th>$/h</th><th>$/month</th><th>Δ $/h</th>'
        f"<th>Pending pods</th></tr></thead><tbody>{cost_rows}</tbody></table>"
        f"<p>Churn: {plan.churn['nodesDisrupted']} node(s) disrupted, "
        f"{plan.churn['nodesLaunched']} launched, "
        f"{plan.churn['podsEvicted']} pod(s) evicted; settles after {escape(_duration(plan))}.</p>"
    )
    section += "".join(f'<p class="prices">{escape(line)}</p>' for line in price_lines(plan))
    if plan.blockers:
        rows = "".join(
            f"<tr><td>{escape(b.node)}</td><td>{escape(b.code)}</td>"
            f"<td>{escape(_blocker_state(b))}</td>"
            f'<td class="reason">{escape(b.message)}</td></tr>'
            for b in plan.blockers
        )
        section += (
            '<h2>Blockers</h2><table id="blockers"><thead><tr><th>Node</th><th>Blocker</th><th>State</th>'
            f"<th>Detail</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    section += "</section>"
    return render_report(
        "Adze plan",
        f"{plan.proposed_source} against {plan.snapshot}",
        plan.frames,
        records=plan.records,
        extra_sections=[
            section,
            pending_section(plan.newly_pending, "Pods left unschedulable by the change"),
        ],
    )
