"""Consolidation's filter (Karpenter's ShouldDisrupt) and its answer kept from pass to pass.

``consolidatable`` turns away the candidates consolidation must leave alone (unknown instance type, missing
labels, consolidateAfter Never or not yet run out, WhenEmpty pools) and explains each. Every verdict but
ConsolidateAfter's depends on the candidate alone and, once found, holds for every later clock
(``_kept_blocker``); ConsolidateAfter's holds until the node's consolidateAfter runs out (``quiet_until``), and
its message names the time left.

``kept_filter`` keeps the chosen candidates in consolidation order across passes: a pass re-asks only the
candidates that are new objects (``kept_assessment`` keeps a node's Candidate while its verdict holds) and those
whose consolidateAfter ran out since (a heap of moments), and finds the ones gone by identity, so after a
single-node command a pass costs set operations over the candidates plus work per changed node instead of a
Python walk and a sort of all of them. The refusals, needed only to explain a pass, are listed when read. Pure.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconciler.disruption.candidates import consolidation_order, explain
from reconciler.disruption.outcome import MethodOutcome
from reconciler.disruption.policy import WHEN_EMPTY, consolidation_wait, describe_wait, quiet_until, settings_of
from reconciler.disruption.types import Candidate

_KEY = "disruption.kept_consolidation_filter"
_WAITING = "ConsolidateAfter"


# A candidate turned away by consolidation's filter, with the (code, message) that explains it.
Refusal = tuple[Candidate, str, str]


def consolidatable(
    candidates: Sequence[Candidate], now: datetime, outcome: MethodOutcome, refused: list[Refusal] | None = None
) -> list[Candidate]:
    """The consolidation filter (Karpenter's ShouldDisrupt), explaining every non-empty node it turns away (or,
    with ``refused``, listing it there: a caller that may drop its explanations explains them itself)."""
    chosen = []
    for candidate in candidates:
        if candidate.is_empty or candidate.nodepool.is_static:
            continue  # empty nodes are emptiness' business
        code, message = _verdict(candidate, now)
        if code:
            if refused is not None:
                refused.append((candidate, code, message))
            else:
                outcome.explain(explain(candidate.node, code, message, outcome.method))
            continue
        chosen.append(candidate)
    return chosen


def _verdict(candidate: Candidate, now: datetime) -> tuple[str, str]:
    """``_kept_blocker`` of a non-empty candidate, kept with the candidate too (it may be kept from pass to pass)."""
    kept = candidate.consolidation
    if kept is not None and kept[0] <= now:
        return kept[1], kept[2]
    found = _kept_blocker(candidate, now)
    if found[0] != _WAITING:  # the others hold from now on for this candidate (``_kept_blocker``)
        candidate.consolidation = (now, *found)
    return found


def _kept_blocker(candidate: Candidate, now: datetime) -> tuple[str, str]:
    """``_blocker``, kept on the StateNode from pass to pass: every verdict but ConsolidateAfter depends on the
    node, its NodePool and instance type alone, and once consolidateAfter has run out on a node it stays so
    (until a pod event, which makes a new StateNode). Kept from ``since`` on: an earlier clock asks afresh."""
    node = candidate.node
    kept = node.memo_get("disruption.consolidation_blocker")
    if kept is not None and kept[0] is candidate.nodepool and kept[1] is candidate.instance_type and kept[2] <= now:
        return kept[3]  # type: ignore[no-any-return]
    found = _blocker(candidate, now)
    if found[0] != _WAITING:
        node.memo_set("disruption.consolidation_blocker", (candidate.nodepool, candidate.instance_type, now, found))
    return found


def _blocker(candidate: Candidate, now: datetime) -> tuple[str, str]:
    """Why consolidation turns this non-empty candidate away at ``now`` as (code, message), or ("", "")."""
    pool = candidate.nodepool
    settings = settings_of(pool)
    if candidate.instance_type is None:
        return "UnknownInstanceType", f"instance type {candidate.instance_type_name!r} is not offered"
    if not candidate.zone or not candidate.capacity_type:
        return "MissingLabels", "node lacks its zone or capacity-type label"
    if not settings.enabled:
        return "ConsolidationDisabled", f"NodePool {pool.name} has consolidateAfter: Never"
    if settings.policy == WHEN_EMPTY:
        return "WhenEmpty", f"NodePool {pool.name} only consolidates empty nodes (WhenEmpty)"
    remaining = consolidation_wait(candidate.node, settings, now)
    if remaining is not None:
        return _WAITING, describe_wait(pool, settings, remaining)
    return "", ""


@dataclass(slots=True)
class _KeptFilter:
    now: datetime
    inputs: list[Candidate]  # the candidates last filtered: held, so no new candidate reuses an id in ``ids``
    ids: set[int]
    order: list[Candidate]  # the chosen, in consolidation order
    keys: list[tuple[float, str]]  # their order keys (bisect)
    chosen: dict[int, Candidate]
    waiting: dict[int, Candidate]  # turned away by consolidateAfter: asked again when it runs out
    wakes: list[tuple[datetime, int]]  # heap: (when consolidateAfter runs out, id) of the waiting


def kept_filter(
    carried: dict[str, Any], candidates: Sequence[Candidate], now: datetime
) -> tuple[list[Candidate], Callable[[], list[Refusal]]]:
    """``consolidation_order(consolidatable(candidates, now, ...))`` (a new list), kept in ``carried`` (a
    ``ClusterState.carried``) from pass to pass, and a function listing the refusals in ``candidates`` order."""
    kept: _KeptFilter | None = carried.get(_KEY)
    ids = set(map(id, candidates))
    if kept is None or now < kept.now:
        kept = _afresh(candidates, now)
    else:
        for gone in kept.ids - ids:
            found = kept.chosen.pop(gone, None)
            if found is not None:
                _drop(kept, found)
            kept.waiting.pop(gone, None)
        came = ids - kept.ids
        asked = [c for c in candidates if id(c) in came] if came else []
        while kept.wakes and kept.wakes[0][0] <= now:
            found = kept.waiting.pop(heapq.heappop(kept.wakes)[1], None)
            if found is not None:
                asked.append(found)
        for candidate in asked:
            if candidate.is_empty or candidate.nodepool.is_static:
                continue  # not consolidation's (``consolidatable``)
            code = _verdict(candidate, now)[0]
            if code == _WAITING:
                _wait(kept, candidate)
            elif not code:
                kept.chosen[id(candidate)] = candidate
                index = bisect_left(kept.keys, candidate.order_key)
                kept.order.insert(index, candidate)
                kept.keys.insert(index, candidate.order_key)
        kept.now, kept.inputs, kept.ids = now, list(candidates), ids
    carried[_KEY] = kept
    listed = list(candidates)

    def refusals() -> list[Refusal]:
        refused: list[Refusal] = []
        consolidatable(listed, now, MethodOutcome(""), refused)
        return refused

    return list(kept.order), refusals


def _afresh(candidates: Sequence[Candidate], now: datetime) -> _KeptFilter:
    refused: list[Refusal] = []
    order = consolidation_order(consolidatable(candidates, now, MethodOutcome(""), refused))
    kept = _KeptFilter(now, list(candidates), set(map(id, candidates)), order, [c.order_key for c in order],
                       {id(c): c for c in order}, {}, [])
    for candidate, code, _ in refused:
        if code == _WAITING:
            _wait(kept, candidate)
    return kept


def _wait(kept: _KeptFilter, candidate: Candidate) -> None:
    """Keep a candidate consolidateAfter turned away until the moment it runs out (its verdict until then)."""
    until = quiet_until(candidate.node, settings_of(candidate.nodepool).consolidate_after or 0.0)
    kept.waiting[id(candidate)] = candidate
    heapq.heappush(kept.wakes, (until or kept.now, id(candidate)))


def _drop(kept: _KeptFilter, candidate: Candidate) -> None:
    index = bisect_left(kept.keys, candidate.order_key)
    assert kept.order[index] is candidate
    del kept.order[index], kept.keys[index]
