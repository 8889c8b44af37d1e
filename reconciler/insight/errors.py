"""The one error type the insight commands raise for bad input (the CLI turns it into exit 2)."""

from __future__ import annotations


class InsightError(ValueError):
    """Invalid input; ``str()`` is one line that starts with the offending file or key path."""
