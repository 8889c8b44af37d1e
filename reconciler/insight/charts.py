"""Small inline-SVG charts over simulation steps (no scripts, no external resources).

Every chart is an ``<svg>`` with a ``data-chart`` attribute naming it, one ``<title>`` tooltip per
bar or point, and a legend; values are escaped text. Geometry is fixed (``WIDTH`` x ``HEIGHT``
viewBox) and scales with the page.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from html import escape

WIDTH, HEIGHT = 640, 240
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 28, 44
PALETTE = {
    "spot": "#2a9d8f",
    "on-demand": "#e76f51",
    "reserved": "#264653",
    "unknown": "#8d99ae",
    "cost": "#3a86ff",
    "pending": "#f4a261",
    "disrupted": "#9b5de5",
    "launched": "#43aa8b",
}

Formatter = Callable[[float], str]


def nice_max(value: float) -> float:
    """The smallest 1/2/5 x 10^n at or above ``value`` (at least 1), for axis tops."""
    if value <= 0:
        return 1.0
    exponent = math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        candidate = step * 10**exponent
        if candidate >= value:
            return float(candidate)
    return float(10 ** (exponent + 1))


def _frame(name: str, title: str, top: float, fmt: Formatter, labels: Sequence[str]) -> list[str]:
    plot_h = HEIGHT - TOP - BOTTOM
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'data-chart="{escape(name)}" aria-label="{escape(title)}">',
        f'<text x="{LEFT}" y="18" class="chart-title">{escape(title)}</text>',
    ]
    divisions = 5 if f"{top:e}"[0] in "15" else 4
    for tick in range(divisions + 1):
        value = top * tick / divisions
        y = TOP + plot_h - plot_h * tick / divisions
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        parts.append(
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">{escape(fmt(value))}</text>'
        )
    every = max(1, math.ceil(len(labels) / 12))
    for index, label in enumerate(labels):
        if index % every:
            continue
        x = _x(index, len(labels))
        parts.append(
            f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 16}" class="tick" text-anchor="middle">'
            f"{escape(label)}</text>"
        )
    parts.append(
        f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{TOP + plot_h}" y2="{TOP + plot_h}" class="axis"/>'
    )
    return parts


def _x(index: int, count: int) -> float:
    plot_w = WIDTH - LEFT - RIGHT
    slot = plot_w / max(count, 1)
    return LEFT + slot * index + slot / 2


def _y(value: float, top: float) -> float:
    plot_h = HEIGHT - TOP - BOTTOM
    return TOP + plot_h - plot_h * (value / top if top else 0)


def _legend(names: Sequence[str], colors: Mapping[str, str]) -> list[str]:
    parts = []
    x = LEFT
    for name in names:
        parts.append(f'<rect x="{x}" y="{HEIGHT - 16}" width="10" height="10" fill="{colors[name]}"/>')
        parts.append(f'<text x="{x + 14}" y="{HEIGHT - 7}" class="legend">{escape(name)}</text>')
        x += 24 + 7 * len(name)
    return parts


def stacked_bars(
    name: str,
    title: str,
    series: Mapping[str, Sequence[float]],
    labels: Sequence[str],
    tooltips: Sequence[str],
    fmt: Formatter = lambda v: f"{v:g}",
) -> str:
    """One stacked bar per step; ``series`` maps a legend name to one value per step."""
    count = len(labels)
    totals = [sum(values[i] for values in series.values()) for i in range(count)]
    top = nice_max(max(totals, default=0))
    parts = _frame(name, title, top, fmt, labels)
    slot = (WIDTH - LEFT - RIGHT) / max(count, 1)
    width = max(2.0, slot * 0.7)
    colors = {key: PALETTE.get(key, PALETTE["unknown"]) for key in series}
    for index in range(count):
        base = 0.0
        x = _x(index, count) - width / 2
        for key, values in series.items():
            value = values[index]
            if value <= 0:
                continue
            y_top, y_bottom = _y(base + value, top), _y(base, top)
            parts.append(
                f'<rect x="{x:.1f}" y="{y_top:.1f}" width="{width:.1f}" height="{y_bottom - y_top:.1f}" '
                f'fill="{colors[key]}" data-series="{escape(key)}"><title>{escape(tooltips[index])}: '
                f"{escape(key)} {escape(fmt(value))}</title></rect>"
            )
            base += value
    parts.extend(_legend(list(series), colors))
    parts.append("</svg>")
    return "".join(parts)


def line(
    name: str,
    title: str,
    values: Sequence[float],
    labels: Sequence[str],
    tooltips: Sequence[str],
    color_key: str,
    fmt: Formatter = lambda v: f"{v:g}",
) -> str:
    """A line with a dot per step (a single step is drawn as a dot)."""
    top = nice_max(max(values, default=0))
    parts = _frame(name, title, top, fmt, labels)
    color = PALETTE[color_key]
    points = [(_x(i, len(values)), _y(v, top)) for i, v in enumerate(values)]
    if len(points) > 1:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2.5"/>')
    for (x, y), value, tip in zip(points, values, tooltips, strict=True):
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{color}" data-value="{value:g}">'
            f"<title>{escape(tip)}: {escape(fmt(value))}</title></circle>"
        )
    parts.extend(_legend([color_key], {color_key: color}))
    parts.append("</svg>")
    return "".join(parts)


def bars(
    name: str,
    title: str,
    series: Mapping[str, Sequence[float]],
    labels: Sequence[str],
    tooltips: Sequence[str],
    fmt: Formatter = lambda v: f"{v:g}",
) -> str:
    """Grouped bars per step (e.g. launched and disrupted side by side)."""
    count = len(labels)
    top = nice_max(max((v for values in series.values() for v in values), default=0))
    parts = _frame(name, title, top, fmt, labels)
    slot = (WIDTH - LEFT - RIGHT) / max(count, 1)
    group = max(2.0, slot * 0.8)
    width = group / max(len(series), 1)
    colors = {key: PALETTE.get(key, PALETTE["unknown"]) for key in series}
    for index in range(count):
        start = _x(index, count) - group / 2
        for offset, (key, values) in enumerate(series.items()):
            value = values[index]
            if value <= 0:
                continue
            y = _y(value, top)
            parts.append(
                f'<rect x="{start + offset * width:.1f}" y="{y:.1f}" width="{width:.1f}" '
                f'height="{_y(0, top) - y:.1f}" fill="{colors[key]}" data-series="{escape(key)}">'
                f"<title>{escape(tooltips[index])}: {escape(key)} {escape(fmt(value))}</title></rect>"
            )
    parts.extend(_legend(list(series), colors))
    parts.append("</svg>")
    return "".join(parts)
