"""``plan`` output: terminal text and Markdown for a pull-request comment (HTML: ``plan.html``).

Both read in the same order: the verdict and main risk, the risks in plain words, then the money
(now → settled, Δ), then the details (cost table, node mixes, drift order and times, consolidation,
blockers, stranded pods) — collapsed in Markdown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from reconciler.insight.plan.compute import Blocker, PlanResult
from reconciler.insight.plan.proposal import PoolChange
from reconciler.insight.plan.risks import headline, price_note, risk_lines, verdict
from reconciler.insight.plan.timeline import ASSUMPTIONS
from reconciler.model.durations import format_duration_short
from reconciler.model.meta import format_time
from reconciler.model.money import money

MAX_LISTED = 25  # rows per list in text and Markdown before "... N more"


def _mix(node_mix: Sequence[Mapping[str, Any]]) -> str:
    parts = [
        f"{m['count']}x {m['instanceType'] or '?'} {m['capacityType'] or '?'} "
        f"({m['nodepool'] or 'unmanaged'}, {money(m['costPerHour'], month=False)})"
        for m in node_mix
    ]
    return ", ".join(parts) or "no nodes"


def _replacements(items: Sequence[Mapping[str, Any]]) -> str:
    return (
        ", ".join(
            f"{r['nodeclaim']} ({r.get('instanceType') or '?'} {r.get('capacityType') or '?'}"
            + (f" {money(r['price'], month=False)})" if r.get("price") is not None else ")")
            for r in items
        )
        or "none (pods fit elsewhere)"
    )


def settled_label(plan: PlanResult) -> str:
    """What the end of the plan is: settled, or where the horizon cut it while it was still changing."""
    return "at horizon" if plan.horizon_reached else "settled"


def cost_rows(plan: PlanResult) -> list[tuple[str, str, str, str, str]]:
    """(label, nodes, cost, Δ against now, pending pods) for now, settled, fresh provision (and baseline)."""
    end = "at the horizon (still changing)" if plan.horizon_reached else "settled after the change"
    summaries = [("now", plan.current)]
    if plan.baseline is not None:
        summaries.append(("current config, settled", plan.baseline[0]))
    fresh = "fresh provision"
    if plan.floor.pending:  # pods it leaves pending cost nothing there: its price is not comparable
        fresh += f" (leaves {len(plan.floor.pending)} pod(s) pending: not comparable)"
    summaries += [(end, plan.proposed), (fresh, plan.floor)]
    return [
        (
            label,
            str(summary.nodes),
            money(summary.cost_per_hour),
            "-" if summary is plan.current else money(summary.cost_per_hour - plan.current.cost_per_hour, signed=True),
            str(len(summary.pending)),
        )
        for label, summary in summaries
    ]


COST_HEADERS = ("", "nodes", "cost", "Δ vs now", "pending pods")


def changes_line(plan: PlanResult) -> str:
    line = "; ".join(_describe_change(c) for c in plan.pool_changes) or "no NodePools"
    if plan.nodeclass_changes:
        line += " | EC2NodeClasses: " + "; ".join(_describe_change(c) for c in plan.nodeclass_changes)
    if plan.nodeoverlay_changes:
        line += " | NodeOverlays: " + "; ".join(_describe_change(c) for c in plan.nodeoverlay_changes)
        line += f" (gate NodeOverlay {plan.overlay_gate})"
    return line


def _describe_change(change: PoolChange) -> str:
    text = f"{change.name}: {change.change}"
    if change.fields:
        text += f" ({', '.join(change.fields[:4])}{', ...' if len(change.fields) > 4 else ''})"
    return text


def duration(plan: PlanResult) -> str:
    text = f"{format_duration_short(round(plan.duration.total_seconds()))} (at {format_time(plan.settled_at)})"
    if plan.horizon_reached:
        text = f"more than {text}: horizon reached, still changing"
    return text


def churn_line(plan: PlanResult) -> str:
    churn = plan.churn
    removed = f"{len(plan.removed_nodes)} node(s) removed with their NodePool, " if plan.removed_nodes else ""
    return (f"{removed}{churn['nodesDisrupted']} node(s) disrupted, {churn['nodesLaunched']} launched, "
            f"{churn['podsEvicted']} pod(s) evicted; settles after {duration(plan)}")


def drift_rows(plan: PlanResult) -> list[list[str]]:
    """Every drifted node in the order it is replaced, with when; then those left in place."""
    rows = [
        [d["node"], d["driftReason"], d["at"], d.get("replacementsReadyAt") or "-", d.get("drainedAt") or "-",
         _replacements(d["replacements"])]
        for d in sorted(plan.drift, key=lambda d: (d["at"], d["node"]))
    ]
    rows += [
        [s["node"], s["driftReason"], "-", "-", "-", f"not replaced: {', '.join(s['blockedBy']) or 'still waiting'}"]
        for s in plan.stuck_drift
    ]
    return rows


DRIFT_HEADERS = ("node", "drift", "started", "replacement ready", "drained", "replaced by")


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    out = ["  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    out.extend("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)
    return out


def _limited(items: Sequence[Any]) -> tuple[Sequence[Any], int]:
    return items[:MAX_LISTED], max(0, len(items) - MAX_LISTED)


def _fresh_note(plan: PlanResult) -> str:
    """A fresh provision is not a lower bound: say so when the settled cluster beats it, and when it leaves pods
    pending (they cost nothing there, so its price is not comparable)."""
    if plan.floor.pending:
        return (f"note: a fresh provision leaves {len(plan.floor.pending)} pod(s) pending, which cost nothing there: "
                "its price is not comparable with the settled cluster's.")
    gap = plan.floor.cost_per_hour - plan.proposed.cost_per_hour
    if gap <= 0.0005:
        return ""
    return (
        f"note: a fresh provision places every pod in one batch and costs {money(gap)} more than the "
        "settled cluster here; consolidation packs tighter than a first provision."
    )


def consolidation_rows(plan: PlanResult) -> list[list[str]]:
    return [
        [
            ", ".join(m["nodes"]),
            f"{m['reason']}/{m['method']}",
            m["action"],
            m["at"],
            _replacements(m["replacements"]) if m["replacements"] else "-",
            money(m["savingsPerHour"], month=False),
        ]
        for m in plan.consolidation
    ]


CONSOLIDATION_HEADERS = ("nodes", "reason", "action", "started", "replacements", "saves")


def render_text(plan: PlanResult) -> str:
    state, risk = verdict(plan)
    new_pending = plan.newly_pending
    lines = [
        f"{state.upper()}: {risk}",
        f"plan: {plan.proposed_source} against {plan.snapshot} @ {format_time(plan.start)}",
    ]
    if new_pending:
        lines.append(f"risk: {len(new_pending)} pod(s) would become unschedulable (listed below)")
    lines.extend(f"risk: {line}" for line in risk_lines(plan))
    lines.append(f"cost: {headline(plan)}; {price_note(plan)}")
    lines.append(f"churn: {churn_line(plan)}; {ASSUMPTIONS}")
    if plan.baseline is not None:
        lines.append(f"without the change: {_baseline_churn(plan)}")
    lines.append(f"NodePools: {changes_line(plan)}")
    lines.append("")
    lines.extend(_table(COST_HEADERS, cost_rows(plan)))
    lines.append("")
    lines.append(f"now mix:         {_mix(plan.current.node_mix)}")
    lines.append(f"{settled_label(plan) + ' mix:':<16} {_mix(plan.proposed.node_mix)}")
    lines.append(f"fresh mix:       {_mix(plan.floor.node_mix)}")
    note = _fresh_note(plan)
    if note:
        lines.append(note)
    if plan.removed_nodes:
        lines += ["", f"deleted with their removed NodePool ({len(plan.removed_nodes)}): "
                  + ", ".join(plan.removed_nodes)]
    for title, headers, rows in (
        (f"drifted nodes, in replacement order ({len(plan.drift) + len(plan.stuck_drift)})", DRIFT_HEADERS,
         drift_rows(plan)),
        (f"consolidation moves ({len(plan.consolidation)})", CONSOLIDATION_HEADERS, consolidation_rows(plan)),
    ):
        if rows:
            shown, more = _limited(rows)
            lines += ["", f"{title}:"] + [f"  {line}" for line in _table(headers, shown)]
            lines += [f"  ... {more} more"] if more else []
    if plan.blockers:
        lines += ["", "blockers:"]
        for blocker in plan.blockers[:MAX_LISTED]:
            lines.append(
                f"  {blocker.node} ({blocker.nodepool}) {blocker.code} [{blocker_state(blocker)}]: "
                f"{blocker.message}"
            )
    for title, pending in (
        ("pods left unschedulable by the change", new_pending),
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


def blocker_state(blocker: Blocker) -> str:
    since = format_time(blocker.first_seen)
    if blocker.cleared_at is None:
        return f"since {since}, still blocked"
    return f"{since} until {format_time(blocker.cleared_at)}"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out.extend("| " + " | ".join(_md_escape(c) for c in row) + " |" for row in rows)
    return out


def render_markdown(plan: PlanResult) -> str:
    """A pull-request comment: verdict and main risk, the risks, the money, then collapsed details."""
    state, risk = verdict(plan)
    icon = {"blocked": ":no_entry:", "review": ":warning:", "safe": ":white_check_mark:"}[state]
    new_pending = plan.newly_pending
    lines = [f"{icon} **{state.upper()}**: {_md_escape(risk)}", "", "### Adze NodePool plan", ""]
    risks = [f"**{len(new_pending)} pod(s) would become unschedulable** (listed below)"] if new_pending else []
    risks += [_md_escape(line) for line in risk_lines(plan)]
    lines += [f"- {line}" for line in risks] or ["- no risk found: nothing is disrupted, evicted or stranded"]
    lines += [
        "",
        f"**Cost:** {headline(plan)} ({price_note(plan)}).",
        "",
        f"**Churn:** {churn_line(plan)} ({ASSUMPTIONS}).",
        "",
        f"NodePools: {_md_escape(changes_line(plan))}",
        "",
    ]
    if plan.baseline is not None:
        lines += [f"Without the change: {_baseline_churn(plan)}.", ""]
    mixes = [["now", _mix(plan.current.node_mix)], [settled_label(plan), _mix(plan.proposed.node_mix)],
             ["fresh provision", _mix(plan.floor.node_mix)]]
    lines += _details("Cost and node mixes", COST_HEADERS, cost_rows(plan),
                      after=["", *_md_table(["", "nodes"], mixes), "", _fresh_note(plan)])
    if plan.removed_nodes:
        rows = [[name] for name in plan.removed_nodes]
        lines += _details(f"Deleted with their removed NodePool ({len(plan.removed_nodes)})", ["node"], rows)
    drift = drift_rows(plan)
    if drift:
        lines += _details(f"Drifted nodes, in replacement order ({len(drift)})", DRIFT_HEADERS, drift)
    if plan.consolidation:
        lines += _details(f"Consolidation moves ({len(plan.consolidation)})", CONSOLIDATION_HEADERS,
                          consolidation_rows(plan))
    if plan.blockers:
        rows = [[b.node, b.code, blocker_state(b), b.message] for b in plan.blockers]
        lines += _details(f"Blockers ({len(plan.blockers)})", ["node", "blocker", "state", "detail"], rows)
    if new_pending:
        rows = [[key, reason] for key, reason in sorted(new_pending.items())]
        lines += _details(f"Pods left unschedulable ({len(new_pending)})", ["pod", "why"], rows, open_=True)
    lines.append(
        "<sub>Computed offline by `python -m reconciler plan` with Adze's provisioning and disruption "
        f"engine on a cluster snapshot; {price_note(plan)}.</sub>"
    )
    lines += [f"<sub>{_md_escape(line)}</sub>" for line in price_lines(plan)]
    return "\n".join(lines) + "\n"


def _details(
    summary: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    open_: bool = False,
    after: Sequence[str] = (),
) -> list[str]:
    shown, more = _limited(rows)
    out = [f"<details{' open' if open_ else ''}><summary>{escape(summary)}</summary>", ""]
    out += _md_table(headers, shown)
    if more:
        out.append(f"\n... and {more} more")
    out += [line for line in after if line is not None]
    out += ["", "</details>", ""]
    return out
