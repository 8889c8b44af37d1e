"""The simulated cluster parses a pod's spec once for all its stored versions (``SpecFactsMemo``): every reuse
must equal a parse from scratch, over scenarios that create, bind, evict, drain, interrupt, patch and delete
pods (a manifest edited in place after it was handed over would show up here as a stale reuse)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reconciler.model import pod as pod_model
from reconciler.sim.runner import run_scenario_file

REGRESSIONS = Path(__file__).parent / "regressions"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _scenarios(shared_dir: Path) -> list[Path]:
    return [*sorted((shared_dir / "scenarios").glob("*.yaml")), *sorted(REGRESSIONS.glob("*.yaml")),
            *sorted(EXAMPLES.glob("*.yaml"))]


def test_every_reused_spec_parse_equals_a_fresh_one(shared_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
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
    scenarios = _scenarios(shared_dir)
    assert len(scenarios) >= 10
    for scenario in scenarios:
        run_scenario_file(scenario)
    assert reused[0] > 100  # the memo is in use, so the comparison above means something
