"""Drift disruption (reason Drifted): replace one drifted node per pass, oldest drift first, empty ones first.

No price check: a drifted node is replaced by whatever its pods need now, with
any number of new NodeClaims. The candidate is skipped (and the next one tried)
when its pool's Drifted budget is used up or when one of its running pods would
find no home. Drift acts at once: it has no validation wait.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from reconciler.disruption.budgets import REASON_DRIFTED, BudgetAllowance
from reconciler.disruption.candidates import explain
from reconciler.disruption.consolidation import first_failure
from reconciler.disruption.outcome import MethodOutcome
from reconciler.disruption.pass_context import PassContext
from reconciler.disruption.simulation import SimulationBudgetExceeded
from reconciler.disruption.types import DRIFT, Candidate, Command

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def drift_order(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Empty nodes first (their replacement moves nothing), then oldest drift, then name."""
    return sorted(candidates, key=lambda c: (not c.is_empty, c.drift_since or _EPOCH, c.name))


def drift(
    run: PassContext, candidates: Sequence[Candidate], allowances: Mapping[str, BudgetAllowance]
) -> MethodOutcome:
    outcome = MethodOutcome(DRIFT)
    simulator, builder = run.simulator, run.builder
    ordered = drift_order([c for c in candidates if c.drift is not None and not c.nodepool.is_static])
    outcome.eligible = len(ordered)
    for index, candidate in enumerate(ordered):
        allowance = allowances.get(candidate.pool)
        if allowance is None or allowance.remaining <= 0:
            outcome.budget_constrained = True
            message = allowance.explain() if allowance else f"no budget known for NodePool {candidate.pool}"
            detail = candidate.drift[1] if candidate.drift else ""
            outcome.explain(explain(candidate.node, "Budget", f"drifted ({detail}); {message}", DRIFT))
            continue
        try:
            simulation = simulator.run([candidate], consolidation=False)
        except SimulationBudgetExceeded:
            outcome.timed_out = True
            for rest in ordered[index:]:
                outcome.explain(
                    explain(rest.node, "NotEvaluated", "the deadline passed before it was evaluated", DRIFT)
                )
            return outcome
        if not simulation.ok:
            rejection = first_failure(simulation) if simulation.failures else None
            message = rejection.message if rejection else "the simulation was cut short by the deadline"
            outcome.explain(explain(candidate.node, "Unschedulable", f"drifted, but {message}", DRIFT))
            continue
        replacements = [builder.replacement(claim) for claim in simulation.result.new_claims]
        placements = {k: v for k, v in simulation.result.existing.items() if k in set(simulation.moving)}
        outcome.command = builder.named(Command(REASON_DRIFTED, DRIFT, [candidate], replacements, placements))
        for rest in ordered[index + 1 :]:
            outcome.explain(explain(rest.node, "NotEvaluated", "drift replaces one node per pass", DRIFT))
        return outcome
    return outcome
