"""The HTML reports, rendered by headless Chromium: a checked screenshot and assertions on the DOM."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
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
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (Debian: apt-get install -y chromium)"
)
WINDOW = (1280, 1800)
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


def rendered_dom(tmp_path: Path, page: Path) -> Element:
    result = chromium(tmp_path, "--dump-dom", page.as_uri())
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
    assert "<script" not in html and "<link" not in html and "src=" not in html  # self-contained

    dom = rendered_dom(tmp_path, report)
    charts = {svg.attrs["data-chart"]: svg for svg in dom.find_all("svg")}
    assert set(charts) == {"nodes", "cost", "pending", "disruptions"}
    for chart_id, name in (("chart-nodes", "nodes"), ("chart-cost", "cost"), ("chart-pending", "pending"),
                           ("chart-disruptions", "disruptions")):  # fmt: skip
        assert dom.by_id(chart_id).find_all("svg")[0].attrs["data-chart"] == name
    # One stacked bar per frame (all on-demand here), one dot per frame on the cost line.
    dots = charts["cost"].find_all("circle")
    bars = charts["nodes"].find_all("rect", **{"data-series": "on-demand"})
    assert len(dots) == len(bars) >= 5
    assert {float(d.attrs["data-value"]) for d in dots} == {2.437}
    churn = charts["disruptions"].find_all("rect", **{"data-series": "disrupted"})
    assert [r.find_all("title")[0].all_text().split(": ")[-1] for r in churn] == ["disrupted 2"]

    rows = dom.by_id("nodes").find_all("tbody")[0].find_all("tr")
    assert len(rows) == 4
    meters = dom.by_id("nodes").find_all("span", **{"class": "meter"})
    assert len(meters) == 8 and all(0 < float(m.attrs["data-fraction"]) <= 1 for m in meters)
    assert "Budget" in dom.by_id("blockers").all_text()
    assert "$2.4370" in dom.by_id("summary").all_text()

    shot = tmp_path / "plan.png"
    chromium(tmp_path, "--hide-scrollbars", f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--screenshot={shot}",
             report.as_uri())  # fmt: skip
    image = Image.open(shot)
    assert image.size == WINDOW
    colours = image.convert("RGB").getcolors(maxcolors=1 << 20) or []
    assert len(colours) > 200  # text, charts and bars: not a blank page
    assert pixels_near(image, ON_DEMAND) > 2000  # the stacked on-demand bars (and tags)
    assert pixels_near(image, COST_LINE) > 300  # the cost line and the CPU meters


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
        len(nodes_chart.find_all("rect", **{"data-series": "on-demand"})) == 3
    )  # every step after the start
    final_nodes = json.loads(plain)["final"]["nodes"]
    rows = dom.by_id("nodes").find_all("tbody")[0].find_all("tr")
    assert sorted(r.attrs["data-node"] for r in rows) == sorted(n["name"] for n in final_nodes)

    shot = tmp_path / "simulate.png"
    chromium(
        tmp_path, "--hide-scrollbars", "--window-size=1024,1400", f"--screenshot={shot}", report.as_uri()
    )
    image = Image.open(shot)
    assert image.size == (1024, 1400)
    assert pixels_near(image, LAUNCHED) > 300
