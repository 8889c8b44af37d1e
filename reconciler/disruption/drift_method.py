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
from reconciler.disruption.pass_context import Drift, PassContext
from reconciler.disruption.simulation import SimulationBudgetExceeded
from reconciler.disruption.types import DRIFT, Candidate, Command

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def drift_order(run: PassContext, candidates: Sequence[Candidate], *, static: bool) -> list[tuple[Candidate, Drift]]:
    """The candidates of static (or other) NodePools this pass found drifted (``PassContext.drifted``), with
    their drift: empty nodes first (their replacement moves nothing), then oldest drift, then name."""
    found = [(c, drift) for c in candidates
             if c.nodepool.is_static == static and (drift := run.drift_of(c)) is not None]
    return sorted(found, key=lambda pair: (not pair[0].is_empty, pair[1].since or _EPOCH, pair[0].name))


def drift(
    run: PassContext, candidates: Sequence[Candidate], allowances: Mapping[str, BudgetAllowance]
) -> MethodOutcome:
    outcome = MethodOutcome(DRIFT)
    simulator, builder = run.simulator, run.builder
    ordered = [candidate for candidate, _ in drift_order(run, candidates, static=False)]
    outcome.eligible = len(ordered)
    for index, candidate in enumerate(ordered):
        allowance = allowances.get(candidate.pool)
        if allowance is None or allowance.remaining <= 0:
            outcome.budget_constrained = True
            message = allowance.explain() if allowance else f"no budget known for NodePool {candidate.pool}"
            drifted = run.drift_of(candidate)
            detail = drifted.detail if drifted else ""
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
