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

After the validation wait, ``validate_consolidation`` requires every candidate
to still be eligible and within the budget, and a fresh simulation to need the
same number of new NodeClaims (0 or 1), the planned instance types being a
subset of the new options (so a replacement cannot have become pricier).
Anything else aborts the command.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from operator import attrgetter, is_

from reconciler.cloud.types import InstanceType
from reconciler.disruption.budgets import REASON_UNDERUTILIZED, BudgetAllowance
from reconciler.disruption.candidates import Catalog, budget_allowances, build_candidates, explain
from reconciler.disruption.consolidation import ConsolidationRefusal, compute_consolidation
from reconciler.disruption.consolidation_filter import Refusal, consolidatable, kept_filter
from reconciler.disruption.outcome import MethodOutcome, ValidationResult
from reconciler.disruption.pass_context import PassContext
from reconciler.disruption.simulation import SimulationBudgetExceeded, Simulator
from reconciler.disruption.types import MULTI_NODE, SINGLE_NODE, Candidate, Command, Explanation
from reconciler.model.pdb import PdbLimits
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState

MAX_MULTI_NODE_CANDIDATES = 100
_POOL = attrgetter("pool")


def _within_budget(
    ordered: Sequence[Candidate], allowances: Mapping[str, BudgetAllowance], outcome: MethodOutcome
) -> list[Candidate]:
    """The candidates each pool's budget still allows, in order; the others are explained."""
    remaining = {pool: a.remaining for pool, a in allowances.items()}
    allowed = []
    messages: dict[str, str] = {}  # per NodePool: most of a large pool waits on its budget every pass
    for candidate in ordered:
        pool = candidate.pool
        if remaining.get(pool, 0) <= 0:
            outcome.budget_constrained = True
            message = messages.get(pool)
            if message is None:
                allowance = allowances.get(pool)
                message = messages[pool] = (allowance.explain() if allowance
                                            else f"no budget known for NodePool {pool}")
            outcome.explain(explain(candidate.node, "Budget", message, outcome.method))
            continue
        remaining[pool] -= 1
        allowed.append(candidate)
    return allowed


def _budget_prefix(
    ordered: Sequence[Candidate], allowances: Mapping[str, BudgetAllowance], limit: int
) -> tuple[list[Candidate], bool]:
    """``_within_budget(ordered, ...)[:limit]`` without walking past it, and whether the budget turns any of
    ``ordered`` away (the rest is only counted per pool: a pool with more of them than room turns some away)."""
    remaining = {pool: a.remaining for pool, a in allowances.items()}
    allowed: list[Candidate] = []
    turned_away = False
    for position, candidate in enumerate(ordered):
        if len(allowed) == limit:
            rest = Counter(map(_POOL, ordered[position:]))
            return allowed, turned_away or any(count > remaining.get(pool, 0) for pool, count in rest.items())
        pool = candidate.pool
        if remaining.get(pool, 0) <= 0:
            turned_away = True
            continue
        remaining[pool] -= 1
        allowed.append(candidate)
    return allowed, turned_away


def _filtered(
    run: PassContext, candidates: Sequence[Candidate]
) -> tuple[list[Candidate], Callable[[], list[Refusal]]]:
    """``kept_filter`` of ``candidates`` at the pass's clock (a new list), asked once per pass for the same
    candidates (multi- and single-node consolidation filter the same ones)."""
    kept = run.consolidation_filtered
    if kept is None or len(kept[0]) != len(candidates) or not all(map(is_, kept[0], candidates)):
        ordered, refusals = kept_filter(run.state.carried, candidates, run.now)
        kept = run.consolidation_filtered = (list(candidates), ordered, refusals)
    return list(kept[1]), kept[2]


def multi_node(
    run: PassContext, candidates: Sequence[Candidate], allowances: Mapping[str, BudgetAllowance]
) -> MethodOutcome:
    outcome = MethodOutcome(MULTI_NODE)
    found = _multi_node(run, candidates, allowances, outcome)
    if found is None:
        # Single-node consolidation, tried next, sees the same candidates and explains each of them.
        outcome.explanations.clear()
    else:
        outcome.command = run.builder.named(found)
    return outcome


def _multi_node(
    run: PassContext, candidates: Sequence[Candidate], allowances: Mapping[str, BudgetAllowance], outcome: MethodOutcome
) -> Command | None:
    # Explained only when a command is found, as the budget's refusals below.
    ordered, refusals = _filtered(run, candidates)
    outcome.eligible = len(ordered)
    # Without a command multi_node drops its explanations (single-node explains the same nodes next), and
    # most of a large pool waits on its budget every pass: those are explained only when a command is found.
    allowed, turned_away = _budget_prefix(ordered, allowances, MAX_MULTI_NODE_CANDIDATES)
    outcome.budget_constrained = outcome.budget_constrained or turned_away
    if len(allowed) < 2:
        return None
    simulator, builder, scorer = run.simulator, run.builder, run.scorer
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
        result = compute_consolidation(prefix, simulation, builder, method=MULTI_NODE, reason=REASON_UNDERUTILIZED)
        if isinstance(result, Command) and scorer.approves(result):
            best = result
            low = mid + 1
        else:
            high = mid - 1
    if best is not None:
        for candidate, code, message in refusals():
            outcome.explain(explain(candidate.node, code, message, outcome.method))
        _within_budget(ordered, allowances, outcome)
    return best


