"""The offline commands run with fewer full garbage collections (imported modules frozen); results do not
depend on it (tests/identity runs the commands as users do)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from reconciler.collector import ONE_SHOT_THRESHOLDS

PROBE = """
import contextlib, gc, io, sys
from reconciler.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    main(sys.argv[1:])
print(gc.get_threshold(), gc.get_freeze_count() > 0, gc.isenabled())
"""


@pytest.mark.slow  # a CLI process
def test_an_offline_command_runs_with_the_one_shot_thresholds() -> None:
    run = subprocess.run([sys.executable, "-c", PROBE, "crds"], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == f"{ONE_SHOT_THRESHOLDS} True True"
