"""Observability tests use the controller tests' helpers (``ctrl_steps``, ``ctrl_objects``)."""

from __future__ import annotations

import sys
from pathlib import Path

_CONTROLLERS = str(Path(__file__).resolve().parents[1] / "controllers")
if _CONTROLLERS not in sys.path:
    sys.path.insert(0, _CONTROLLERS)
