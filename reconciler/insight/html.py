"""One self-contained HTML page for ``simulate --report`` and ``plan --report``.

No scripts, fonts or images are fetched: styles are inline, charts are inline SVG. Element ids are
stable (``summary``, ``chart-nodes``, ``chart-cost``, ``chart-pending``, ``chart-disruptions``,
``nodes``) so the page can be checked, and it prints cleanly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from reconciler.insight import charts
from reconciler.insight.frames import HOURS_PER_MONTH, Frame, NodeRow, price_sources

CAPACITY_ORDER = ("spot", "on-demand", "reserved", "unknown")

STYLE = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;background:#f6f7f9;
color:#1d2430}
header{background:#1d3557;color:#fff;padding:18px 28px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;opacity:.8;font-size:13px}main{padding:18px 28px;max-width:1400px}
h2{font-size:17px;margin:26px 0 10px}.cards{display:flex;flex-wrap:wrap;gap:12px}
.card{background:#fff;border-radius:8px;padding:12px 16px;min-width:150px;box-shadow:0 1px 2px #0002}
.card .value{font-size:22px;font-weight:600}.card .label{font-size:12px;color:#5c6677}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(460px,1fr));gap:14px}
.chart{background:#fff;border-radius:8px;padding:8px;box-shadow:0 1px 2px #0002}
.chart svg{width:100%;height:auto}
.chart-title{font-size:13px;font-weight:600;fill:#1d2430}.tick{font-size:10px;fill:#5c6677}
.legend{font-size:11px;fill:#1d2430}.grid{stroke:#e4e7ec}.axis{stroke:#98a2b3}
table{border-collapse:collapse;background:#fff;font-size:13px;box-shadow:0 1px 2px #0002;width:100%}
th,td{padding:5px 9px;border-bottom:1px solid #eceff3;text-align:left;white-space:nowrap}
th{background:#eef1f5;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
.meter{display:inline-block;width:120px;height:10px;background:#e4e7ec;border-radius:5px;overflow:hidden;
vertical-align:middle;margin-right:6px}.meter span{display:block;height:100%}
.meter .cpu{background:#3a86ff}.meter .memory{background:#8338ec}.meter .over{background:#d62828}
.tag{display:inline-block;padding:1px 7px;border-radius:9px;font-size:11px;color:#fff}
.tag.spot{background:#2a9d8f}.tag.on-demand{background:#e76f51}.tag.reserved{background:#264653}
.tag.unknown{background:#8d99ae}.reason{white-space:normal;max-width:760px}.muted{color:#5c6677}
"""


def _money(value: float) -> str:
    return f"${value:,.4f}"


def card(label: str, value: str, key: str) -> str:
    return (
        f'<div class="card" data-key="{escape(key)}"><div class="value">{escape(value)}</div>'
        f'<div class="label">{escape(label)}</div></div>'
    )


def _meter(fraction: float, css: str) -> str:
    width = min(100.0, max(0.0, fraction * 100))
    over = " over" if fraction > 1 else ""
    return (
        f'<span class="meter" data-fraction="{fraction:.4f}"><span class="{css}{over}" '
        f'style="width:{width:.1f}%"></span></span>{fraction * 100:.0f}%'
    )


def node_table(rows: Sequence[NodeRow], table_id: str = "nodes") -> str:
    body = []
    for row in sorted(rows, key=lambda r: (not r.managed, r.nodepool, r.name)):
        capacity = row.capacity_type or "unknown"
        body.append(
            f'<tr data-node="{escape(row.name)}"><td>{escape(row.name)}</td>'
            f"<td>{escape(row.nodepool or '(unmanaged)')}</td><td>{escape(row.instance_type or '-')}</td>"
            f'<td><span class="tag {escape(capacity)}">{escape(capacity)}</span></td>'
            f'<td>{escape(row.zone or "-")}</td><td class="num" title="{escape(row.price_source)}">'
            f'{_money(row.price) if row.priced else "unpriced"}</td>'
            f"<td>{_meter(row.cpu_fraction, 'cpu')}</td><td>{_meter(row.memory_fraction, 'memory')}</td>"
            f'<td class="num">{row.pods}</td></tr>'
        )
    total = sum(r.price for r in rows)
    return (
        f'<table id="{escape(table_id)}"><thead><tr><th>Node</th><th>NodePool</th><th>Instance type</th>'
        "<th>Capacity</th><th>Zone</th><th>$/h</th><th>CPU requested</th><th>Memory requested</th>"
        f"<th>Pods</th></tr></thead><tbody>{''.join(body)}</tbody>"
        f'<tfoot><tr><th colspan="5">{len(rows)} nodes</th><th class="num">{_money(total)}</th>'
        '<th colspan="3"></th></tr></tfoot></table>'
        + "".join(f'<p class="prices">prices: {escape(source)}</p>' for source in price_sources(rows))
    )


