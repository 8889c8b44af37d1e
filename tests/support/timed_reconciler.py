"""``python -m reconciler run`` with test-sized periods: the real entry point in a real process.

    ADZE_TEST_TIMINGS='{"gc_min_age": 2}' ADZE_TEST_SETTINGS='{"consolidation_validation_wait": 1}' \\
        python tests/support/timed_reconciler.py [run args]

Karpenter's periods (15 s consolidation validation, 10 s disruption polling, 30 s garbage-collection age...)
would make each end-to-end test last minutes. ``ADZE_TEST_TIMINGS`` (``reconciler.controllers.runtime.Timings``
fields) and ``ADZE_TEST_SETTINGS`` (``reconciler.settings.Settings`` fields the environment does not name) set
shorter ones; nothing else differs from ``python -m reconciler run``: same CLI, same settings parsing, same
kubeconfig and AWS clients, same signals and exit codes.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from typing import Any

from reconciler.controllers import app as app_module
from reconciler.controllers.runtime import Timings
from reconciler.settings import Settings


def _overrides(variable: str) -> dict[str, Any]:
    raw = os.environ.get(variable, "")
    return dict(json.loads(raw)) if raw else {}


def install() -> None:
    timings = _overrides("ADZE_TEST_TIMINGS")
    settings = _overrides("ADZE_TEST_SETTINGS")
    if timings:
        app_module.App = functools.partial(app_module.App, timings=Timings(**timings))  # type: ignore[misc, assignment]
    if settings:
        from_env = Settings.from_env.__func__  # type: ignore[attr-defined]

        def with_overrides(cls: type[Settings], env: Any) -> Settings:
            return from_env(cls, env).with_overrides(**settings)  # type: ignore[no-any-return]

        Settings.from_env = classmethod(with_overrides)  # type: ignore[method-assign, assignment]


def main() -> int:
    install()
    from reconciler.cli import main as reconciler_main

    return reconciler_main(["run", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
