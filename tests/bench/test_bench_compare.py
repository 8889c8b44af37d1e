"""bench/compare.py and bench/exchange.py: the shared problem format, the equivalence check, the result checks."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO))

from bench.compare import adze_child, check, problems  # noqa: E402
from bench.exchange import (  # noqa: E402
    input_summary,
    instance_type_document,
    instance_type_from_document,
    problem_document,
    read_problem,
    summary_differences,
)
from bench.scheduling import diverse_pods, nodepool, synthetic_types  # noqa: E402
from reconciler.cloud.aws.preset import load_preset  # noqa: E402
from reconciler.model.resources import Resources  # noqa: E402
from reconciler.state.cluster import ClusterState  # noqa: E402


def comparable(itype: Any) -> tuple:
    offerings = tuple((o.zone, o.capacity_type, o.price, o.available, o.zone_id) for o in itype.offerings)
    return itype.name, itype.capacity, itype.overhead, dict(itype.labels), offerings


@pytest.mark.parametrize("catalogue", ["synthetic", "aws-us-east-1"])
def test_instance_types_survive_the_exchange_format(catalogue: str) -> None:
    types = synthetic_types() if catalogue == "synthetic" else load_preset()
    document = json.loads(json.dumps([instance_type_document(t) for t in types]))
    assert [comparable(instance_type_from_document(d)) for d in document] == [comparable(t) for t in types]


def small_problem(pods: int = 50, policy: str = "Respect") -> dict[str, Any]:
    return problem_document("test", [nodepool()], synthetic_types(20), diverse_pods(pods), policy)


def summary_of(document: dict[str, Any]) -> dict[str, Any]:
    pools, types, pods, _ = read_problem(document)
    state = ClusterState.from_manifests([*pools, *pods])
    return input_summary(types, state.pending_pods(), state.nodepools)


def test_summary_differences_name_what_changed() -> None:
    document = small_problem()
    expected = summary_of(document)
    assert summary_differences(expected, json.loads(json.dumps(expected))) == []
    document["instanceTypes"][3]["offerings"][0]["price"] += 0.01
    document["instanceTypes"][4]["offerings"][1]["available"] = False
    document["pods"][0]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "7"
    changed = summary_differences(expected, summary_of(document))
    assert [line.split(":")[0] for line in changed] == ["availableOfferings", "offeringPriceSum", "podRequestsMilli"]


def test_read_problem_refuses_another_format() -> None:
    with pytest.raises(ValueError, match="format"):
        read_problem({**small_problem(), "format": "something-else"})
    with pytest.raises(ValueError, match="preferencePolicy"):
        problem_document("x", [], [], [], "Sometimes")


def adze_result(tmp_path: Path, document: dict[str, Any]) -> dict[str, Any]:
    problem, result = tmp_path / "problem.json", tmp_path / "result.json"
    problem.write_text(json.dumps(document))
    assert adze_child(str(problem), str(result)) == 0
    return json.loads(result.read_text())


def check_args(document: dict[str, Any]) -> tuple:
    pools, types, pods, _ = read_problem(document)
    state = ClusterState.from_manifests([*pools, *pods])
    return ({p.key: p.scheduling_requests for p in state.pending_pods()}, {t.name: t for t in types},
            set(state.nodepools))


def test_adze_side_places_every_pod_and_its_result_passes_the_checks(tmp_path: Path) -> None:
    document = small_problem()
    result = adze_result(tmp_path, document)
    assert summary_differences(summary_of(document), result["input"]) == []
    cost, found = check("Adze", result, *check_args(document))
    assert found == []
    assert sum(len(c["pods"]) for c in result["claims"]) == 50
    assert cost == pytest.approx(sum(c["price"] for c in result["claims"]))
    assert result["buildSeconds"] > 0 and result["solveSeconds"] > 0


def test_repack_row_is_checked_like_a_side_and_never_costs_more(tmp_path: Path) -> None:
    # The real catalogue and generic pods (bench/scheduling.py's mix): the repack has room to act there.
    from bench.scheduling import PodFactory

    factory = PodFactory(seed=3)
    document = problem_document("repack", [nodepool(limits=False)], load_preset(),
                                [factory.generic() for _ in range(80)])
    problem, result_path = tmp_path / "problem.json", tmp_path / "result.json"
    problem.write_text(json.dumps(document))
    assert adze_child(str(problem), str(result_path), with_repack=True) == 0
    result = json.loads(result_path.read_text())
    repacked = {**result["repack"], "podErrors": result["podErrors"]}
    cost, found = check("Adze", result, *check_args(document))
    repack_cost, repack_found = check("Adze+repack", repacked, *check_args(document))
    assert found == [] and repack_found == []
    assert repack_cost <= cost + 1e-9
    assert sorted(k for c in repacked["claims"] for k in c["pods"]) == sorted(k for c in result["claims"]
                                                                               for k in c["pods"])


def test_checks_catch_a_missing_pod_a_wrong_price_an_overfull_claim_and_unknown_types(tmp_path: Path) -> None:
    document = small_problem()
    result = adze_result(tmp_path, document)
    args = check_args(document)
    broken = json.loads(json.dumps(result))
    dropped = broken["claims"][0]["pods"].pop()
    broken["claims"][1]["price"] += 1
    broken["claims"][2]["instanceTypes"] = ["fake-it-0"]  # 1 CPU: too small for what it holds
    broken["claims"][2]["price"] = 0.1 + 0.1 * 2 * 2**30 / 1e9
    broken["claims"][2]["pods"] += broken["claims"][3]["pods"] * 3
    broken["claims"][4]["instanceTypes"] = ["no-such-type"]
    _, found = check("Karpenter", broken, *args)
    text = "\n".join(found)
    assert f"missing from every claim, e.g. {dropped}" in text
    assert "claim 1: Karpenter priced it" in text
    assert "claim 2: its pods do not fit its cheapest option fake-it-0" in text
    assert "in two claims" in text
    assert "claim 4: options ['no-such-type'] not in the catalogue" in text
    broken = json.loads(json.dumps(result))
    broken["podErrors"] = {"default/pod-1": "no instance type fits"}
    assert any("1 pods unscheduled" in line for line in check("Karpenter", broken, *args)[1])


def test_problems_cover_the_scheduling_benchmark_workloads() -> None:
    types = synthetic_types(10)
    found = problems("synthetic-400", types, ["generic", "diverse", "preferences"], [100, 200], 40)
    assert [name for name, _ in found] == ["generic", "generic", "diverse", "diverse", "preferences Respect",
                                           "preferences Ignore"]
    assert [len(doc["pods"]) for _, doc in found] == [100, 200, 100, 200, 40, 40]
    assert found[5][1]["preferencePolicy"] == "Ignore"
    generic_pod = found[0][1]["pods"][0]["spec"]
    assert set(generic_pod) == {"containers"}
    assert Resources.from_manifest(generic_pod["containers"][0]["resources"]["requests"])


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("go") is None, reason="Go is not installed")
def test_compare_runs_karpenter_on_the_same_problem(tmp_path: Path) -> None:
    """Builds bench/karpenter (once per source version, cached outside the tree) and compares a small run."""
    out = tmp_path / "figures.json"
    run = subprocess.run([sys.executable, str(REPO / "bench" / "compare.py"), "--quick", "--sizes", "200",
                          "--workloads", "generic", "diverse", "--catalogues", "synthetic-400", "aws-us-east-1",
                          "--consolidation", "40", "--json", str(out)], capture_output=True, text=True, timeout=3600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(r.get("catalogue"), r.get("workload", r.get("consolidation"))) for r in rows] == [
        ("synthetic-400", "generic"), ("synthetic-400", "diverse"), ("aws-us-east-1", "generic"),
        ("aws-us-east-1", "diverse"), (None, 40)]
    for row in rows[:4]:
        assert row["mismatches"] == []
        for side in ("adze", "karpenter"):
            assert row[side]["problems"] == [] and row[side]["nodes"] > 0 and row[side]["cost"] > 0
            assert 0 < row["lpBound"] <= row[side]["cost"]
    for side in ("adze", "karpenter"):
        assert rows[4][side]["problems"] == [] and rows[4][side]["action"] in ("delete", "replace")
    assert "Karpenter v1.14.1" in json.loads(out.read_text())["karpenter"]


@pytest.mark.slow  # measures child processes
def test_measured_peak_is_the_commands_own_not_the_benchmarks() -> None:
    from bench.measure import measured

    ballast = bytearray(150 * 2**20)
    ballast[:: 4096] = b"\1" * len(ballast[:: 4096])  # resident in this process
    _, _, small_peak, code, _ = measured([sys.executable, "-c", "pass"])
    assert code == 0 and small_peak < 100
    grow = "x = bytearray(200 * 2**20); x[::4096] = b'1' * len(x[::4096])"
    _, cpu, big_peak, code, _ = measured([sys.executable, "-c", grow])
    assert code == 0 and big_peak > 200 and cpu > 0
    failing = "import sys; print('boom', file=sys.stderr); sys.exit(3)"
    assert measured([sys.executable, "-c", failing])[3:] == (3, "boom\n")
    del ballast


def test_the_go_side_is_built_once_per_source_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import bench.compare as compare

    binary = tmp_path / "bin" / "karpenter-bench"
    monkeypatch.setattr(compare, "BINARY", binary)
    monkeypatch.setattr(compare, "CACHE", tmp_path)
    monkeypatch.setattr(compare.shutil, "which", lambda name: "/usr/bin/go")
    builds: list[list[str]] = []

    def fake_build(argv: list[str], **kwargs: Any) -> None:
        builds.append(argv)
        assert kwargs["cwd"] == compare.GO_MODULE
        assert kwargs["env"]["GOMODCACHE"] == str(tmp_path / "gomod")
        assert kwargs["env"]["GOCACHE"] == str(tmp_path / "gocache")
        binary.write_bytes(b"built")

    monkeypatch.setattr(compare.subprocess, "run", fake_build)
    assert compare.ensure_karpenter_binary() == binary
    assert compare.ensure_karpenter_binary() == binary  # warm: the stamp matches, nothing is built
    assert len(builds) == 1 and builds[0][:2] == ["/usr/bin/go", "build"]
    (tmp_path / "bin" / "karpenter-bench.stamp").write_text("an older source")
    compare.ensure_karpenter_binary()
    assert len(builds) == 2


def test_adze_consolidation_decision_on_the_shared_cluster_passes_the_checks(tmp_path: Path) -> None:
    from bench.compare import adze_consolidate_child, check_decision, consolidation_problem

    document = json.loads(json.dumps(consolidation_problem(30)))
    names = {n["metadata"]["name"] for n in document["nodes"]}
    assert {p["spec"]["nodeName"] for p in document["pods"]} == names  # the emptied nodes are left out
    assert {c["status"]["nodeName"] for c in document["nodeClaims"]} == names
    problem, out = tmp_path / "cluster.json", tmp_path / "decision.json"
    problem.write_text(json.dumps(document))
    assert adze_consolidate_child(str(problem), str(out)) == 0
    result = json.loads(out.read_text())
    assert result["nodes"] == len(names) and result["decision"] in ("delete", "replace")
    types = {t.name: t for t in read_problem(document)[1]}
    savings, found = check_decision("Adze", result, document, types)
    assert found == [] and savings == pytest.approx(result["savingsPerHour"], abs=1e-5)
    result["candidatesDisrupted"][0]["price"] += 1
    result["candidatesDisrupted"].append({"name": "node-99999", "price": 1.0})
    found = check_decision("Karpenter", result, document, types)[1]
    assert any("priced it" in line for line in found) and any("node-99999" in line for line in found)


@pytest.mark.slow  # starts and interrupts processes
def test_an_interrupted_measurement_leaves_nothing_running() -> None:
    import time

    script = "import sys; sys.path.insert(0, 'bench'); from measure import measured; measured(['sleep', '417.25'])"
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=REPO)

    def sleeping() -> list[str]:
        return subprocess.run(["pgrep", "-f", "^sleep 417.25$"], capture_output=True, text=True).stdout.split()

    deadline = time.monotonic() + 60
    while not sleeping() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sleeping(), "the measured command did not start"
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 60
    while sleeping() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sleeping() == []
