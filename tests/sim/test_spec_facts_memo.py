"""The simulated cluster parses a pod's spec once for all its stored versions (``SpecFactsMemo``): every reuse
must equal a parse from scratch, over scenarios that create, bind, evict, drain, interrupt, patch and delete
pods (a manifest edited in place after it was handed over would show up here as a stale reuse)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.insight.frames import RecordingSimulation
from reconciler.insight.snapshot import simulated_snapshot
from reconciler.insight.sources import load_snapshot
from reconciler.model import pod as pod_model
from reconciler.sim.runner import run_scenario_file
from reconciler.sim.scenario import load_scenario_file

REGRESSIONS = Path(__file__).parent / "regressions"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _scenarios(shared_dir: Path) -> list[Path]:
    return [*sorted((shared_dir / "scenarios").glob("*.yaml")), *sorted(REGRESSIONS.glob("*.yaml")),
            *sorted(EXAMPLES.glob("*.yaml"))]


def _checking(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make every memo answer also parse from scratch and compare; returns the count of reuses, kept current."""
    reused = [0]
    original = pod_model.SpecFactsMemo.facts

    def checked(memo: pod_model.SpecFactsMemo, spec: Any, name: str, overhead: Any) -> dict[str, Any]:
        before = len(memo._entries)
        facts = original(memo, spec, name, overhead)
        if len(memo._entries) == before:  # nothing added: a reuse (or a clear, then a fresh parse: equal too)
            reused[0] += 1
        assert facts == pod_model._spec_facts(spec, name, overhead), name
        return facts

    monkeypatch.setattr(pod_model.SpecFactsMemo, "facts", checked)
    return reused


def test_every_reused_spec_parse_equals_a_fresh_one(shared_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reused = _checking(monkeypatch)
    scenarios = _scenarios(shared_dir)
    assert len(scenarios) >= 10
    for scenario in scenarios:
        run_scenario_file(scenario)
    assert reused[0] > 100  # the memo is in use, so the comparison above means something


async def test_a_snapshot_s_pods_are_parsed_once_for_validation_and_the_simulated_cluster(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    document = await simulated_snapshot(load_scenario_file(EXAMPLES / "plan" / "cluster.yaml"))
    written = tmp_path / "snapshot.json"
    written.write_text(json.dumps(document))
    reused = _checking(monkeypatch)
    snapshot = load_snapshot(written)
    pods = sum(1 for manifest in snapshot.objects if manifest["kind"] == "Pod")
    assert pods > 10 and reused[0] == 0
    for _ in range(2):  # plan builds several simulations from one snapshot: each reuses the validation's parse
        before = reused[0]
        await RecordingSimulation(snapshot.scenario(), frames=False).load()
        assert reused[0] - before >= pods
