"""The fast set starts no process: a test that does (a CLI run, a browser, a second interpreter) is ``slow``.

The ``slow`` marker's definition (pyproject) is "tests starting processes and servers"; this guard holds every
other test to it, so the fast set's CPU budget cannot drift back up through process starts.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class ProcessInFastTest(AssertionError):
    pass


@contextmanager
def no_processes(test: str) -> Iterator[None]:
    """While open, starting a process raises ``ProcessInFastTest`` naming ``test`` and the command."""
    original = subprocess.Popen.__init__

    def refuse(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
        command = args[0] if args else kwargs.get("args")
        raise ProcessInFastTest(f"{test} starts a process ({command!r}): mark it @pytest.mark.slow "
                                "(the fast set starts no process; tests/support/process_guard.py)")

    subprocess.Popen.__init__ = refuse  # type: ignore[method-assign]
    try:
        yield
    finally:
        subprocess.Popen.__init__ = original  # type: ignore[method-assign]
