#!/usr/bin/env python3
"""Type-check reconciler/ and components/ with mypy against a baseline that only shrinks.

    .venv/bin/python scripts/typecheck.py               # check (what ./scripts/test.sh runs)
    .venv/bin/python scripts/typecheck.py --update      # after fixing errors: drop them from the baseline
    .venv/bin/python scripts/typecheck.py --regenerate  # rewrite the baseline from scratch (after a merge)

mypy's settings are in pyproject.toml ([tool.mypy]). The baseline
(``scripts/typecheck-baseline.txt``) lists the errors accepted today, each as
``count<TAB>file<TAB>code<TAB>message``: no line numbers, so edits elsewhere in
a file do not disturb it. The check fails when an error is not in the baseline
(or occurs more often than counted) and when a baselined error is gone (so
the baseline shrinks with every fix: run ``--update``). ``--update`` refuses
to add errors; ``--regenerate`` accepts whatever mypy reports now.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BASELINE = REPO / "scripts" / "typecheck-baseline.txt"
HEADER = (
    "# mypy errors accepted for now (scripts/typecheck.py): count, file, error code, message.\n"
    "# Only shrinks: fix an error, then run `scripts/typecheck.py --update`.\n"
)
_ERROR = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+)(?::\d+)?: error: (?P<message>.*?)(?:  \[(?P<code>[a-z-]+)\])?$")
# Messages that mention other lines ("defined on line 12") would churn with unrelated edits.
_LINE_REFERENCE = re.compile(r"\bline \d+\b")

Key = tuple[str, str, str]  # (file, code, message)


def parse(output: str) -> list[tuple[Key, int]]:
    """``(key, line)`` for every error line of mypy's output (notes and the summary are skipped)."""
    found = []
    for text in output.splitlines():
        match = _ERROR.match(text.strip())
        if match is None:
            continue
        message = _LINE_REFERENCE.sub("line N", match["message"].strip())
        found.append(((match["path"].replace("\\", "/"), match["code"] or "misc", message), int(match["line"])))
    return found


def read_baseline(path: Path = BASELINE) -> Counter[Key]:
    counts: Counter[Key] = Counter()
    if not path.exists():
        return counts
    for number, text in enumerate(path.read_text().splitlines(), 1):
        if not text.strip() or text.startswith("#"):
            continue
        parts = text.split("\t")
        if len(parts) != 4 or not parts[0].isdigit():
            raise SystemExit(f"{path.name}:{number}: expected count<TAB>file<TAB>code<TAB>message")
        counts[(parts[1], parts[2], parts[3])] += int(parts[0])
    return counts


def format_baseline(counts: Counter[Key]) -> str:
    lines = [f"{count}\t{file}\t{code}\t{message}" for (file, code, message), count in sorted(counts.items())]
    return HEADER + "".join(line + "\n" for line in lines)


def compare(current: Iterable[tuple[Key, int]], baseline: Counter[Key]) -> tuple[list[str], list[str]]:
    """(new errors, fixed errors) as printable lines."""
    errors = list(current)
    counts: Counter[Key] = Counter(key for key, _ in errors)
    new, fixed = [], []
    for key, count in sorted(counts.items()):
        extra = count - baseline.get(key, 0)
        if extra > 0:
            lines = sorted(line for k, line in errors if k == key)
            where = ", ".join(f"{key[0]}:{line}" for line in lines)
            new.append(f"{where}: {key[2]}  [{key[1]}]" + (f" ({extra} more than the baseline's)" if
                                                          baseline.get(key) else ""))
    for key, count in sorted(baseline.items()):
        gone = count - counts.get(key, 0)
        if gone > 0:
            fixed.append(f"{key[0]}: {key[2]}  [{key[1]}]" + (f" ({gone} fewer)" if counts.get(key) else ""))
    return new, fixed


def run_mypy() -> str:
    import os

    from mypy import api

    os.chdir(REPO)  # paths in the config and in the report are relative to the repository
    stdout, stderr, status = api.run(["--config-file", str(REPO / "pyproject.toml"), "--no-error-summary",
                                      "--show-error-codes", "--no-pretty", "--no-color-output"])
    if status not in (0, 1) or (status == 1 and not parse(stdout)):
        raise SystemExit(f"mypy failed to run:\n{stdout}{stderr}")
    return stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--update", action="store_true", help="drop fixed errors from the baseline (never adds)")
    mode.add_argument("--regenerate", action="store_true", help="rewrite the baseline from the current errors")
    args = parser.parse_args(argv)
    current = parse(run_mypy())
    counts: Counter[Key] = Counter(key for key, _ in current)
    if args.regenerate:
        BASELINE.write_text(format_baseline(counts))
        print(f"typecheck: baseline regenerated, {sum(counts.values())} error(s)")
        return 0
    baseline = read_baseline()
    new, fixed = compare(current, baseline)
    if new:
        print(f"typecheck: {len(new)} error(s) not in the baseline (fix them; the baseline only shrinks):")
        print("".join(f"  {line}\n" for line in new), end="")
        return 1
    if args.update:
        BASELINE.write_text(format_baseline(counts))
        print(f"typecheck: baseline updated, {sum(counts.values())} error(s) left")
        return 0
    if fixed:
        print(f"typecheck: {len(fixed)} baselined error(s) are fixed; run scripts/typecheck.py --update to drop them:")
        print("".join(f"  {line}\n" for line in fixed), end="")
        return 1
    print(f"typecheck: ok ({sum(counts.values())} baselined error(s) left)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
