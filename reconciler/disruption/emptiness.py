"""Emptiness: delete nodes that run nothing that would need to move (reason Empty, every policy).

A node qualifies when its NodePool has consolidation enabled (consolidateAfter
not ``Never``) and it has been quiet for consolidateAfter. All qualifying nodes
go in one delete command, as many per pool as its Empty budget allows, most
expensive first. No simulation is needed: nothing has to be rescheduled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from reconciler.disruption.budgets import BudgetAllowance
from reconciler.disruption.candidates import explain
from reconciler.disruption.outcome import MethodOutcome
from reconciler.disruption.policy import consolidation_wait, describe_wait, settings_of
from reconciler.disruption.types import EMPTINESS, EMPTY, Candidate, Command


def consolidation_order(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Best savings per unit of disruption first (price / reschedule cost); ties by name for determinism."""
    return sorted(candidates, key=lambda c: (-c.savings_ratio, c.name))


def empty_candidates(candidates: Sequence[Candidate], now: datetime, outcome: MethodOutcome) -> list[Candidate]:
    """Emptiness' filter: empty, consolidation enabled, consolidateAfter elapsed (others explained)."""
    chosen = []
    for candidate in candidates:
        if not candidate.is_empty or candidate.nodepool.is_static:
            continue
        settings = settings_of(candidate.nodepool)
        if not settings.enabled:
            outcome.explain(
                explain(
                    candidate.node,
                    "ConsolidationDisabled",
                    f"NodePool {candidate.pool} has consolidateAfter: Never",
                    EMPTINESS,
                )
            )
            continue
        remaining = consolidation_wait(candidate.node, settings, now)
        if remaining is not None:
            outcome.explain(
                explain(
                    candidate.node,
                    "ConsolidateAfter",
                    describe_wait(candidate.nodepool, settings, remaining),
                    EMPTINESS,
                )
            )
            continue
        chosen.append(candidate)
    return chosen


def emptiness(
    candidates: Sequence[Candidate], allowances: Mapping[str, BudgetAllowance], now: datetime
) -> MethodOutcome:
    outcome = MethodOutcome(EMPTINESS)
    remaining = {pool: a.remaining for pool, a in allowances.items()}
    chosen = []
    eligible = empty_candidates(candidates, now, outcome)
    outcome.eligible = len(eligible)
    for candidate in consolidation_order(eligible):
        if remaining.get(candidate.pool, 0) <= 0:
            outcome.budget_constrained = True
            allowance = allowances.get(candidate.pool)
            message = allowance.explain() if allowance else f"no budget known for NodePool {candidate.pool}"
            outcome.explain(explain(candidate.node, "Budget", message, EMPTINESS))
            continue
        remaining[candidate.pool] -= 1
        chosen.append(candidate)
    if chosen:
        outcome.command = Command(EMPTY, EMPTINESS, chosen)
    return outcome
