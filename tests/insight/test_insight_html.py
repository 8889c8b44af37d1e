"""The HTML reports, rendered by headless Chromium: a checked screenshot and assertions on the DOM."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from insight_support import EXAMPLES, example_cluster, find, run_cli, write_snapshot

from reconciler.cli import main

# Screenshots are decoded with Pillow (test dependency ``pillow``).
Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed (pip install pillow)")
ImageChops = pytest.importorskip("PIL.ImageChops", reason="Pillow is not installed (pip install pillow)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,  # every test drives a Chromium process
    pytest.mark.skipif(
        CHROMIUM is None, reason="headless Chromium is not installed (Debian: apt-get install -y chromium)"
    ),
]
WINDOW = (1280, 2600)
# Colours the charts draw with (reconciler.insight.charts.PALETTE).
ON_DEMAND, COST_LINE, LAUNCHED = (0xE7, 0x6F, 0x51), (0x3A, 0x86, 0xFF), (0x43, 0xAA, 0x8B)


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    command = [
        str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", *args,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, timeout=120, check=True)


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element] = field(default_factory=list)
    text: str = ""

    def walk(self) -> Iterator[Element]:
        yield self
        for child in self.children:
            yield from child.walk()

    def find_all(self, tag: str, **attrs: str) -> list[Element]:
        return [e for e in self.walk() if e.tag == tag and all(e.attrs.get(k) == v for k, v in attrs.items())]

    def by_id(self, element_id: str) -> Element:
        (found,) = [e for e in self.walk() if e.attrs.get("id") == element_id]
        return found

    def all_text(self) -> str:
        return self.text + "".join(child.all_text() for child in self.children)


class TreeBuilder(HTMLParser):
    VOID = frozenset({"meta", "link", "br", "img", "input", "hr"})

    def __init__(self) -> None:
        super().__init__()
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(element)
        if tag not in self.VOID:
            self.stack.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for index in range(len(self.stack) - 1, 0, -1):
            if self.stack[index].tag == tag:
                del self.stack[index:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(Element("#text", {}, text=data))


def rendered_dom(tmp_path: Path, page: Path, fragment: str = "") -> Element:
    result = chromium(tmp_path, "--dump-dom", page.as_uri() + (f"#{fragment}" if fragment else ""))
    builder = TreeBuilder()
    builder.feed(result.stdout.decode())
    return builder.root


def pixels_near(image: Any, colour: tuple[int, int, int], tolerance: int = 12) -> int:
    """How many pixels are within ``tolerance`` of ``colour`` on every channel."""
    masks = [
        channel.point(lambda v, c=c: 255 if abs(v - c) <= tolerance else 0)
        for channel, c in zip(image.convert("RGB").split(), colour, strict=True)
    ]
    both = ImageChops.multiply(ImageChops.multiply(masks[0], masks[1]), masks[2])
    return both.histogram()[255]


@pytest.fixture(scope="module")
def plan_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``plan --report`` for the business-hours relabel: drift held from 10:00 until 17:00."""
    directory = tmp_path_factory.mktemp("report")
    snapshot = write_snapshot(directory, example_cluster())
    report = directory / "plan.html"
    proposal = str(EXAMPLES / "relabel-business-hours.yaml")
    code = main(["plan", "--snapshot", str(snapshot), "--nodepools", proposal, "--report", str(report)])
    assert code == 0
    return report


