"""The type-check baseline (scripts/typecheck.py): new errors fail, fixed ones must leave, line churn is fine."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("typecheck", REPO / "scripts" / "typecheck.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


typecheck = load_script()

REPORT = """\
reconciler/a.py:10: error: Need type annotation for "work"  [var-annotated]
reconciler/a.py:12: note: See https://mypy.rtfd.io
reconciler/a.py:40: error: Name "x" already defined on line 12  [no-redef]
reconciler/b.py:7: error: Cannot infer type of lambda  [misc]
reconciler/b.py:9: error: Cannot infer type of lambda  [misc]
"""


def baseline_of(report: str) -> Counter:
    return Counter(key for key, _ in typecheck.parse(report))


def test_errors_are_keyed_by_file_code_and_message_without_line_numbers() -> None:
    keys = baseline_of(REPORT)
    assert keys == Counter({
        ("reconciler/a.py", "var-annotated", 'Need type annotation for "work"'): 1,
        ("reconciler/a.py", "no-redef", 'Name "x" already defined on line N'): 1,
        ("reconciler/b.py", "misc", "Cannot infer type of lambda"): 2,
    })


def test_the_same_errors_on_other_lines_pass() -> None:
    moved = REPORT.replace(":10:", ":31:").replace("line 12", "line 55").replace(":9:", ":90:")
    assert typecheck.compare(typecheck.parse(moved), baseline_of(REPORT)) == ([], [])


def test_a_new_error_fails_naming_where_it_is() -> None:
    grown = REPORT + 'reconciler/c.py:3: error: Incompatible return value type  [return-value]\n'
    new, fixed = typecheck.compare(typecheck.parse(grown), baseline_of(REPORT))
    assert new == ["reconciler/c.py:3: Incompatible return value type  [return-value]"] and fixed == []
    # One more of an error the baseline already counts is new as well.
    again = REPORT + "reconciler/b.py:11: error: Cannot infer type of lambda  [misc]\n"
    new, _ = typecheck.compare(typecheck.parse(again), baseline_of(REPORT))
    assert len(new) == 1 and "1 more than the baseline's" in new[0]


def test_a_fixed_error_must_leave_the_baseline() -> None:
    shrunk = "\n".join(line for line in REPORT.splitlines() if ":7:" not in line)
    new, fixed = typecheck.compare(typecheck.parse(shrunk), baseline_of(REPORT))
    assert new == [] and fixed == ["reconciler/b.py: Cannot infer type of lambda  [misc] (1 fewer)"]


def test_the_baseline_file_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "baseline.txt"
    path.write_text(typecheck.format_baseline(baseline_of(REPORT)))
    assert typecheck.read_baseline(path) == baseline_of(REPORT)
    path.write_text("1\tonly three\tfields\n")
    with pytest.raises(SystemExit, match=r"baseline\.txt:1: expected count"):
        typecheck.read_baseline(path)


def test_the_committed_baseline_is_readable_and_small() -> None:
    """The baseline holds what is left after fixing the real errors: a handful, each counted once."""
    committed = typecheck.read_baseline()
    assert 0 < sum(committed.values()) <= 10
    assert all(path.startswith(("reconciler/", "components/")) for path, _, _ in committed)


def test_ci_runs_the_type_check() -> None:
    script = (REPO / "scripts" / "test.sh").read_text()
    assert "scripts/typecheck.py" in script
    assert script.index("scripts/typecheck.py") < script.index("pytest")
