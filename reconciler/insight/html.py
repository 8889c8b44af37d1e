"""One self-contained HTML page for ``simulate --report`` and ``plan --report``.

Nothing is fetched: styles and the one small script are inline, charts are inline SVG. Element ids are
stable (``summary``, ``chart-nodes``, ``chart-cost``, ``chart-pending``, ``chart-disruptions``,
``nodes``, ``node-diff``, ``disruptions``) so the page can be checked, and it prints cleanly. Charts and
tables number steps alike: ``start`` is the cluster as loaded, step N is entry N of the result document.
The node table is grouped by NodePool and instance type, sortable by any column and filterable (the
script only reorders and hides rows the page already holds; without it the table reads as is).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape
from itertools import pairwise
from typing import Any

from reconciler.insight import charts
from reconciler.insight.frames import Frame, NodeRow, price_sources
from reconciler.insight.happenings import command_starts, happenings, moment
from reconciler.model.meta import format_time
from reconciler.model.money import dollars, money, per_month

CAPACITY_ORDER = ("spot", "on-demand", "reserved", "unknown")

STYLE = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;background:#f6f7f9;
color:#1d2430}
header{background:#1d3557;color:#fff;padding:18px 28px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;opacity:.8;font-size:13px}main{padding:18px 28px;max-width:1400px}
h2{font-size:17px;margin:26px 0 10px}.cards{display:flex;flex-wrap:wrap;gap:12px}
.card{background:#fff;border-radius:8px;padding:12px 16px;min-width:150px;box-shadow:0 1px 2px #0002}
.card .value{font-size:22px;font-weight:600}.card .label{font-size:12px;color:#5c6677}
.card .peak{font-size:12px;color:#1d2430;margin-top:2px}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(460px,1fr));gap:14px}
.chart{background:#fff;border-radius:8px;padding:8px;box-shadow:0 1px 2px #0002}
.chart svg{width:100%;height:auto}
.chart-title{font-size:13px;font-weight:600;fill:#1d2430}.tick{font-size:10px;fill:#5c6677}
.legend{font-size:11px;fill:#1d2430}.grid{stroke:#e4e7ec}.axis{stroke:#98a2b3}
table{border-collapse:collapse;background:#fff;font-size:13px;box-shadow:0 1px 2px #0002;width:100%}
th,td{padding:5px 9px;border-bottom:1px solid #eceff3;text-align:left;white-space:nowrap}
th{background:#eef1f5;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
th[data-sort]{cursor:pointer}th[data-sort]:after{content:" \\2195";color:#98a2b3}
tr.group th{background:#dde3ec;font-weight:600}
.controls{margin:6px 0 8px;display:flex;gap:12px;align-items:center;font-size:13px}
.controls input{padding:4px 8px;min-width:260px}
.meter{display:inline-block;width:120px;height:10px;background:#e4e7ec;border-radius:5px;overflow:hidden;
vertical-align:middle;margin-right:6px}.meter span{display:block;height:100%}
.meter .cpu{background:#3a86ff}.meter .memory{background:#8338ec}.meter .over{background:#d62828}
.tag{display:inline-block;padding:1px 7px;border-radius:9px;font-size:11px;color:#fff}
.tag.spot{background:#2a9d8f}.tag.on-demand{background:#e76f51}.tag.reserved{background:#264653}
.tag.unknown{background:#8d99ae}.reason{white-space:normal;max-width:760px}.muted{color:#5c6677}
.verdict{font-size:15px}.verdict.blocked{color:#b00020}.verdict.review{color:#9a6700}.verdict.safe{color:#1a7f37}
.added td:first-child{color:#1a7f37}.removed td:first-child{color:#b00020}
"""

