"""Charts that agree with the tables (issue 25, item 5): every launch, disruption and eviction of a plan is drawn
at its own simulated time (compared with the plan's JSON and its drift table), nodes and cost change when a
replacement launches and when a drain is done, count axes tick in whole numbers, long tables fold and filter.
The page is read as served (no browser needed)."""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from datetime import UTC, datetime
from html.parser import HTMLParser
from typing import Any

import pytest
from insight_support import EXAMPLES, example_cluster, write_snapshot

from reconciler.insight.frames import NodeRow
from reconciler.insight.html import FOLD_AFTER, node_diff
from reconciler.insight.plan.compute import compute_plan
from reconciler.insight.plan.html import render_plan_html
from reconciler.insight.sources import load_nodepools_file, load_snapshot


class Marks(HTMLParser):
    """The ``rect`` and ``circle`` marks of each chart, the y-axis tick labels, and ``<title>`` texts."""

    def __init__(self) -> None:
        super().__init__()
        self.chart = ""
        self.marks: dict[str, list[dict[str, str]]] = {}
        self.ticks: dict[str, list[str]] = {}
        self._tick = False
        self._title: dict[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "svg":
            self.chart = values.get("data-chart", "")
        elif tag in ("rect", "circle") and "data-step" in values:
            self.marks.setdefault(self.chart, []).append(values)
            self._title = values
        elif tag == "text" and values.get("class") == "tick" and values.get("text-anchor") == "end":
            self._tick = True

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_data(self, data: str) -> None:
        if self._tick:
            self.ticks.setdefault(self.chart, []).append(data)
            self._tick = False
        elif self._title is not None:
            self._title["title"] = self._title.get("title", "") + data

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._title = None


@pytest.fixture(scope="module")
def business_hours(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Marks]:
    """The business-hours relabel: drift held until 17:00, then one node at a time, each drained at its time."""
    snapshot = load_snapshot(write_snapshot(tmp_path_factory.mktemp("charts"), example_cluster()))
    proposal = load_nodepools_file(EXAMPLES / "relabel-business-hours.yaml")
    plan = asyncio.run(compute_plan(snapshot, proposal, frames=True))
    marks = Marks()
    marks.feed(render_plan_html(plan))
    return plan.as_dict(), marks


def test_every_launch_disruption_and_eviction_is_drawn_at_its_own_time(
    business_hours: tuple[dict[str, Any], Marks],
) -> None:
    document, marks = business_hours
    drawn = Counter()
    for rect in marks.marks["disruptions"]:
        drawn[rect["data-series"], rect["data-time"], int(rect["data-step"])] += int(float(rect["data-count"]))
    expected = Counter((h["what"], h["at"], h["step"]) for h in document["timeline"])
    assert drawn == expected
    # ... and the timeline is the drift table's: each node disrupted (and its replacement launched) when its
    # command started, its pods evicted once the replacement was ready, at distinct times (no one cliff).
    drift = document["drift"]
    assert len(drift) == 2 and drift[0]["at"] != drift[1]["at"]
    assert sorted(t for (what, t, _) in drawn.elements() if what == "disrupted") == sorted(d["at"] for d in drift)
    assert sorted(t for (what, t, _) in drawn.elements() if what == "launched") == sorted(d["at"] for d in drift)
    evicted_at = {t for (what, t, _) in drawn.elements() if what == "evicted"}
    assert evicted_at == {d["replacementsReadyAt"] for d in drift}


def test_nodes_and_cost_change_when_a_replacement_launches_and_when_its_drain_is_done(
    business_hours: tuple[dict[str, Any], Marks],
) -> None:
    document, marks = business_hours
    dots = marks.marks["cost"]
    times = [re.search(r"@ (\S+ \S+)", dot["title"])[1] for dot in dots]  # type: ignore[index]
    costs = [float(dot["data-value"]) for dot in dots]
    stamp = lambda text: datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)  # noqa: E731
    points = {datetime.strptime(t, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC): c
              for t, c in zip(times, costs, strict=True)}
    now = document["current"]["costPerHour"]
    # Each replacement is billed from its command's start and the node it replaces until its drain is done (the
    # replacements here have the shapes and prices of the nodes they replace).
    for moment in {*(m["at"] for m in document["drift"]), *(m["drainedAt"] for m in document["drift"])}:
        billed = sum(m["replacements"][0]["price"] for m in document["drift"] if m["at"] <= moment)
        gone = sum(m["replacements"][0]["price"] for m in document["drift"] if m["drainedAt"] <= moment)
        assert points[stamp(moment)] == pytest.approx(now + billed - gone), moment
    assert any(c > now for c in costs)  # while a replacement runs beside the node it replaces
    assert costs[0] == pytest.approx(now) and costs[-1] == pytest.approx(document["proposed"]["costPerHour"])
    assert len(marks.marks["nodes"]) == len(dots)  # the node bars stand at the same instants


def test_count_charts_tick_in_whole_numbers(business_hours: tuple[dict[str, Any], Marks]) -> None:
    _, marks = business_hours
    for chart in ("nodes", "pending", "disruptions"):
        ticks = marks.ticks[chart]
        assert ticks and all(re.fullmatch(r"\d+", tick) for tick in ticks), (chart, ticks)


def row(name: str) -> NodeRow:
    return NodeRow(name, "general", "m5.large", "us-east-1a", "on-demand", 0.096, 100, 1930, 1, 1, 1)


def test_long_tables_are_folded_with_a_filter_and_short_ones_are_not() -> None:
    long = node_diff([row(f"old-{i}") for i in range(FOLD_AFTER)], [row("new-0")])
    rows = FOLD_AFTER + 1
    assert f'<details class="folded" data-rows="{rows}"><summary>{rows} rows (show)</summary>' in long
    assert 'data-filter-table="node-diff"' in long and long.count('<tr class="removed"') == FOLD_AFTER
    short = node_diff([row("old-0")], [row("new-0")])
    assert "<details" not in short and "data-filter-table" not in short
