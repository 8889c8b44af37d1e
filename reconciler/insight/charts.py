"""Small inline-SVG charts over simulated time, on a simulated-clock x-axis (no scripts, no fetches).

Every chart is an ``<svg>`` with a ``data-chart`` attribute naming it; every bar and point sits at its own
instant and carries ``data-step`` (``start`` or the index in the result document of the step it belongs to,
as the tables number them) and a ``<title>`` tooltip saying the same; values are escaped text. The x-axis
is time since the start in a unit that suits the span (seconds, minutes, hours or days), titled with that
unit; points that share an instant sit side by side. Counts get whole-number ticks. Geometry is fixed
(``WIDTH`` x ``HEIGHT`` viewBox) and scales with the page.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape
from itertools import pairwise

WIDTH, HEIGHT = 640, 256
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 28, 60
PAD = 12  # inner margin so the first and last instants are not drawn on the axis lines
PALETTE = {
    "spot": "#2a9d8f",
    "on-demand": "#e76f51",
    "reserved": "#264653",
    "unknown": "#8d99ae",
    "cost": "#3a86ff",
    "pending": "#f4a261",
    "disrupted": "#9b5de5",
    "evicted": "#577590",
    "launched": "#43aa8b",
}
UNITS = (("seconds", 1), ("minutes", 60), ("hours", 3600), ("days", 86400))

Formatter = Callable[[float], str]


@dataclass(slots=True, frozen=True)
class TimeAxis:
    """Where each point sits: seconds since the start, its label for ``data-step``, its tooltip; and the span the
    axis covers (at least the last point: charts of one page share it)."""

    seconds: tuple[float, ...]
    steps: tuple[str, ...]
    tips: tuple[str, ...]
    end: float = 0.0

    @classmethod
    def of(cls, clocks: Sequence[datetime], kinds: Sequence[str]) -> TimeAxis:
        """One point per frame: the first is the start, frame i > 0 is step i - 1 of the result document."""
        steps = ["start" if i == 0 else str(i - 1) for i in range(len(clocks))]
        return cls.at(clocks[0] if clocks else datetime.min, clocks, steps, kinds)

    @classmethod
    def at(cls, start: datetime, clocks: Sequence[datetime], steps: Sequence[str], kinds: Sequence[str],
           end: datetime | None = None) -> TimeAxis:
        """Points at their own instants (``steps``: each point's step label, ``kinds`` its step's kind)."""
        seconds = tuple((clock - start).total_seconds() for clock in clocks)
        tips = tuple(
            f"{'start' if step == 'start' else f'step {step} ({kind})'} @ {clock.strftime('%Y-%m-%d %H:%M:%S')} "
            f"(+{_elapsed(seconds[i])})"
            for i, (clock, step, kind) in enumerate(zip(clocks, steps, kinds, strict=True))
        )
        span = (end - start).total_seconds() if end is not None else 0.0
        return cls(seconds, tuple(steps), tips, span)

    @property
    def span(self) -> float:
        return max(max(self.seconds, default=0.0), self.end)

    @property
    def unit(self) -> tuple[str, int]:
        """The largest unit that still gives a few ticks over the span (seconds up to 3 min, ...)."""
        for name, size in reversed(UNITS):
            if self.span >= 3 * size:
                return name, size
        return UNITS[0]

    def lanes(self) -> tuple[list[int], int]:
        """Each point's index among the points at the same instant, and the most at any instant."""
        lane: list[int] = []
        seen: dict[float, int] = {}
        for value in self.seconds:
            lane.append(seen.get(value, 0))
            seen[value] = seen.get(value, 0) + 1
        return lane, max(seen.values(), default=1)

    def x(self, index: int) -> float:
        plot_w = WIDTH - LEFT - RIGHT - 2 * PAD
        span = self.span or 1.0
        return LEFT + PAD + plot_w * self.seconds[index] / span


def _elapsed(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{secs}s" if secs else "")
    return text


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


def _frame(name: str, title: str, top: float, fmt: Formatter, axis: TimeAxis, *, counts: bool = False) -> list[str]:
    """``counts``: the values are counts, so the y ticks are whole numbers (a top of 2 gets ticks 0, 1, 2)."""
    plot_h = HEIGHT - TOP - BOTTOM
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'data-chart="{escape(name)}" aria-label="{escape(title)}">',
        f'<text x="{LEFT}" y="18" class="chart-title">{escape(title)}</text>',
    ]
    divisions = 5 if f"{top:e}"[0] in "15" else 4
    if counts:
        divisions = min(divisions, int(top))
    for tick in range(divisions + 1):
        value = top * tick / divisions
        y = TOP + plot_h - plot_h * tick / divisions
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        parts.append(
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">{escape(fmt(value))}</text>'
        )
    unit, size = axis.unit
    span = axis.span / size
    step = nice_max(span / 6) if span > 0 else 1.0
    ticks = [i * step for i in range(int(span / step) + 1)] if span > 0 else [0.0]
    plot_w = WIDTH - LEFT - RIGHT - 2 * PAD
    for value in ticks:
        x = LEFT + PAD + (plot_w * value / span if span else 0)
        parts.append(
            f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 16}" class="tick x-tick" text-anchor="middle">'
            f"{value:g}</text>"
        )
    parts.append(
        f'<text x="{LEFT + (WIDTH - LEFT - RIGHT) / 2:.1f}" y="{HEIGHT - BOTTOM + 32}" class="tick x-title" '
        f'text-anchor="middle">simulated time since start ({unit})</text>'
    )
    parts.append(
        f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{TOP + plot_h}" y2="{TOP + plot_h}" class="axis"/>'
    )
    return parts