# Sorting, filtering and grouping of node tables: reorders the rows the page holds (vanilla JS, no fetch).
SCRIPT = """
(function () {
  // A folded table's filter; a link can carry it: #rows-<table id>=TEXT (opens the table, filtered).
  var hash = {};
  (window.location.hash || "").replace(/^#/, "").split("&").forEach(function (pair) {
    var parts = pair.split("=");
    if (parts[0]) { hash[parts[0]] = decodeURIComponent(parts[1] || ""); }
  });
  document.querySelectorAll("input[data-filter-table]").forEach(function (input) {
    var table = document.getElementById(input.dataset.filterTable);
    function apply() {
      var query = (input.value || "").toLowerCase();
      var shown = 0;
      table.tBodies[0].querySelectorAll("tr").forEach(function (row) {
        var keep = row.textContent.toLowerCase().indexOf(query) >= 0;
        row.style.display = keep ? "" : "none";
        shown += keep ? 1 : 0;
      });
      table.dataset.shown = String(shown);
    }
    input.addEventListener("input", apply);
    var wanted = hash["rows-" + input.dataset.filterTable];
    if (wanted !== undefined) {
      input.value = wanted;
      input.closest("details").open = true;
      apply();
    }
  });
})();
(function () {
  document.querySelectorAll("table.node-table").forEach(function (table) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.querySelectorAll("tr[data-node]"));
    var headers = {};
    body.querySelectorAll("tr.group").forEach(function (row) { headers[row.dataset.groupKey] = row; });
    var filter = document.getElementById(table.id + "-filter");
    var grouping = document.getElementById(table.id + "-group");
    var key = "name", direction = 1;
    // A link can carry the view: #filter=TEXT&sort=-price&group=pool (what the page shows on load).
    var params = {};
    (window.location.hash || "").replace(/^#/, "").split("&").forEach(function (pair) {
      var parts = pair.split("=");
      if (parts[0]) { params[parts[0]] = decodeURIComponent(parts[1] || ""); }
    });
    if (params.filter) { filter.value = params.filter; }
    if (params.group !== undefined) { grouping.value = params.group; }
    if (params.sort) { key = params.sort.replace(/^-/, ""); direction = params.sort.charAt(0) === "-" ? -1 : 1; }
    var NUMERIC = {price: 1, cpu: 1, memory: 1, pods: 1, accelerators: 1};
    function value(row, name) {
      var text = row.dataset[name] || "";
      return NUMERIC[name] ? (parseFloat(text) || 0) : text;
    }
    function compare(a, b) {
      var x = value(a, key), y = value(b, key);
      return (x < y ? -1 : x > y ? 1 : 0) * direction;
    }
    function render() {
      var query = (filter.value || "").toLowerCase();
      var by = grouping.value;
      var shown = rows.filter(function (row) { return row.textContent.toLowerCase().indexOf(query) >= 0; });
      shown.sort(function (a, b) {
        if (by && a.dataset[by] !== b.dataset[by]) { return a.dataset[by] < b.dataset[by] ? -1 : 1; }
        return compare(a, b);
      });
      while (body.firstChild) { body.removeChild(body.firstChild); }
      var last = null;
      shown.forEach(function (row) {
        if (by && row.dataset[by] !== last) {
          last = row.dataset[by];
          if (headers[by + ":" + last]) { body.appendChild(headers[by + ":" + last]); }
        }
        body.appendChild(row);
      });
      table.dataset.shown = String(shown.length);
    }
    table.querySelectorAll("th[data-sort]").forEach(function (th) {
      th.addEventListener("click", function () {
        direction = key === th.dataset.sort ? -direction : 1;
        key = th.dataset.sort;
        render();
      });
    });
    filter.addEventListener("input", render);
    grouping.addEventListener("change", render);
    render();
  });
})();
"""


def card(label: str, value: str, key: str, peak: str = "") -> str:
    extra = f'<div class="peak">{escape(peak)}</div>' if peak else ""
    return (
        f'<div class="card" data-key="{escape(key)}"><div class="value">{escape(value)}</div>'
        f'<div class="label">{escape(label)}</div>{extra}</div>'
    )


