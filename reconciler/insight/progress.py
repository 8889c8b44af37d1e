"""Progress on stderr for commands that can run longer than a second, only when stderr is a terminal.

One line, rewritten in place (``\\r`` and erase-line) at most every ``interval`` seconds: what the
command is doing, its counters and the wall time elapsed. Piped or redirected, nothing is written, so
logs and CI output stay clean; ``done`` erases the line before the command prints its result.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO

ERASE = "\r\x1b[K"
INTERVAL = 0.2  # seconds between redraws


class Progress:
    def __init__(
        self,
        label: str,
        stream: IO[str] | None = None,
        *,
        enabled: bool | None = None,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)()) if enabled is None else enabled
        self.interval = INTERVAL if interval is None else interval
        self.clock = clock
        self.started = clock()
        self._last = float("-inf")
        self._shown = False

    def update(self, text: str, *, force: bool = False) -> None:
        if not self.enabled:
            return
        now = self.clock()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        self.stream.write(f"{ERASE}{self.label}: {text} ({now - self.started:.1f}s elapsed)")
        self.stream.flush()
        self._shown = True

    def done(self) -> None:
        if self._shown:
            self.stream.write(ERASE)
            self.stream.flush()
            self._shown = False
