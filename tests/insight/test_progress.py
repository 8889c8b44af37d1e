"""Progress on stderr: on a terminal only, rewritten in place, erased before the result is printed."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

from insight_support import EXAMPLES, example_cluster, run_cli, write_snapshot

from reconciler.insight import progress as progress_module
from reconciler.insight.progress import ERASE, Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_throttled_on_a_terminal_and_silent_otherwise() -> None:
    now = [0.0]
    terminal = Terminal()
    progress = Progress("plan", terminal, interval=0.5, clock=lambda: now[0])
    progress.update("1 pass")
    now[0] = 0.1
    progress.update("2 passes")  # within the interval: not drawn
    now[0] = 1.5
    progress.update("3 passes")
    progress.done()
    assert terminal.getvalue() == (f"{ERASE}plan: 1 pass (0.0s elapsed){ERASE}plan: 3 passes (1.5s elapsed)"
                                   f"{ERASE}")
    piped = io.StringIO()
    quiet = Progress("plan", piped)
    quiet.update("1 pass", force=True)
    quiet.done()
    assert piped.getvalue() == ""


def test_plan_and_simulate_report_progress_on_a_terminal_stderr(
    capsys: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    snapshot = write_snapshot(tmp_path, example_cluster())
    code, out, err = run_cli(capsys, "plan", "--snapshot", str(snapshot), "--nodepools",
                             str(EXAMPLES / "relabel-general.yaml"))
    assert code == 0 and err == ""  # not a terminal: silent
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(progress_module, "INTERVAL", 0.0)  # draw every update (the run is quick)
    code, out, _ = run_cli(capsys, "plan", "--snapshot", str(snapshot), "--nodepools",
                           str(EXAMPLES / "relabel-general.yaml"))
    assert code == 0 and out.startswith("REVIEW")
    drawn = terminal.getvalue()
    assert "plan: reading the snapshot" in drawn and "node(s) replaced or removed" in drawn
    assert drawn.endswith(ERASE)  # the line is gone before the result
    terminal.seek(0)
    terminal.truncate()
    code, out, _ = run_cli(capsys, "simulate", str(EXAMPLES / "cluster.yaml"))
    assert code == 0 and "simulate: step 1/" in terminal.getvalue()