def simple_table(table_id: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    wide = ' class="reason"'  # long text wraps
    body = "".join(
        "<tr>" + "".join(f"<td{wide if len(c) > 80 else ''}>{escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    if not rows:
        body = f'<tr><td colspan="{len(headers)}" class="muted">None.</td></tr>'
    table = f'<table id="{escape(table_id)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    return folded(table_id, table, len(rows))


FOLD_AFTER = 25  # rows a table shows open; longer ones are folded, with a filter


def folded(table_id: str, table: str, rows: int) -> str:
    """A table of more than ``FOLD_AFTER`` rows folded under a summary, with a box that hides the rows not
    containing its text (the page's script; without it the whole table shows when unfolded)."""
    if rows <= FOLD_AFTER:
        return table
    safe = escape(table_id)
    return (f'<details class="folded" data-rows="{rows}"><summary>{rows} rows (show)</summary>'
            f'<div class="controls"><label>Filter <input id="{safe}-rows-filter" type="search" '
            f'data-filter-table="{safe}" placeholder="any text of a row"></label></div>{table}</details>')


def _meter(fraction: float, css: str) -> str:
    width = min(100.0, max(0.0, fraction * 100))
    over = " over" if fraction > 1 else ""
    return (
        f'<span class="meter" data-fraction="{fraction:.4f}"><span class="{css}{over}" '
        f'style="width:{width:.1f}%"></span></span>{fraction * 100:.0f}%'
    )


def _group_rows(rows: Sequence[NodeRow], columns: int) -> str:
    """Header rows for both groupings (by NodePool, by NodePool and type): nodes and cost per group."""
    out = []
    for by, key_of in (("pool", _pool), ("pooltype", _pool_type)):
        groups: dict[str, list[NodeRow]] = {}
        for row in rows:
            groups.setdefault(key_of(row), []).append(row)
        for key, members in sorted(groups.items()):
            cost = sum(m.price for m in members)
            out.append(
                f'<tr class="group" data-group-key="{escape(by)}:{escape(key)}"><th colspan="{columns}">'
                f"{escape(key)} — {len(members)} node(s), {escape(money(cost))}</th></tr>"
            )
    return "".join(out)


def _pool(row: NodeRow) -> str:
    return row.nodepool or "(unmanaged)"


def _pool_type(row: NodeRow) -> str:
    return f"{_pool(row)} / {row.instance_type or '-'}"


def node_table(rows: Sequence[NodeRow], table_id: str = "nodes") -> str:
    body = []
    for row in sorted(rows, key=lambda r: (not r.managed, r.nodepool, r.instance_type, r.name)):
        capacity = row.capacity_type or "unknown"
        accelerators = (f"{row.accelerators_requested}/{row.accelerators_allocatable} {row.accelerator}"
                        if row.accelerator else "-")
        data = {
            "node": row.name, "name": row.name, "pool": _pool(row), "pooltype": _pool_type(row),
            "type": row.instance_type, "capacity": capacity, "zone": row.zone, "price": f"{row.price:.6f}",
            "cpu": f"{row.cpu_fraction:.4f}", "memory": f"{row.memory_fraction:.4f}", "pods": str(row.pods),
            "accelerators": str(row.accelerators_allocatable),
        }
        attributes = " ".join(f'data-{k}="{escape(v)}"' for k, v in data.items())
        body.append(
            f"<tr {attributes}><td>{escape(row.name)}</td>"
            f"<td>{escape(_pool(row))}</td><td>{escape(row.instance_type or '-')}</td>"
            f'<td><span class="tag {escape(capacity)}">{escape(capacity)}</span></td>'
            f'<td>{escape(row.zone or "-")}</td><td class="num" title="{escape(row.price_source)}">'
            f'{escape(money(row.price, month=False)) if row.priced else "unpriced"}</td>'
            f"<td>{_meter(row.cpu_fraction, 'cpu')}</td><td>{_meter(row.memory_fraction, 'memory')}</td>"
            f'<td class="num">{row.pods}</td><td>{escape(accelerators)}</td></tr>'
        )
    columns = (("name", "Node"), ("pool", "NodePool"), ("type", "Instance type"), ("capacity", "Capacity"),
               ("zone", "Zone"), ("price", "Price"), ("cpu", "CPU requested"), ("memory", "Memory requested"),
               ("pods", "Pods"), ("accelerators", "GPU/accelerators"))
    head = "".join(f'<th data-sort="{key}">{escape(title)}</th>' for key, title in columns)
    total = sum(r.price for r in rows)
    safe_id = escape(table_id)
    controls = (
        f'<div class="controls"><label>Filter <input id="{safe_id}-filter" type="search" '
        'placeholder="node, pool, type, zone, capacity"></label>'
        f'<label>Group by <select id="{safe_id}-group"><option value="pooltype" selected>NodePool and type</option>'
        '<option value="pool">NodePool</option><option value="">nothing</option></select></label></div>'
    )
    return (
        f'{controls}<table id="{safe_id}" class="node-table" data-shown="{len(rows)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{_group_rows(rows, len(columns))}{''.join(body)}</tbody>"
        f'<tfoot><tr><th colspan="5">{len(rows)} nodes</th><th class="num">{escape(money(total))}</th>'
        f'<th colspan="{len(columns) - 6}"></th></tr></tfoot></table>'
        + "".join(f'<p class="prices">prices: {escape(source)}</p>' for source in price_sources(rows))
    )


def node_diff(before: Sequence[NodeRow], after: Sequence[NodeRow]) -> str:
    """Nodes removed and added between the start and the end (the kept ones counted)."""
    was = {row.name: row for row in before}
    now = {row.name: row for row in after}
    rows = []
    for name in sorted(set(was) ^ set(now)):
        row = was.get(name) or now[name]
        change = "removed" if name in was else "added"
        rows.append(
            f'<tr class="{change}" data-node="{escape(name)}"><td>{change}</td><td>{escape(name)}</td>'
            f"<td>{escape(_pool(row))}</td><td>{escape(row.instance_type or '-')}</td>"
            f"<td>{escape(row.capacity_type or '-')}</td><td>{escape(row.zone or '-')}</td>"
            f'<td class="num">{escape(money(row.price, month=False)) if row.priced else "unpriced"}</td></tr>'
        )
    kept = len(set(was) & set(now))
    cost_before, cost_after = sum(r.price for r in before), sum(r.price for r in after)
    body = "".join(rows) or '<tr><td colspan="7" class="muted">No node added or removed.</td></tr>'
    table = ('<table id="node-diff"><thead><tr><th>Change</th><th>Node</th><th>NodePool</th><th>Instance type</th>'
             f"<th>Capacity</th><th>Zone</th><th>Price</th></tr></thead><tbody>{body}</tbody></table>")
    return (
        f'<section id="node-diff-section"><h2>Nodes: start → end</h2><p>{kept} kept, '
        f"{len(set(was) - set(now))} removed, {len(set(now) - set(was))} added; cost {escape(money(cost_before))} → "
        f"{escape(money(cost_after))}.</p>{folded('node-diff', table, len(rows))}</section>"
    )


@dataclass(slots=True, frozen=True)
class NodesAt:
    """The nodes (by capacity type) and their cost from one instant on."""

    at: datetime
    step: str  # "start", or the step whose change this is
    kind: str
    by_capacity: dict[str, int]
    cost: float


def node_timeline(frames: Sequence[Frame], records: Sequence[Mapping[str, Any]]) -> list[NodesAt]:
    """The nodes over time, each change at its own instant: a node launched counts from its launch, a node
    disrupted until its command's drain is done (``finishedAt``), so a replacement's old and new nodes are both
    billed meanwhile; other changes at their step's clock. Needs a frame per step (the report's)."""
    if len(frames) != len(records) + 1:
        return [NodesAt(f.clock, "start" if i == 0 else str(i - 1), f.step, f.nodes_by_capacity_type(),
                        f.cost_per_hour) for i, f in enumerate(frames)]
    started = command_starts(records)
    changes: list[tuple[datetime, int, str, NodeRow | None]] = []  # (when, step, node, its row or None: gone)
    for index, record in enumerate(records):
        clock = moment(record["clock"])
        before = {row.name: row for row in frames[index].nodes}
        after = {row.name: row for row in frames[index + 1].nodes}
        finished = {item["node"]: moment(item["finishedAt"]) for item in record.get("disrupted") or []
                    if item.get("finishedAt")}
        for name in sorted(set(after) - set(before)):
            changes.append((started.get(name, clock), index, name, after[name]))
        for name in sorted(set(before) - set(after)):
            changes.append((finished.get(name, clock), index, name, None))
    running = {row.name: row for row in frames[0].nodes}
    points = [_nodes_at(frames[0].clock, "start", "start", running)]
    kinds = [str(record["step"]) for record in records]
    for when, index, name, row in sorted(changes, key=lambda c: (c[0], c[1])):
        if row is None:
            running.pop(name, None)
        else:
            running[name] = row
        point = _nodes_at(when, str(index), kinds[index], running)
        if points[-1].at == when and points[-1].step == point.step:
            points[-1] = point  # one point per instant and step: the state once all its changes are made
        else:
            points.append(point)
    return points


def _nodes_at(when: datetime, step: str, kind: str, running: Mapping[str, NodeRow]) -> NodesAt:
    counts: dict[str, int] = {}
    for row in running.values():
        key = row.capacity_type or "unknown"
        counts[key] = counts.get(key, 0) + 1
    return NodesAt(when, step, kind, dict(sorted(counts.items())), round(sum(r.price for r in running.values()), 6))


def charts_section(frames: Sequence[Frame], records: Sequence[Mapping[str, Any]] = ()) -> str:
    """Nodes and cost as they change (each launch and drain at its own time), pending pods after each step, and
    every launch, disruption and eviction at its own time; all on one time axis."""
    start = frames[0].clock
    nodes = node_timeline(frames, records)
    events = happenings(records)
    end = max([frames[-1].clock, *(p.at for p in nodes), *(e.at for e in events)])
    node_axis = charts.TimeAxis.at(start, [p.at for p in nodes], [p.step for p in nodes], [p.kind for p in nodes],
                                   end)
    kinds = [k for k in CAPACITY_ORDER if any(k in p.by_capacity for p in nodes)]
    kinds += sorted({k for p in nodes for k in p.by_capacity} - set(kinds))
    by_type = {k: [float(p.by_capacity.get(k, 0)) for p in nodes] for k in kinds or ["unknown"]}
    frame_axis = charts.TimeAxis.at(start, [f.clock for f in frames],
                                    ["start" if i == 0 else str(i - 1) for i in range(len(frames))],
                                    [f.step for f in frames], end)
    groups = sorted({(e.at, e.step) for e in events})
    step_kinds = [str(record["step"]) for record in records]
    event_axis = charts.TimeAxis.at(start, [at for at, _ in groups], [str(step) for _, step in groups],
                                    [step_kinds[step] for _, step in groups], end)
    churn = {what: [float(sum(1 for e in events if (e.at, e.step) == group and e.what == what)) for group in groups]
             for what in ("launched", "disrupted", "evicted")}
    times = [format_time(at) for at, _ in groups]
    blocks = [
        ("chart-nodes", charts.stacked_bars("nodes", "Nodes by capacity type", by_type, node_axis, counts=True)),
        ("chart-cost", charts.line("cost", "Cost ($/h)", [p.cost for p in nodes], node_axis, "cost",
                                   lambda v: f"${v:.3g}")),
        ("chart-pending", charts.line("pending", "Pending pods", [float(f.pending) for f in frames], frame_axis,
                                      "pending", counts=True)),
        ("chart-disruptions", charts.bars("disruptions", "Nodes launched / disrupted, pods evicted", churn,
                                          event_axis, counts=True, times=times)),
    ]
    inner = "".join(f'<div class="chart" id="{cid}">{svg}</div>' for cid, svg in blocks)
    first = start.strftime("%Y-%m-%d %H:%M:%S UTC") if frames else "-"
    return (f'<section><h2>Over simulated time</h2><p class="muted">Time runs from the start ({first}); '
            f'each launch, disruption and eviction at its own time; hover a bar or dot for its step.</p>'
            f'<div class="charts">{inner}</div></section>')


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


def steps_section(records: Sequence[Mapping[str, Any]]) -> str:
    """Every step that launched or disrupted anything, numbered as the result document and the charts."""
    rows = []
    started = {name: format_time(at) for name, at in command_starts(records).items()}
    for index, record in enumerate(records):
        for item in record.get("launched") or []:
            rows.append(
                f'<tr data-step="{index}" data-kind="launched"><td>{index}</td><td>{escape(record["step"])}</td>'
                f"<td>{escape(started.get(item['nodeclaim'], record['clock']))}</td><td>launched</td>"
                f"<td>{escape(item['nodeclaim'])}</td>"
                f"<td>{escape(str(item.get('nodepool') or '-'))}</td>"
                f"<td>{escape(str(item.get('instanceType') or '-'))} {escape(str(item.get('capacityType') or ''))}</td>"
                f'<td class="num">{escape(money(float(item.get("price") or 0.0), month=False))}</td></tr>'
            )
        for item in record.get("disrupted") or []:
            replacements = ", ".join(item.get("replacements") or []) or "-"
            when = item.get("startedAt") or record["clock"]
            rows.append(
                f'<tr data-step="{index}" data-kind="disrupted"><td>{index}</td><td>{escape(record["step"])}</td>'
                f"<td>{escape(when)}</td><td>disrupted ({escape(item['reason'])}, {escape(item['method'])}, "
                f"{escape(item['action'])})</td><td>{escape(item['node'])}</td>"
                f"<td>{escape(str(item.get('nodepool') or '-'))}</td><td>replaced by {escape(replacements)}</td>"
                f'<td class="num">saves {escape(money(float(item.get("savingsPerHour") or 0.0), month=False))}'
                "</td></tr>"
            )
    if not rows:
        return '<section id="disruptions"><h2>Launches and disruptions</h2><p class="muted">None.</p></section>'
    table = ('<table id="steps-table"><thead><tr><th>Step</th><th>Kind</th><th>Clock</th><th>What</th><th>Node</th>'
             f"<th>NodePool</th><th>Detail</th><th>Price</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")
    return (f'<section id="disruptions"><h2>Launches and disruptions ({len(rows)})</h2>'
            f"{folded('steps-table', table, len(rows))}</section>")


def _total_cost(frames: Sequence[Frame]) -> float:
    """Dollars spent over the simulated time: each frame's $/h held until the next frame's clock."""
    total = 0.0
    for frame, following in pairwise(frames):
        total += frame.cost_per_hour * (following.clock - frame.clock).total_seconds() / 3600
    return total


def summary_cards(frames: Sequence[Frame], records: Sequence[Mapping[str, Any]]) -> str:
    last = frames[-1]
    span_hours = (last.clock - frames[0].clock).total_seconds() / 3600
    return "".join(
        [
            card("nodes at the end", str(len(last.nodes)), "nodes", f"peak {max(len(f.nodes) for f in frames)}"),
            card("cost at the end", money(last.cost_per_hour, month=False), "cost-hour",
                 f"peak {money(max(f.cost_per_hour for f in frames), month=False)}"),
            card("cost per month at the end", per_month(last.cost_per_hour), "cost-month"),
            card(f"total spent over {span_hours:.2f} h simulated", dollars(_total_cost(frames)), "cost-total"),
            card("pending pods at the end", str(last.pending), "pending", f"peak {max(f.pending for f in frames)}"),
            card("nodes launched", str(sum(len(r.get("launched") or []) for r in records)), "launched"),
            card("nodes disrupted", str(sum(len(r.get("disrupted") or []) for r in records)), "disrupted"),
            card("steps", str(len(records) if records else max(len(frames) - 1, 0)), "steps"),
        ]
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
    """The page: summary cards (end state with peaks and totals), extra sections, charts over simulated
    time, the start → end node diff, the node table of the last frame, launches and disruptions."""
    last = frames[-1]
    parts = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<header><h1>{escape(title)}</h1><p>{escape(subtitle)}</p></header><main>",
        f'<section id="summary" class="cards">{summary_cards(frames, records)}</section>',
        *extra_sections,
        charts_section(frames, records),
        node_diff(frames[0].nodes, last.nodes),
        f"<section><h2>Nodes after the last step</h2>{node_table(last.nodes)}</section>",
    ]
    if pending is not None:
        parts.append(pending_section(pending))
    if records:
        parts.append(steps_section(records))
    parts.append(f"</main><script>{SCRIPT}</script></body></html>\n")
    return "".join(parts)
