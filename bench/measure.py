"""Wall time, CPU time and peak RSS of one command, as a process of its own.

The command is started by a small launcher process that forks and execs it and reads its ``wait4`` usage. A
child forked straight from the benchmark would report the benchmark's own resident memory as its peak:
Linux records a process's peak RSS across ``exec``, so it keeps the copy of the parent it started as (a
benchmark holding 300 MB made ``/bin/true`` peak at 313 MB). The launcher is a fresh interpreter of ~10 MB, so
that is all a measured peak can include beyond the command's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

LAUNCHER = """
import ctypes, json, os, signal, sys, time

def die_with_parent():  # Linux: PR_SET_PDEATHSIG, so an interrupted benchmark leaves nothing running
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        pass

die_with_parent()
started = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        die_with_parent()
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - started
with open(sys.argv[1], "w") as out:
    json.dump({"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "peak_kb": usage.ru_maxrss,
               "exit": os.waitstatus_to_exitcode(status)}, out)
"""


def measured(argv: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None
             ) -> tuple[float, float, float, int, str]:
    """(wall s, CPU s (user + system), peak RSS MB, exit code, the end of its stderr) of ``argv``.

    Wall time runs from the launcher's fork to the command's exit (the launcher's own start is not counted)."""
    with tempfile.TemporaryDirectory(prefix="adze-measure-") as folder:
        usage_file = Path(folder) / "usage.json"
        with (Path(folder) / "stderr").open("w+b") as errors:
            subprocess.run([sys.executable, "-c", LAUNCHER, str(usage_file), *argv], cwd=cwd, env=env,
                           stdout=subprocess.DEVNULL, stderr=errors, check=False)
            errors.seek(0)
            tail = errors.read()[-2000:].decode(errors="replace")
        if not usage_file.exists():
            raise RuntimeError(f"{' '.join(argv)}: the launcher failed: {tail}")
        usage = json.loads(usage_file.read_text())
    return usage["wall"], usage["cpu"], usage["peak_kb"] / 1024, usage["exit"], tail


if __name__ == "__main__":  # python bench/measure.py COMMAND... : the figures for one command
    wall_s, cpu_s, peak_mb, code, _ = measured(sys.argv[1:], env=os.environ)
    print(f"wall {wall_s:.2f} s, CPU {cpu_s:.2f} s, peak RSS {peak_mb:.0f} MB, exit {code}")
    sys.exit(code)
