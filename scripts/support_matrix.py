"""Rewrite the generated support matrix of docs/karpenter-compatibility.md from reconciler/api/support.py."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reconciler.api.support_check import support_matrix_markdown

DOC = Path(__file__).resolve().parents[1] / "docs" / "karpenter-compatibility.md"
START, END = "<!-- support-matrix:start -->", "<!-- support-matrix:end -->"


def main() -> int:
    text = DOC.read_text()
    before, _, rest = text.partition(START)
    _, _, after = rest.partition(END)
    DOC.write_text(f"{before}{START}\n{support_matrix_markdown()}{END}{after}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
