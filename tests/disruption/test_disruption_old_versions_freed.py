"""A StateNode replaced by a new version is freed at once, memoized views and all (peak memory at 5,000 nodes).

A pass memoizes views on each StateNode, and some refer back to it (its slot base, its assessment's Candidate):
without ``StateNode.forget_memos`` every replaced version would be a cycle that only a full collection frees, and
the one-shot commands' collector thresholds make those rare, so ``plan`` carried every old version to its end.
"""

from __future__ import annotations

import gc
from datetime import timedelta

from disruption_factories import NOW, run_decide
from test_disruption_assessment_memo import guarded_pod, starting_cluster

from reconciler.state.node import StateNode


def test_a_replaced_state_node_is_not_left_to_the_cycle_collector() -> None:
    state = starting_cluster([None] * 4, [None] * 4, [60] * 4)
    run_decide(state)
    old = state.state_node("n1")
    assert old is not None
    kept = old.memo_get("scheduling.slot_base")
    assert kept is not None and kept[1].state is old  # a cycle through the memos: the case this guards
    del old, kept
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        state.upsert(guarded_pod("moved", "n1", None, NOW - timedelta(minutes=1), "a"))  # n1 gets a new version
        run_decide(state)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        left = [o for o in gc.garbage if isinstance(o, StateNode)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()
    assert [node.name for node in left] == []
