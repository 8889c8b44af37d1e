"""The README reads as a newcomer needs it (issue 25, item 7): the two commands first, then what Adze is,
development notes last, and nothing that points outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def test_the_readme_opens_with_the_two_commands_then_says_what_adze_is() -> None:
    assert README.splitlines()[:6] == [
        "# Adze",
        "",
        "```bash",
        "./scripts/demo.sh    # set up .venv and run the simulated demo (python -m reconciler simulate "
        "examples/inflate.yaml)",
        "./scripts/test.sh    # set up .venv with every dependency group, run ruff, the type check and the whole "
        "test suite",
        "```",
    ]
    sections = re.findall(r"^## (.+)$", README, re.MULTILINE)
    assert sections[0] == "What Adze is" and sections[-1] == "Development"
    # The development notes (test workers, the type-check baseline) come after everything a user reads.
    assert README.index("typecheck-baseline.txt") > README.index("## Development")


def test_nothing_in_the_readme_or_docs_points_outside_the_repository() -> None:
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = path.read_text()
        assert "../shared" not in text and "/work/" not in text, path.name
        for target in re.findall(r"`((?:docs|scripts|reconciler|tests|examples|bench)/[\w./-]+\.(?:md|py|yaml|yml))`",
                                 text):
            assert (REPO / target).exists(), f"{path.name} names {target}, which is not in the repository"
    assert (REPO / "docs" / "scenario-format.md").exists() and (REPO / "docs" / "design.md").exists()