def charts_section(frames: Sequence[Frame]) -> str:
    labels = [str(i) for i in range(len(frames))]
    tips = [f"step {i}: {f.step} @ {f.clock.strftime('%Y-%m-%d %H:%M:%S')}" for i, f in enumerate(frames)]
    kinds = [k for k in CAPACITY_ORDER if any(k in f.nodes_by_capacity_type() for f in frames)]
    kinds += sorted({k for f in frames for k in f.nodes_by_capacity_type()} - set(kinds))
    by_type = {k: [float(f.nodes_by_capacity_type().get(k, 0)) for f in frames] for k in kinds or ["unknown"]}
    cost = [f.cost_per_hour for f in frames]
    pending = [float(f.pending) for f in frames]
    churn = {
        "launched": [float(f.launched) for f in frames],
        "disrupted": [float(f.disrupted) for f in frames],
    }
    blocks = [
        ("chart-nodes", charts.stacked_bars("nodes", "Nodes by capacity type", by_type, labels, tips)),
        ("chart-cost", charts.line("cost", "Cost ($/h)", cost, labels, tips, "cost", lambda v: f"${v:.3g}")),
        ("chart-pending", charts.line("pending", "Pending pods", pending, labels, tips, "pending")),
        ("chart-disruptions", charts.bars("disruptions", "Nodes launched / disrupted", churn, labels, tips)),
    ]
    inner = "".join(f'<div class="chart" id="{cid}">{svg}</div>' for cid, svg in blocks)
    return f'<section><h2>Over the steps</h2><div class="charts">{inner}</div></section>'


def pending_section(pending: Mapping[str, str], title: str = "Pending pods") -> str:
    if not pending:
        return f'<section id="pending"><h2>{escape(title)}</h2><p class="muted">None.</p></section>'
    rows = "".join(
        f'<tr><td>{escape(key)}</td><td class="reason">{escape(reason)}</td></tr>'
        for key, reason in sorted(pending.items())
    )
    return (
        f'<section id="pending"><h2>{escape(title)} ({len(pending)})</h2>'
        f"<table><thead><tr><th>Pod</th><th>Why</th></tr></thead><tbody>{rows}</tbody></table></section>"
    )


def disruptions_section(records: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for index, record in enumerate(records):
        for item in record.get("disrupted") or []:
            replacements = ", ".join(item.get("replacements") or []) or "-"
            rows.append(
                f"<tr><td>{index}</td><td>{escape(record['clock'])}</td><td>{escape(item['node'])}</td>"
                f"<td>{escape(item['reason'])}</td><td>{escape(item['method'])}</td>"
                f"<td>{escape(item['action'])}</td><td>{escape(replacements)}</td>"
                f'<td class="num">{_money(item.get("savingsPerHour", 0.0))}</td></tr>'
            )
    if not rows:
        return '<section id="disruptions"><h2>Disruptions</h2><p class="muted">None.</p></section>'
    return (
        f'<section id="disruptions"><h2>Disruptions ({len(rows)})</h2><table><thead><tr><th>Step</th>'
        "<th>Clock</th><th>Node</th><th>Reason</th><th>Method</th><th>Action</th><th>Replacements</th>"
        f"<th>Savings/h</th></tr></thead><tbody>{''.join(rows)}</tbody></table></section>"
    )


def render_report(
    title: str,
    subtitle: str,
    frames: Sequence[Frame],
    *,
    records: Sequence[Mapping[str, Any]] = (),
    pending: Mapping[str, str] | None = None,
    extra_sections: Sequence[str] = (),
) -> str:
    """The page: summary cards, charts over ``frames``, extra sections, node table of the last frame."""
    last = frames[-1]
    disrupted = sum(len(r.get("disrupted") or []) for r in records)
    cards = "".join(
        [
            card("nodes at the end", str(len(last.nodes)), "nodes"),
            card("cost per hour", _money(last.cost_per_hour), "cost-hour"),
            card("cost per month", f"${last.cost_per_hour * HOURS_PER_MONTH:,.2f}", "cost-month"),
            card("pending pods", str(last.pending), "pending"),
            card("nodes disrupted", str(disrupted), "disrupted"),
            card("steps", str(max(len(frames) - 1, 0)), "steps"),
        ]
    )
    parts = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<header><h1>{escape(title)}</h1><p>{escape(subtitle)}</p></header><main>",
        f'<section id="summary" class="cards">{cards}</section>',
        *extra_sections,
        charts_section(frames),
        f"<section><h2>Nodes after the last step</h2>{node_table(last.nodes)}</section>",
    ]
    if pending is not None:
        parts.append(pending_section(pending))
    if records:
        parts.append(disruptions_section(records))
    parts.append("</main></body></html>\n")
    return "".join(parts)
