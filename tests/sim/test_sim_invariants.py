"""Invariants over random valid scenarios, checked after every step (issue 19), and the shrunk
counterexamples the campaign found, kept as regression scenarios under tests/sim/regressions/.

ADZE_INVARIANT_EXAMPLES raises the number of random scenarios for a longer run (CI: the default).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from invariant_harness import run_checked, scenarios

REGRESSIONS = sorted((Path(__file__).parent / "regressions").glob("*.yaml"))
EXAMPLES = int(os.environ.get("ADZE_INVARIANT_EXAMPLES", "150"))


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenarios())
def test_every_step_of_a_random_scenario_keeps_the_invariants(document: dict) -> None:
    run_checked(document)


@settings(max_examples=max(5, EXAMPLES // 8), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scenarios())
def test_the_same_scenario_gives_the_same_result_document(document: dict) -> None:
    first = json.dumps(run_checked(json.loads(json.dumps(document))), sort_keys=True)
    second = json.dumps(run_checked(json.loads(json.dumps(document))), sort_keys=True)
    assert first == second


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.stem for p in REGRESSIONS])
def test_regression_scenarios_keep_the_invariants(path: Path) -> None:
    run_checked(yaml.safe_load(path.read_text()))