def test_plan_report_renders_charts_and_node_table(plan_report: Path, tmp_path: Path) -> None:
    report = plan_report
    html = report.read_text()
    # Self-contained: no stylesheet, image or script is fetched; the one script is inline.
    assert "<link" not in html and "src=" not in html
    assert set(re.findall(r"https?://[^\"' ]+", html)) == {"http://www.w3.org/2000/svg"}

    dom = rendered_dom(tmp_path, report)
    charts = {svg.attrs["data-chart"]: svg for svg in dom.find_all("svg")}
    assert set(charts) == {"nodes", "cost", "pending", "disruptions"}
    for chart_id, name in (("chart-nodes", "nodes"), ("chart-cost", "cost"), ("chart-pending", "pending"),
                           ("chart-disruptions", "disruptions")):  # fmt: skip
        assert dom.by_id(chart_id).find_all("svg")[0].attrs["data-chart"] == name
    # The x-axis is the simulated clock: drift waits for 17:00, seven hours after the 10:00 snapshot.
    assert "simulated time since start (hours)" in charts["cost"].all_text()
    # Nodes and cost change at their own instants (all on-demand here): the start, each replacement launched at
    # 17:00 and 17:02, each old node gone once drained (17:02, 17:04); one stacked bar per dot on the cost line.
    dots = charts["cost"].find_all("circle")
    bars = charts["nodes"].find_all("rect", **{"data-series": "on-demand"})
    assert len(dots) == len(bars) == 4
    values = [float(d.attrs["data-value"]) for d in dots]
    assert values[0] == values[-1] == 2.437 and max(values) > 2.437  # both nodes billed while one replaces
    assert dots[0].attrs["data-step"] == "start"
    churn = charts["disruptions"].find_all("rect", **{"data-series": "disrupted"})
    # Two disruptions, each at its own start (17:00 and 17:02), not one bar at the step's end.
    assert [r.find_all("title")[0].all_text().split(": ")[-1] for r in churn] == ["disrupted 1", "disrupted 1"]
    assert len({r.attrs["data-time"] for r in churn}) == 2
    # Chart and table name the same step for the disruptions.
    table_steps = {r.attrs["data-step"] for r in dom.by_id("disruptions").find_all("tr", **{"data-kind": "disrupted"})}
    assert {r.attrs["data-step"] for r in churn} == table_steps
    assert all(f"step {r.attrs['data-step']} " in r.find_all("title")[0].all_text() for r in churn)

    rows = [r for r in dom.by_id("nodes").find_all("tr") if "data-node" in r.attrs]
    assert len(rows) == 4
    # Grouped by NodePool and type on load: a header row before each group.
    groups = [r.all_text() for r in dom.by_id("nodes").find_all("tr") if r.attrs.get("class") == "group"]
    assert len(groups) == 3 and any(g.startswith("gpu / g5.xlarge — 2 node(s), $2.0120/h") for g in groups)
    meters = dom.by_id("nodes").find_all("span", **{"class": "meter"})
    assert len(meters) == 8 and all(0 < float(m.attrs["data-fraction"]) <= 1 for m in meters)
    assert "Budget" in dom.by_id("blockers").all_text()
    summary = dom.by_id("summary").all_text()
    assert "$2.4370/h" in summary and "peak" in summary and "total spent over" in summary
    assert "Cost per NodePool" in html and dom.by_id("pool-costs").find_all("td")[0].all_text() == "general"
    diff = dom.by_id("node-diff")
    # Both general nodes were replaced by drift: two removed, two added, the gpu nodes kept.
    assert len(_removed(diff)) == len(_added(diff)) == 2 and all(n.startswith("general-") for n in _removed(diff))

    shot = tmp_path / "plan.png"
    chromium(tmp_path, "--hide-scrollbars", f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--screenshot={shot}",
             report.as_uri())  # fmt: skip
    image = Image.open(shot)
    assert image.size == WINDOW
    colours = image.convert("RGB").getcolors(maxcolors=1 << 20) or []
    assert len(colours) > 200  # text, charts and bars: not a blank page
    assert pixels_near(image, ON_DEMAND) > 2000  # the stacked on-demand bars (and tags)
    assert pixels_near(image, COST_LINE) > 300  # the cost line and the CPU meters


def _added(diff: Element) -> list[str]:
    return [r.attrs["data-node"] for r in diff.find_all("tr") if r.attrs.get("class") == "added"]


def _removed(diff: Element) -> list[str]:
    return [r.attrs["data-node"] for r in diff.find_all("tr") if r.attrs.get("class") == "removed"]


def test_node_table_sorts_filters_and_groups_from_the_link(plan_report: Path, tmp_path: Path) -> None:
    """The page's script reorders the rows it holds; a link's #filter/#sort/#group sets the view on load."""
    def nodes_in(view: str) -> list[str]:
        dom = rendered_dom(tmp_path, plan_report, fragment=view)
        table = dom.by_id("nodes")
        return [r.attrs["data-node"] for r in table.find_all("tr") if "data-node" in r.attrs]

    every = nodes_in("")
    gpu = nodes_in("filter=g5.xlarge&group=")
    assert len(every) == 4 and len(gpu) == 2 and all(name.startswith("gpu-") for name in gpu)
    by_price = nodes_in("sort=-price&group=")
    assert set(by_price[:2]) == set(gpu)  # the g5.xlarge nodes cost the most
    assert nodes_in("sort=name&group=") == sorted(every)


