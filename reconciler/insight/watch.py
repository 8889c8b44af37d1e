"""``status --watch``: redraw the node view of a live cluster every few seconds, like eks-node-viewer.

Each refresh lists the cluster again through the Kubernetes API (the same read ``snapshot`` does),
prices it with the catalogue resolved once at the start, and redraws: on a terminal the screen is
cleared and the view drawn from the top; piped, each view follows the previous one after a blank
line. It runs until interrupted, or for ``count`` refreshes. A refresh that cannot read the cluster
prints one line and tries again at the next interval.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import IO, Any

from reconciler.insight.frames import Frame, RecordingSimulation
from reconciler.insight.snapshot import sanitize_objects, snapshot_document
from reconciler.insight.sources import Snapshot
from reconciler.kube.api import ApiError

CLEAR = "\x1b[H\x1b[2J"

Collect = Callable[[], Awaitable[list[dict[str, Any]]]]


async def frame_of(objects: list[dict[str, Any]], catalog: dict[str, Any], source: str) -> Frame:
    clean, _ = sanitize_objects(objects)
    document = snapshot_document(clean, taken_at=datetime.now(UTC).replace(microsecond=0), name="status",
                                 catalog=catalog, source=source)
    sim = RecordingSimulation(Snapshot(document, source).scenario(), frames=False)
    await sim.load()
    return sim.frames[-1]


def watch(
    collect: Collect,
    catalog: dict[str, Any],
    render: Callable[[Frame], str],
    out: IO[str],
    *,
    source: str,
    interval: float,
    count: int | None = None,
    clear: bool = False,
    sleep: Callable[[float], None] | None = None,
) -> int:
    """Refresh ``count`` times (forever when None); returns how many views were drawn."""
    drawn = 0
    refreshes = 0
    while count is None or refreshes < count:
        if refreshes:
            (sleep or pause)(interval)
        refreshes += 1
        try:
            frame = asyncio.run(_refresh(collect, catalog, source))
        except (ApiError, OSError, RuntimeError) as err:  # briefly unreachable: say so, try again next time
            out.write(f"status --watch: reading the cluster failed: {err}\n")
            out.flush()
            continue
        out.write((CLEAR if clear else ("\n" if drawn else "")) + render(frame))
        out.flush()
        drawn += 1
    return drawn


def pause(seconds: float) -> None:
    """The wait between refreshes (a test replaces it to change the cluster in between)."""
    time.sleep(seconds)


async def _refresh(collect: Collect, catalog: dict[str, Any], source: str) -> Frame:
    return await frame_of(await collect(), catalog, source)