def interleave_by_pool(ordered: Sequence[Candidate], first_pools: Sequence[str] = ()) -> list[Candidate]:
    """Round-robin across NodePools (keeping each pool's order); ``first_pools`` go first in each round."""
    if len(set(map(_POOL, ordered))) <= 1:
        return list(ordered)  # one pool: its own order
    by_pool: dict[str, list[Candidate]] = {}
    for candidate in ordered:
        by_pool.setdefault(candidate.pool, []).append(candidate)
    pools = [p for p in first_pools if p in by_pool] + [p for p in by_pool if p not in first_pools]
    result: list[Candidate] = []
    for i in range(max((len(v) for v in by_pool.values()), default=0)):
        result.extend(by_pool[pool][i] for pool in pools if i < len(by_pool[pool]))
    return result


def single_node(
    run: PassContext, candidates: Sequence[Candidate], allowances: Mapping[str, BudgetAllowance]
) -> MethodOutcome:
    """The first candidate that can go alone; ``unseen_pools``: pools not reached before the deadline (tried
    first next pass, ``run.first_pools``)."""
    outcome = MethodOutcome(SINGLE_NODE)
    consolidating, refusals = _filtered(run, candidates)
    # Its refusals come first in its explanations; built when read, as a pass that acts is seldom explained.
    outcome.earlier.append(lambda: [explain(c.node, code, message, SINGLE_NODE) for c, code, message in refusals()])
    ordered = interleave_by_pool(consolidating, run.first_pools)
    outcome.eligible = len(ordered)
    if not ordered:
        return outcome
    simulator, builder, scorer = run.simulator, run.builder, run.scorer
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
            outcome.unseen_pools = [candidate.pool, *unseen]
            return outcome
        result = compute_consolidation(
            [candidate], simulation, builder, method=SINGLE_NODE, reason=REASON_UNDERUTILIZED
        )
        if isinstance(result, ConsolidationRefusal):
            outcome.explain(explain(candidate.node, result.code, result.message, SINGLE_NODE))
            continue
        if not scorer.approves(result):
            outcome.explain(explain(candidate.node, "Balanced", scorer.describe(result), SINGLE_NODE))
            continue
        outcome.command = builder.named(result)
        _not_evaluated(outcome, ordered[index + 1 :], f"single-node consolidation acted on {candidate.name} first")
        return outcome
    return outcome


def _not_evaluated(outcome: MethodOutcome, rest: Sequence[Candidate], why: str) -> None:
    # ``why`` names the node acted on, so it is new every pass: not kept on each node as ``explain`` does. Built
    # when read: the pass acted, and a caller that acts on the command seldom reads them.
    method = outcome.method

    def build() -> list[Explanation]:
        return [Explanation(c.name, c.node.nodeclaim_name, c.node.nodepool, "NotEvaluated", why, method) for c in rest]

    outcome.later.append(build)


def validate_consolidation(
    command: Command,
    state: ClusterState,
    instance_types_by_nodepool: Mapping[str, Sequence[InstanceType]],
    settings: Settings,
    now: datetime,
    *,
    should_stop: Callable[[], bool] | None = None,
) -> ValidationResult:
    """The same command on the fresh snapshot, or why it no longer holds (multi- and single-node)."""
    pdbs = PdbLimits.from_manifests(
        state.pdbs.values(), state.pod_manifests.values(), lookup=state.stored_controller
    )
    wanted = [c.name for c in command.candidates]
    # Only the command's nodes: every verdict below is per node, and the rest of the cluster is not asked.
    current, ineligible = build_candidates(state, Catalog.of(instance_types_by_nodepool), pdbs, now, names=wanted)
    why_not = {e.node: e.message for e in ineligible}
    by_name = {c.name: c for c in consolidatable(current, now, MethodOutcome(command.method))}
    for name in wanted:
        if name not in by_name:
            return ValidationResult(None, f"candidate {name} changed: {why_not.get(name, 'no longer consolidatable')}")
    fresh = [by_name[name] for name in wanted]
    problem = _budget_problem(fresh, budget_allowances(state, REASON_UNDERUTILIZED, now))
    if problem:
        return ValidationResult(None, problem)
    simulator = Simulator(state, instance_types_by_nodepool, settings, now, pdbs, should_stop=should_stop)
    try:
        simulation = simulator.run(fresh, consolidation=True)
    except SimulationBudgetExceeded:
        return ValidationResult(None, "validation deadline passed")
    if not simulation.ok:
        failures = ", ".join(f"{k}: {v}" for k, v in sorted(simulation.failures.items())[:3])
        return ValidationResult(None, f"pods would no longer reschedule ({failures or 'simulation cut short'})")
    claims = simulation.result.new_claims
    if len(claims) != len(command.replacements):
        return ValidationResult(
            None, f"the simulation now needs {len(claims)} new node(s) instead of {len(command.replacements)}"
        )
    if claims:
        planned = set(command.replacements[0].instance_type_options)
        available = set(claims[0].instance_type_names)
        if not planned <= available:
            missing = ", ".join(sorted(planned - available)[:5])
            return ValidationResult(None, f"planned replacement types are no longer suitable ({missing})")
    return ValidationResult(replace(command, candidates=fresh))


def _budget_problem(candidates: Sequence[Candidate], allowances: Mapping[str, BudgetAllowance]) -> str:
    remaining = {pool: a.remaining for pool, a in allowances.items()}
    for candidate in candidates:
        if remaining.get(candidate.pool, 0) <= 0:
            return f"disrupting {candidate.name} would now exceed NodePool {candidate.pool}'s budget"
        remaining[candidate.pool] -= 1
    return ""
