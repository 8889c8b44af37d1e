#!/usr/bin/env bash
# Sets up .venv (runtime dependencies only) and runs the simulated demo.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e .
exec .venv/bin/python -m reconciler simulate examples/inflate.yaml "$@"
