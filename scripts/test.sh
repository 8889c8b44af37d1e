#!/usr/bin/env bash
# Sets up .venv with every dependency group, lints, type-checks against the baseline and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'
.venv/bin/ruff check .
.venv/bin/python scripts/typecheck.py
exec .venv/bin/python -m pytest "$@"
