#!/usr/bin/env bash
# Sets up .venv with every dependency group, lints, and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
