"""``plan --report``: the HTML report's plan sections (verdict and risks, costs per NodePool, the node
diff between now and settled, drift order, blockers) around the shared report page (``html``)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from reconciler.insight.html import pending_section, render_report, simple_table
from reconciler.insight.plan.compute import PlanResult
from reconciler.insight.plan.render import (
    CONSOLIDATION_HEADERS,
    COST_HEADERS,
    DRIFT_HEADERS,
    blocker_state,
    changes_line,
    churn_line,
    consolidation_rows,
    cost_rows,
    drift_rows,
    settled_label,
)
from reconciler.insight.plan.risks import headline, price_note, risk_lines, verdict
from reconciler.insight.plan.timeline import ASSUMPTIONS
from reconciler.model.money import money


def pool_cost_rows(plan: PlanResult) -> list[list[str]]:
    """Per NodePool: nodes and cost now and settled (or at the horizon), and the difference."""
    before = {m["nodepool"] or "(unmanaged)": m for m in _by_pool(plan.current.node_mix)}
    after = {m["nodepool"] or "(unmanaged)": m for m in _by_pool(plan.proposed.node_mix)}
    rows = []
    for pool in sorted(set(before) | set(after)):
        was, now = before.get(pool, {"count": 0, "cost": 0.0}), after.get(pool, {"count": 0, "cost": 0.0})
        rows.append([pool, str(was["count"]), money(was["cost"]), str(now["count"]), money(now["cost"]),
                     money(now["cost"] - was["cost"], signed=True)])
    return rows


def _by_pool(mix: Sequence[dict]) -> list[dict]:
    pools: dict[str | None, dict] = {}
    for group in mix:
        entry = pools.setdefault(group["nodepool"], {"nodepool": group["nodepool"], "count": 0, "cost": 0.0})
        entry["count"] += group["count"]
        entry["cost"] += group["costPerHour"]
    return list(pools.values())


def render_plan_html(plan: PlanResult) -> str:
    state, risk = verdict(plan)
    risks = risk_lines(plan)
    if plan.newly_pending:
        risks.insert(0, f"{len(plan.newly_pending)} pod(s) would become unschedulable")
    section = (
        f'<section id="plan"><h2>Plan</h2><p id="verdict" class="verdict {state}"><strong>{state.upper()}</strong>: '
        f"{escape(risk)}</p>"
        + ("<ul id=\"risks\">" + "".join(f"<li>{escape(line)}</li>" for line in risks) + "</ul>" if risks else "")
        + f"<p><strong>Cost:</strong> {escape(headline(plan))} ({escape(price_note(plan))}).</p>"
        f"<p><strong>Churn:</strong> {escape(churn_line(plan))} ({escape(ASSUMPTIONS)}).</p>"
        f"<p>NodePools: {escape(changes_line(plan))}</p>"
        + simple_table("plan-costs", COST_HEADERS, cost_rows(plan))
        + "<h2>Cost per NodePool</h2>"
        + simple_table("pool-costs", ("NodePool", "nodes now", "cost now", f"nodes {settled_label(plan)}",
                                      f"cost {settled_label(plan)}", "Δ"), pool_cost_rows(plan))
    )
    drift = drift_rows(plan)
    if drift:
        section += "<h2>Drifted nodes, in replacement order</h2>" + simple_table("drift", DRIFT_HEADERS, drift)
    if plan.consolidation:
        section += "<h2>Consolidation moves</h2>" + simple_table(
            "consolidation", CONSOLIDATION_HEADERS, consolidation_rows(plan)
        )
    if plan.blockers:
        rows = [[b.node, b.code, blocker_state(b), b.message] for b in plan.blockers]
        section += "<h2>Blockers</h2>" + simple_table("blockers", ("Node", "Blocker", "State", "Detail"), rows)
    section += "</section>"
    return render_report(
        "Adze plan",
        f"{plan.proposed_source} against {plan.snapshot}",
        plan.frames,
        records=plan.records,
        extra_sections=[section, pending_section(plan.newly_pending, "Pods left unschedulable by the change")],
    )
