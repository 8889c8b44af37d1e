"""Result identity (issue 14): speed-ups keep every decision, price and explanation as it was.

Each case runs a user's command on a fixed input (see ``identity_cases.py``) and compares the result document
with the one recorded in ``expected/`` before the speed-ups. A document may gain keys (output formats grow);
every recorded key, list element and value must be the same. When a change is meant to alter decisions,
re-record with ``tests/identity/record_results.py`` and say why in the commit.
"""

from __future__ import annotations

import json

import pytest
from identity_cases import Case, canonical, cases, differences, expected_path

CASES = cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_result_document_is_unchanged(case: Case) -> None:
    path = expected_path(case)
    assert path.is_file(), f"no recorded document for {case.name}: run tests/identity/record_results.py"
    expected = json.loads(path.read_text())
    found = list(differences(expected, canonical(case.produce())))
    assert not found, f"{case.name} changed ({len(found)} differences):\n" + "\n".join(found[:20])


def test_the_comparison_sees_a_changed_price_and_a_lost_key_but_allows_a_new_key() -> None:
    expected = {"steps": [{"price": 0.085, "pods": ["a", "b"]}], "cost": 1}
    assert not list(differences(expected, {"steps": [{"price": 0.085, "pods": ["a", "b"], "new": 1}], "cost": 1}))
    assert list(differences(expected, {"steps": [{"price": 0.0851, "pods": ["a", "b"]}], "cost": 1}))
    assert list(differences(expected, {"steps": [{"price": 0.085, "pods": ["b", "a"]}], "cost": 1}))
    assert list(differences(expected, {"steps": [{"price": 0.085, "pods": ["a", "b"]}]}))
    assert list(differences(expected, {"steps": [{"price": 0.085, "pods": ["a"]}], "cost": 1}))
    assert list(differences(expected, {"steps": [{"price": 0.085, "pods": ["a", "b"]}], "cost": 1.0}))
