"""Consolidation of underutilized nodes: multi-node (binary search) then single-node (first that works).

Both consider only candidates whose NodePool consolidates non-empty nodes
(policy not WhenEmpty, consolidateAfter elapsed, not Never), with a known
instance type, zone and capacity type, ordered by savings per unit of
disruption. Budgets (reason Underutilized) are applied up front in that order.

- Multi-node takes the budget-allowed candidates (at most 100) and binary-searches
  the longest prefix of at least 2 that can go with no or one cheaper
  replacement; the last good prefix is kept if the deadline cuts it short.
- Single-node walks candidates round-robin across NodePools and takes the first
  that can go (delete, or replace with one strictly cheaper node); candidates a
  resource bound proves cannot pay off are not simulated (``savings_bound``).

Balanced pools additionally require (savings / pool cost) / (disruption /
pool disruption) >= 1/2.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from reconciler.disruption.balanced import BalancedScorer
from reconciler.disruption.budgets import BudgetAllowance
from reconciler.disruption.candidates import explain
from reconciler.disruption.consolidation import Rejection, ReplacementBuilder, compute_consolidation
from reconciler.disruption.emptiness import consolidation_order
from reconciler.disruption.outcome import MethodOutcome
from reconciler.disruption.policy import WHEN_EMPTY, consolidation_wait, describe_wait, settings_of
from reconciler.disruption.simulation import SimulationBudgetExceeded, Simulator
from reconciler.disruption.types import MULTI_NODE, SINGLE_NODE, UNDERUTILIZED, Candidate, Command

MAX_MULTI_NODE_CANDIDATES = 100


def consolidatable(candidates: Sequence[Candidate], now: datetime, outcome: MethodOutcome) -> list[Candidate]:
    """The consolidation filter (Karpenter's ShouldDisrupt), explaining every non-empty node it turns away."""
    chosen = []
    for candidate in candidates:
        if candidate.is_empty or candidate.nodepool.is_static:
            continue  # empty nodes are emptiness' business
        node, pool = candidate.node, candidate.nodepool
        settings = settings_of(pool)
        code, message = "", ""
        if candidate.instance_type is None:
            code, message = "UnknownInstanceType", f"instance type {candidate.instance_type_name!r} is not offered"
        elif not candidate.zone or not candidate.capacity_type:
            code, message = "MissingLabels", "node lacks its zone or capacity-type label"
        elif not settings.enabled:
            code, message = "ConsolidationDisabled", f"NodePool {pool.name} has consolidateAfter: Never"
        elif settings.policy == WHEN_EMPTY:
            code, message = "WhenEmpty", f"NodePool {pool.name} only consolidates empty nodes (WhenEmpty)"
        else:
            remaining = consolidation_wait(node, settings, now)
            if remaining is not None:
                code, message = "ConsolidateAfter", describe_wait(pool, settings, remaining)
        if code:
            outcome.explain(explain(node, code, message, outcome.method))
            continue
        chosen.append(candidate)
    return chosen


def _within_budget(
    ordered: Sequence[Candidate], allowances: Mapping[str, BudgetAllowance], outcome: MethodOutcome
) -> list[Candidate]:
    remaining = {pool: a.remaining for pool, a in allowances.items()}
    allowed = []
    for candidate in ordered:
        if remaining.get(candidate.pool, 0) <= 0:
            outcome.budget_constrained = True
            allowance = allowances.get(candidate.pool)
            message = allowance.explain() if allowance else f"no budget known for NodePool {candidate.pool}"
            outcome.explain(explain(candidate.node, "Budget", message, outcome.method))
            continue
        remaining[candidate.pool] -= 1
        allowed.append(candidate)
    return allowed


def multi_node(
    candidates: Sequence[Candidate],
    allowances: Mapping[str, BudgetAllowance],
    simulator: Simulator,
    builder: ReplacementBuilder,
    scorer: BalancedScorer,
    now: datetime,
) -> MethodOutcome:
    outcome = MethodOutcome(MULTI_NODE)
    ordered = consolidation_order(consolidatable(candidates, now, outcome))
    outcome.eligible = len(ordered)
    allowed = _within_budget(ordered, allowances, outcome)
    if len(allowed) < 2:
        return outcome
    allowed = allowed[:MAX_MULTI_NODE_CANDIDATES]
    low, high = 1, len(allowed) - 1  # prefix lengths 2..len, as indices of the last node
    best: Command | None = None
    while low <= high:
        mid = (low + high) // 2
        prefix = allowed[: mid + 1]
        if simulator.savings_bound.rejection(prefix) is not None:
            high = mid - 1
            continue
        try:
            simulation = simulator.run(prefix, consolidation=True)
        except SimulationBudgetExceeded:
            outcome.timed_out = True
            break
        if simulation.stopped:
            outcome.timed_out = True
            break
        result = compute_consolidation(prefix, simulation, builder, method=MULTI_NODE, reason=UNDERUTILIZED)
        if isinstance(result, Command) and scorer.approves(result):
            best = result
            low = mid + 1
        else:
            high = mid - 1
    if best is not None:
        outcome.command = builder.named(best)
    return outcome


def interleave_by_pool(ordered: Sequence[Candidate], first_pools: Sequence[str] = ()) -> list[Candidate]:
    """Round-robin across NodePools (keeping each pool's order); ``first_pools`` go first in each round."""
    by_pool: dict[str, list[Candidate]] = {}
    for candidate in ordered:
        by_pool.setdefault(candidate.pool, []).append(candidate)
    pools = [p for p in first_pools if p in by_pool] + [p for p in by_pool if p not in first_pools]
    result = []
    for i in range(max((len(v) for v in by_pool.values()), default=0)):
        result.extend(by_pool[pool][i] for pool in pools if i < len(by_pool[pool]))
    return result


def single_node(
    candidates: Sequence[Candidate],
    allowances: Mapping[str, BudgetAllowance],
    simulator: Simulator,
    builder: ReplacementBuilder,
    scorer: BalancedScorer,
    now: datetime,
    *,
    first_pools: Sequence[str] = (),
) -> tuple[MethodOutcome, list[str]]:
    """The outcome, and the pools not reached before the deadline (to try first next time)."""
    outcome = MethodOutcome(SINGLE_NODE)
    ordered = interleave_by_pool(consolidation_order(consolidatable(candidates, now, outcome)), first_pools)
    outcome.eligible = len(ordered)
    remaining = {pool: a.remaining for pool, a in allowances.items()}
    unseen = list(dict.fromkeys(c.pool for c in ordered))
    for index, candidate in enumerate(ordered):
        if candidate.pool in unseen:
            unseen.remove(candidate.pool)
        if remaining.get(candidate.pool, 0) <= 0:
            outcome.budget_constrained = True
            allowance = allowances.get(candidate.pool)
            message = allowance.explain() if allowance else f"no budget known for NodePool {candidate.pool}"
            outcome.explain(explain(candidate.node, "Budget", message, SINGLE_NODE))
            continue
        if not scorer.could_pass(candidate):
            outcome.explain(explain(candidate.node, "Balanced", scorer.describe_best_case(candidate), SINGLE_NODE))
            continue
        proof = simulator.savings_bound.rejection([candidate])
        if proof is not None:
            outcome.explain(explain(candidate.node, *proof, SINGLE_NODE))
            continue
        try:
            simulation = simulator.run([candidate], consolidation=True)
        except SimulationBudgetExceeded:
            outcome.timed_out = True
            _not_evaluated(outcome, ordered[index:], "the consolidation deadline passed before it was evaluated")
            return outcome, [candidate.pool, *unseen]
        result = compute_consolidation([candidate], simulation, builder, method=SINGLE_NODE, reason=UNDERUTILIZED)
        if isinstance(result, Rejection):
            outcome.explain(explain(candidate.node, result.code, result.message, SINGLE_NODE))
            continue
        if not scorer.approves(result):
            outcome.explain(explain(candidate.node, "Balanced", scorer.describe(result), SINGLE_NODE))
            continue
        outcome.command = builder.named(result)
        _not_evaluated(outcome, ordered[index + 1 :], f"single-node consolidation acted on {candidate.name} first")
        return outcome, []
    return outcome, []


def _not_evaluated(outcome: MethodOutcome, rest: Sequence[Candidate], why: str) -> None:
    for candidate in rest:
        outcome.explain(explain(candidate.node, "NotEvaluated", why, outcome.method))
