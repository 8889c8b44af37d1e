"""An eks-node-viewer-style terminal view of a cluster: cost, and CPU/memory requested per node.

Plain text (no colours, no cursor control), so it can be piped, diffed and pasted.
"""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.insight.frames import HOURS_PER_MONTH, Frame, NodeRow, price_sources, unpriced

BAR_WIDTH = 20
FULL, EMPTY_CELL = "█", "░"


def bar(fraction: float, width: int = BAR_WIDTH) -> str:
    """A fixed-width bar; a sliver of use still shows one cell, and >100% is drawn full."""
    fraction = max(0.0, fraction)
    cells = min(width, round(fraction * width))
    if fraction > 0 and cells == 0:
        cells = 1
    return FULL * cells + EMPTY_CELL * (width - cells)


def percent(fraction: float) -> str:
    return f"{fraction * 100:5.1f}%"


def _cores(milli: int) -> str:
    return f"{milli / 1000:.2f}"


def _gib(milli_bytes: int) -> str:
    return f"{milli_bytes / 1000 / 2**30:.1f}Gi"


def _label(row: NodeRow) -> str:
    capacity = {"on-demand": "On-Demand", "spot": "Spot", "reserved": "Reserved"}.get(row.capacity_type, "-")
    return capacity


def render_status(frame: Frame, *, title: str = "") -> str:
    """The whole view: a cluster summary, then one line per node (CPU) with memory beneath it."""
    rows = sorted(frame.nodes, key=lambda r: (not r.managed, r.nodepool, r.name))
    cpu_used = sum(r.cpu_requested for r in rows)
    cpu_total = sum(r.cpu_allocatable for r in rows)
    mem_used = sum(r.memory_requested for r in rows)
    mem_total = sum(r.memory_allocatable for r in rows)
    cost = frame.cost_per_hour
    lines = []
    if title:
        lines.append(title)
    lines.append(
        f"{len(rows)} nodes  cpu {_cores(cpu_used)}/{_cores(cpu_total)} {bar(_ratio(cpu_used, cpu_total))} "
        f"{percent(_ratio(cpu_used, cpu_total))}  memory {_gib(mem_used)}/{_gib(mem_total)} "
        f"{bar(_ratio(mem_used, mem_total))} {percent(_ratio(mem_used, mem_total))}"
    )
    lines.append(
        f"${cost:.4f}/hour  ${cost * HOURS_PER_MONTH:,.2f}/month  "
        f"{frame.pod_count} pods bound, {frame.pending} pending  "
        f"@ {frame.clock.strftime('%Y-%m-%dT%H:%M:%SZ')}"
    )
    lines.append(_capacity_summary(rows))
    lines.append("")
    name_width = max((len(r.name) for r in rows), default=4)
    type_width = max((len(r.instance_type or "-") for r in rows), default=4)
    pool_width = max((len(r.nodepool or "(unmanaged)") for r in rows), default=4)
    for row in rows:
        state = "Ready" if row.ready else "Launching"
        lines.append(
            f"{row.name:<{name_width}}  cpu {bar(row.cpu_fraction)} {percent(row.cpu_fraction)}  "
            f"{row.pods:>3} pods  {row.instance_type or '-':<{type_width}}  {_label(row):<9}  "
            f"{row.zone or '-':<11}  {_price(row)}  "
            f"{row.nodepool or '(unmanaged)':<{pool_width}}  {state}"
        )
        lines.append(f"{'':<{name_width}}  mem {bar(row.memory_fraction)} {percent(row.memory_fraction)}")
    if not rows:
        lines.append("(no nodes)")
    lines.extend(price_lines(rows))
    return "\n".join(lines) + "\n"


def _price(row: NodeRow) -> str:
    """The node's $/h; a node no offering prices says so instead of showing $0.0000."""
    if not row.priced:
        return "$?/h (unpriced)" if row.instance_type else "-"
    return f"${row.price:.4f}/h"


def price_lines(rows: Sequence[NodeRow]) -> list[str]:
    """Where every figure comes from, and which nodes have no price (left out of the totals)."""
    lines = [f"prices: {source}" for source in price_sources(rows)]
    missing = unpriced(rows)
    if missing:
        lines.append(f"unpriced: {', '.join(missing)} (no offering in the catalogue; not in the totals)")
    return lines


def _capacity_summary(rows: Sequence[NodeRow]) -> str:
    counts: dict[str, tuple[int, float]] = {}
    for row in rows:
        count, cost = counts.get(_label(row), (0, 0.0))
        counts[_label(row)] = (count + 1, cost + row.price)
    parts = [f"{label} {count} (${cost:.4f}/h)" for label, (count, cost) in sorted(counts.items())]
    return "capacity: " + (", ".join(parts) if parts else "none")


def _ratio(used: int, total: int) -> float:
    return used / total if total else 0.0