def _y(value: float, top: float) -> float:
    plot_h = HEIGHT - TOP - BOTTOM
    return TOP + plot_h - plot_h * (value / top if top else 0)


def _bar_geometry(axis: TimeAxis, width_each: float) -> list[float]:
    """Left edge of each point's bar: points at one instant side by side, centred on it."""
    lane, _ = axis.lanes()
    group = [sum(1 for s in axis.seconds if s == value) for value in axis.seconds]
    return [axis.x(i) - group[i] * width_each / 2 + lane[i] * width_each for i in range(len(axis.seconds))]


def _bar_width(axis: TimeAxis) -> float:
    _, most = axis.lanes()
    distinct = sorted(set(axis.seconds))
    plot_w = WIDTH - LEFT - RIGHT - 2 * PAD
    gaps = [b - a for a, b in pairwise(distinct)]
    room = plot_w * min(gaps) / (axis.span or 1.0) if gaps else plot_w / 4
    # Wide enough to see and hover (neighbouring instants may overlap a little), never wider than 24 px.
    return max(6.0, min(24.0, room * 0.8 / most))


def _legend(names: Sequence[str], colors: Mapping[str, str]) -> list[str]:
    parts = []
    x = LEFT
    for name in names:
        parts.append(f'<rect x="{x}" y="{HEIGHT - 16}" width="10" height="10" fill="{colors[name]}"/>')
        parts.append(f'<text x="{x + 14}" y="{HEIGHT - 7}" class="legend">{escape(name)}</text>')
        x += 24 + 7 * len(name)
    return parts


def stacked_bars(
    name: str, title: str, series: Mapping[str, Sequence[float]], axis: TimeAxis, fmt: Formatter = lambda v: f"{v:g}",
    *, counts: bool = False,
) -> str:
    """One stacked bar per point at its instant; ``series`` maps a legend name to one value per point."""
    count = len(axis.seconds)
    totals = [sum(values[i] for values in series.values()) for i in range(count)]
    top = nice_max(max(totals, default=0))
    parts = _frame(name, title, top, fmt, axis, counts=counts)
    width = _bar_width(axis)
    lefts = _bar_geometry(axis, width)
    colors = {key: PALETTE.get(key, PALETTE["unknown"]) for key in series}
    for index in range(count):
        base = 0.0
        for key, values in series.items():
            value = values[index]
            if value <= 0:
                continue
            y_top, y_bottom = _y(base + value, top), _y(base, top)
            parts.append(
                f'<rect x="{lefts[index]:.1f}" y="{y_top:.1f}" width="{width:.1f}" height="{y_bottom - y_top:.1f}" '
                f'fill="{colors[key]}" data-series="{escape(key)}" data-step="{axis.steps[index]}">'
                f"<title>{escape(axis.tips[index])}: {escape(key)} {escape(fmt(value))}</title></rect>"
            )
            base += value
    parts.extend(_legend(list(series), colors))
    parts.append("</svg>")
    return "".join(parts)


def line(
    name: str, title: str, values: Sequence[float], axis: TimeAxis, color_key: str,
    fmt: Formatter = lambda v: f"{v:g}", *, counts: bool = False,
) -> str:
    """A stepped line (a value holds until the next point changes it) with a dot per point."""
    top = nice_max(max(values, default=0))
    parts = _frame(name, title, top, fmt, axis, counts=counts)
    color = PALETTE[color_key]
    points = [(axis.x(i), _y(v, top)) for i, v in enumerate(values)]
    if len(points) > 1:
        path = [f"{points[0][0]:.1f},{points[0][1]:.1f}"]
        for (_, y0), (x1, y1) in pairwise(points):
            path += [f"{x1:.1f},{y0:.1f}", f"{x1:.1f},{y1:.1f}"]
        parts.append(f'<polyline points="{" ".join(path)}" fill="none" stroke="{color}" stroke-width="2.5"/>')
    for index, ((x, y), value) in enumerate(zip(points, values, strict=True)):
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{color}" data-value="{value:g}" '
            f'data-step="{axis.steps[index]}"><title>{escape(axis.tips[index])}: {escape(fmt(value))}</title></circle>'
        )
    parts.extend(_legend([color_key], {color_key: color}))
    parts.append("</svg>")
    return "".join(parts)


def bars(
    name: str, title: str, series: Mapping[str, Sequence[float]], axis: TimeAxis, fmt: Formatter = lambda v: f"{v:g}",
    *, counts: bool = False, times: Sequence[str] = (),
) -> str:
    """Grouped bars per point (e.g. launched and disrupted side by side) at the point's instant; ``times``: each
    point's instant as the tables print it, carried as ``data-time``."""
    count = len(axis.seconds)
    top = nice_max(max((v for values in series.values() for v in values), default=0))
    parts = _frame(name, title, top, fmt, axis, counts=counts)
    group = _bar_width(axis)
    lefts = _bar_geometry(axis, group)
    width = group / max(len(series), 1)
    colors = {key: PALETTE.get(key, PALETTE["unknown"]) for key in series}
    for index in range(count):
        for offset, (key, values) in enumerate(series.items()):
            value = values[index]
            if value <= 0:
                continue
            y = _y(value, top)
            when = f' data-time="{escape(times[index])}"' if times else ""
            parts.append(
                f'<rect x="{lefts[index] + offset * width:.1f}" y="{y:.1f}" width="{width:.1f}" '
                f'height="{_y(0, top) - y:.1f}" fill="{colors[key]}" data-series="{escape(key)}" '
                f'data-step="{axis.steps[index]}"{when} data-count="{value:g}">'
                f"<title>{escape(axis.tips[index])}: {escape(key)} {escape(fmt(value))}</title></rect>"
            )
    parts.extend(_legend(list(series), colors))
    parts.append("</svg>")
    return "".join(parts)