def test_chart_launch_steps_equal_the_result_document(tmp_path: Path, capsys: Any) -> None:
    """Charts and tables agree step for step with the result document: launches, disruptions, tooltips."""
    document = example_cluster()
    web = json.loads(json.dumps(find(document, "Deployment", "web")))
    web["spec"]["replicas"] = 14
    document["steps"] = [{"provision": {}}, {"advance": "5m"}, {"apply": [web]}, {"provision": {}},
                         {"disrupt": {"until": "stable"}}]
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(json.dumps(document))
    report = tmp_path / "report.html"
    code, out, _ = run_cli(capsys, "simulate", str(scenario), "--json", "--report", str(report))
    assert code == 0
    steps = json.loads(out)["steps"]
    launch_steps = [str(i) for i, step in enumerate(steps) if step["launched"]]
    assert launch_steps  # the scenario launches capacity

    dom = rendered_dom(tmp_path, report)
    charted = dom.by_id("chart-disruptions").find_all("rect", **{"data-series": "launched"})
    assert [r.attrs["data-step"] for r in charted] == launch_steps
    for rect in charted:
        step = steps[int(rect.attrs["data-step"])]
        assert rect.find_all("title")[0].all_text().startswith(f"step {rect.attrs['data-step']} ({step['step']})")
        assert rect.find_all("title")[0].all_text().endswith(f"launched {len(step['launched'])}")
    tabled = [r.attrs["data-step"] for r in dom.by_id("disruptions").find_all("tr", **{"data-kind": "launched"})]
    assert sorted(set(tabled), key=int) == launch_steps
    assert len(tabled) == sum(len(step["launched"]) for step in steps)
    # Every step's pending dot sits at its step's clock: the advance step is 5 minutes to the right of the start.
    dots = {d.attrs["data-step"]: float(d.attrs["cx"]) for d in dom.by_id("chart-pending").find_all("circle")}
    assert dots["1"] > dots["0"] == dots["start"]


def test_simulate_report_keeps_the_result_and_renders(tmp_path: Path, capsys: Any) -> None:
    document = example_cluster()
    web = json.loads(json.dumps(find(document, "Deployment", "web")))
    web["spec"]["replicas"] = 12
    document["steps"] = [{"provision": {}}, {"apply": [web]}, {"provision": {}}]
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(json.dumps(document))

    code, plain, _ = run_cli(capsys, "simulate", str(scenario), "--json")
    report = tmp_path / "simulate.html"
    code_with_report, with_report, _ = run_cli(
        capsys, "simulate", str(scenario), "--json", "--report", str(report)
    )
    assert code == code_with_report == 0
    assert json.loads(plain) == json.loads(with_report)  # the report changes nothing in the result

    dom = rendered_dom(tmp_path, report)
    nodes_chart = dom.by_id("chart-nodes").find_all("svg")[0]
    launched = dom.by_id("chart-disruptions").find_all("rect", **{"data-series": "launched"})
    assert len(launched) == 2  # the two provision steps launched capacity
    assert (
        len(nodes_chart.find_all("rect", **{"data-series": "on-demand"})) == 2
    )  # one bar per change of the nodes: the two provision steps
    final_nodes = json.loads(plain)["final"]["nodes"]
    rows = [r for r in dom.by_id("nodes").find_all("tbody")[0].find_all("tr") if "data-node" in r.attrs]
    assert sorted(r.attrs["data-node"] for r in rows) == sorted(n["name"] for n in final_nodes)

    shot = tmp_path / "simulate.png"
    chromium(
        tmp_path, "--hide-scrollbars", "--window-size=1024,1400", f"--screenshot={shot}", report.as_uri()
    )
    image = Image.open(shot)
    assert image.size == (1024, 1400)
    assert pixels_near(image, LAUNCHED) > 300


def test_a_folded_tables_filter_hides_the_rows_without_its_text(tmp_path: Path) -> None:
    """A long node diff is folded; the link's #rows-node-diff=TEXT opens it filtered (the script runs it)."""
    from reconciler.insight.frames import Frame, NodeRow
    from reconciler.insight.html import render_report

    def row(name: str) -> NodeRow:
        return NodeRow(name, "general", "m5.large", "us-east-1a", "on-demand", 0.096, 100, 1930, 1, 1, 1)

    clock = datetime(2026, 1, 5, 10, tzinfo=UTC)
    frames = [Frame("start", clock, tuple(row(f"old-{i}") for i in range(30)), 0),
              Frame("disrupt", clock, (row("new-0"),), 0)]
    page = tmp_path / "diff.html"
    page.write_text(render_report("diff", "test", frames))
    table = rendered_dom(tmp_path, page, fragment="rows-node-diff=old-1").by_id("node-diff")
    shown = [r.attrs["data-node"] for r in table.find_all("tr")
             if "data-node" in r.attrs and "display: none" not in r.attrs.get("style", "")]
    assert sorted(shown) == sorted(["old-1", *(f"old-1{i}" for i in range(10))])
    assert table.attrs["data-shown"] == "11"
