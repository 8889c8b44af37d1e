"""The cyclic garbage collector's settings for the one-shot offline commands (simulate, plan, explain, status).

Those commands build a large, long-lived heap quickly (a 1,000-node snapshot is ~250,000 tracked objects; a
5,000-pod simulation creates as many) and drop little of it. With CPython's default thresholds every 25 %
of growth triggers a full collection that scans the whole heap again, which took 20-45 % of their time
(explain node at 1,000 nodes: 1.6 s of 3.4 s) and found almost nothing to free. Reference counting frees
everything that is not in a cycle either way; cycles are still collected, young ones as often as before.
The live reconciler (``run``) keeps the defaults: it runs for months and its heap does not grow like this.
"""

from __future__ import annotations

import gc

# A young collection every 10,000 net allocations (default 700); a full one after 100 middle ones, and
# then only when the heap grew by a quarter since the last (CPython's own rule): at most every ~10 million.
ONE_SHOT_THRESHOLDS = (10_000, 10, 100)


def tune_for_one_shot_command() -> None:
    """Fewer full collections, and none of them scanning the modules imported so far (never garbage)."""
    gc.freeze()
    gc.set_threshold(*ONE_SHOT_THRESHOLDS)


def free_dropped() -> None:
    """A full collection, for a one-shot command that has just dropped a large object graph it is done with (a
    whole simulation). Such a graph holds reference cycles (controllers and the API server they share, StateNodes
    and the views memoized on them), so dropping the last reference frees nothing: only a full collection does,
    and the thresholds above make those rare (none at all in a 2,000-node ``plan``). Until then the dropped graph
    stays in memory under everything the command builds afterwards."""
    gc.collect()


def skip_final_collection() -> None:
    """Called as a one-shot command's process ends: the interpreter's last full collection would scan the whole
    heap (~0.2 s at 1,000 nodes) for cycles the exit frees anyway. Frozen objects are still freed and
    ``atexit`` handlers still run; only that scan is skipped."""
    gc.freeze()
