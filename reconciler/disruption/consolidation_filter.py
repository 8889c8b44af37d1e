"""Consolidation's filter (Karpenter's ShouldDisrupt) and its answer kept from pass to pass.

``consolidatable`` turns away the candidates consolidation must leave alone (unknown instance type, missing
labels, consolidateAfter Never or not yet run out, WhenEmpty pools) and explains each. Every verdict but
ConsolidateAfter's depends on the candidate alone and, once found, holds for every later clock
(``_kept_blocker``); ConsolidateAfter's holds until the node's consolidateAfter runs out (``quiet_until``), and
its message names the time left.

``kept_filter`` keeps the chosen candidates in consolidation order across passes, as a ``kept_per_node`` view
by node name: a pass re-asks only the candidates that are new objects (``kept_assessment`` keeps a node's
Candidate while its verdict holds) and those whose consolidateAfter ran out since (its moments), and finds the
ones gone by identity, so after a single-node command a pass costs set operations over the candidates plus work
per changed node instead of a Python walk and a sort of all of them. The refusals, needed only to explain a
pass, are listed when read. Held between passes: the candidates chosen or waiting by name, the last candidates
by id, the chosen order and its keys, and the moments. Pure.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import compress
from typing import Any

from reconciler.disruption.candidates import consolidation_order, explain
from reconciler.disruption.kept_per_node import KeptPerNode
from reconciler.disruption.outcome import MethodOutcome
from reconciler.disruption.policy import WHEN_EMPTY, consolidation_wait, describe_wait, quiet_until, settings_of
from reconciler.disruption.types import Candidate, PassClock

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


# A candidate consolidation keeps from pass to pass: chosen ("") or waiting on its consolidateAfter.
_Kept = tuple[Candidate, str]


def _judged(candidate: Candidate, clock: PassClock) -> tuple[_Kept | None, datetime | None]:
    """Consolidation's verdict on a candidate (``consolidatable``) as a ``kept_per_node`` judgement: chosen, or
    waiting until its consolidateAfter runs out; nothing kept for the others (a verdict that holds for good)."""
    if candidate.is_empty or candidate.nodepool.is_static:
        return None, None  # not consolidation's (``consolidatable``)
    now = clock.now
    code = _verdict(candidate, now)[0]
    if code == _WAITING:
        until = quiet_until(candidate.node, settings_of(candidate.nodepool).consolidate_after or 0.0)
        return (candidate, code), until or now
    return ((candidate, code), None) if not code else (None, None)


@dataclass(slots=True)
class _KeptFilter:
    view: KeptPerNode[_Kept]  # by node name: the candidates chosen or waiting on their consolidateAfter
    ids: set[int]  # of the candidates last filtered
    inputs: dict[int, Candidate]  # those candidates by id: held, so no new candidate reuses an id in ``ids``
    order: list[Candidate]  # the chosen, in consolidation order
    keys: list[tuple[float, str]]  # their order keys (bisect)


def kept_filter(
    carried: dict[str, Any], candidates: Sequence[Candidate], now: datetime
) -> tuple[list[Candidate], Callable[[], list[Refusal]]]:
    """``consolidation_order(consolidatable(candidates, now, ...))`` (a new list), kept in ``carried`` (a
    ``ClusterState.carried``) from pass to pass, and a function listing the refusals in ``candidates`` order.

    The changed names are those of the candidates gone or new by identity (``kept_assessment`` keeps a node's
    Candidate while its verdict holds); the due ones, those whose consolidateAfter ran out."""
    kept: _KeptFilter | None = carried.pop(_KEY, None)  # put back once up to date
    ids = set(map(id, candidates))
    if kept is None or now < kept.view.now:
        view = KeptPerNode.afresh({c.name: c for c in candidates}, _judged, now)
        order = consolidation_order([c for c, code in view.values.values() if not code])
        kept = _KeptFilter(view, ids, dict(zip(map(id, candidates), candidates, strict=True)), order,
                           [c.order_key for c in order])
    else:
        inputs = kept.inputs
        new_ids = ids - kept.ids
        came = {c.name: c for c in compress(candidates, map(new_ids.__contains__, map(id, candidates)))} \
            if new_ids else {}
        changed = {inputs.pop(gone).name for gone in kept.ids - ids}.union(came)
        inputs.update(zip(map(id, came.values()), came.values(), strict=True))
        values = kept.view.values

        def current(name: str) -> Candidate | None:
            if name in changed:
                return came.get(name)
            return values[name][0]  # due: waiting, unchanged

        for name, before in kept.view.refresh(changed, current, _judged, now):
            if before is not None and not before[1]:
                _drop(kept, before[0])
            after = values.get(name)
            if after is not None and not after[1]:
                index = bisect_left(kept.keys, after[0].order_key)
                kept.order.insert(index, after[0])
                kept.keys.insert(index, after[0].order_key)
        kept.ids = ids
    carried[_KEY] = kept
    listed = list(candidates)

    def refusals() -> list[Refusal]:
        refused: list[Refusal] = []
        consolidatable(listed, now, MethodOutcome(""), refused)
        return refused

    return list(kept.order), refusals


def _drop(kept: _KeptFilter, candidate: Candidate) -> None:
    index = bisect_left(kept.keys, candidate.order_key)
    assert kept.order[index] is candidate
    del kept.order[index], kept.keys[index]
