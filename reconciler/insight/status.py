"""An eks-node-viewer-style terminal view of a cluster: cost, and CPU/memory/accelerators requested per node.

Plain text by default, so it can be piped, diffed and pasted; ``color=True`` (a terminal without
``NO_COLOR``) adds ANSI colours: utilisation bars green / yellow / red by how full they are, capacity
types in the report's colours, the summary in bold. Nodes can be sorted by any column and filtered
by NodePool, capacity type or any text of their line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO

from reconciler.insight.frames import Frame, NodeRow, price_sources, unpriced
from reconciler.model.meta import format_time
from reconciler.model.money import money

BAR_WIDTH = 20
FULL, EMPTY_CELL = "█", "░"
RESET, BOLD, DIM = "\x1b[0m", "\x1b[1m", "\x1b[2m"
GREEN, YELLOW, RED, CYAN, ORANGE = "\x1b[32m", "\x1b[33m", "\x1b[31m", "\x1b[36m", "\x1b[38;5;208m"
CAPACITY_COLORS = {"Spot": GREEN, "On-Demand": ORANGE, "Reserved": CYAN}

SORT_KEYS: dict[str, Callable[[NodeRow], tuple[object, ...]]] = {
    "pool": lambda r: (not r.managed, r.nodepool, r.name),
    "name": lambda r: (r.name,),
    "cpu": lambda r: (-r.cpu_fraction, r.name),
    "memory": lambda r: (-r.memory_fraction, r.name),
    "price": lambda r: (-r.price, r.name),
    "pods": lambda r: (-r.pods, r.name),
    "type": lambda r: (r.instance_type, r.name),
    "zone": lambda r: (r.zone, r.name),
    "gpu": lambda r: (-r.accelerators_allocatable, r.name),
}


def use_color(stream: IO[str], option: str = "auto") -> bool:
    """``always`` / ``never``, or ``auto``: a terminal, unless ``NO_COLOR`` is set to anything (no-color.org)."""
    if option in ("always", "never"):
        return option == "always"
    return bool(getattr(stream, "isatty", lambda: False)()) and not os.environ.get("NO_COLOR")


@dataclass(slots=True, frozen=True)
class NodeFilter:
    nodepools: tuple[str, ...] = ()
    capacity_types: tuple[str, ...] = ()
    text: str = ""

    def keeps(self, row: NodeRow) -> bool:
        if self.nodepools and (row.nodepool or "(unmanaged)") not in self.nodepools:
            return False
        if self.capacity_types and (row.capacity_type or "unknown") not in self.capacity_types:
            return False
        haystack = " ".join((row.name, row.nodepool, row.instance_type, row.zone, row.capacity_type, row.arch))
        return self.text.lower() in haystack.lower()


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
    return {"on-demand": "On-Demand", "spot": "Spot", "reserved": "Reserved"}.get(row.capacity_type, "-")


def _gpu(row: NodeRow) -> str:
    if not row.accelerator:
        return "-"
    domain, _, resource = row.accelerator.partition("/")
    kind = domain.split(".")[0] if resource == "gpu" else resource  # nvidia / amd GPUs, neuron, gaudi
    return f"{row.accelerators_requested}/{row.accelerators_allocatable} {kind}"


class _Paint:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, *codes: str) -> str:
        return f"{''.join(codes)}{text}{RESET}" if self.enabled and codes else text

    def meter(self, fraction: float) -> str:
        text = f"{bar(fraction)} {percent(fraction)}"
        return self(text, GREEN if fraction < 0.5 else YELLOW if fraction < 0.8 else RED)


def render_status(
    frame: Frame,
    *,
    title: str = "",
    color: bool = False,
    sort: str = "pool",
    node_filter: NodeFilter | None = None,
) -> str:
    """The whole view: a cluster summary, then one line per node (CPU) with memory beneath it."""
    paint = _Paint(color)
    everything = sorted(frame.nodes, key=SORT_KEYS[sort])
    rows = [r for r in everything if node_filter is None or node_filter.keeps(r)]
    cpu_used = sum(r.cpu_requested for r in rows)
    cpu_total = sum(r.cpu_allocatable for r in rows)
    mem_used = sum(r.memory_requested for r in rows)
    mem_total = sum(r.memory_allocatable for r in rows)
    cost = sum(r.price for r in rows)
    lines = [paint(title, BOLD)] if title else []
    shown = f"{len(rows)} of {len(everything)} nodes" if len(rows) != len(everything) else f"{len(rows)} nodes"
    lines.append(
        paint(shown, BOLD) + f"  cpu {_cores(cpu_used)}/{_cores(cpu_total)} {paint.meter(_ratio(cpu_used, cpu_total))}"
        f"  memory {_gib(mem_used)}/{_gib(mem_total)} {paint.meter(_ratio(mem_used, mem_total))}"
    )
    lines.append(
        f"{paint(money(cost), BOLD)}  {sum(r.pods for r in rows)} pods bound, {frame.pending} pending  "
        f"@ {format_time(frame.clock)}"
    )
    lines.append(_capacity_summary(rows, paint))
    lines.append("")
    name_width = max((len(r.name) for r in rows), default=4)
    type_width = max((len(r.instance_type or "-") for r in rows), default=4)
    pool_width = max((len(r.nodepool or "(unmanaged)") for r in rows), default=4)
    gpu_width = max((len(_gpu(r)) for r in rows), default=1)
    for row in rows:
        state = "Ready" if row.ready else paint("Launching", YELLOW)
        capacity = _label(row)
        lines.append(
            f"{row.name:<{name_width}}  cpu {paint.meter(row.cpu_fraction)}  "
            f"{row.pods:>3} pods  {row.instance_type or '-':<{type_width}}  "
            f"{paint(f'{capacity:<9}', CAPACITY_COLORS.get(capacity, DIM))}  "
            f"{row.zone or '-':<11}  {_price(row)}  gpu {_gpu(row):<{gpu_width}}  "
            f"{row.nodepool or '(unmanaged)':<{pool_width}}  {state}"
        )
        lines.append(f"{'':<{name_width}}  mem {paint.meter(row.memory_fraction)}")
    if not rows:
        lines.append("(no nodes)" if not everything else "(no node matches the filter)")
    lines.extend(price_lines(rows))
    return "\n".join(lines) + "\n"


def _price(row: NodeRow) -> str:
    """The node's $/h; a node no offering prices says so instead of showing $0.0000."""
    if not row.priced:
        return "$?/h (unpriced)" if row.instance_type else "-"
    return money(row.price, month=False)


def price_lines(rows: Sequence[NodeRow]) -> list[str]:
    """Where every figure comes from, and which nodes have no price (left out of the totals)."""
    lines = [f"prices: {source}" for source in price_sources(rows)]
    missing = unpriced(rows)
    if missing:
        lines.append(f"unpriced: {', '.join(missing)} (no offering in the catalogue; not in the totals)")
    return lines


def _capacity_summary(rows: Sequence[NodeRow], paint: _Paint) -> str:
    counts: dict[str, tuple[int, float]] = {}
    for row in rows:
        count, cost = counts.get(_label(row), (0, 0.0))
        counts[_label(row)] = (count + 1, cost + row.price)
    parts = [
        f"{paint(label, CAPACITY_COLORS.get(label, DIM))} {count} ({money(cost, month=False)})"
        for label, (count, cost) in sorted(counts.items())
    ]
    return "capacity: " + (", ".join(parts) if parts else "none")


def _ratio(used: int, total: int) -> float:
    return used / total if total else 0.0
