"""Drift of static NodePools (reason Drifted): replace a drifted node with a fresh one from the pool template.

As Karpenter's ``StaticDrift`` method (it runs before dynamic drift, with the ``StaticCapacity`` gate): no
scheduling simulation and no price check, a drifted node of a static pool is replaced by one new NodeClaim
of the pool (``provisioning.static.static_claim``), launched before the old one is drained. A pool still
scaling down (more running plus pending-disruption claims than ``replicas``) is left alone, the Drifted
budget caps how many of its nodes are replaced at a time (one per pass here, the oldest drift first), and
``limits.nodes`` must leave room for the replacement while the old node still counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reconciler.disruption.budgets import REASON_DRIFTED, BudgetAllowance
from reconciler.disruption.candidates import explain
from reconciler.disruption.drift_method import drift_order
from reconciler.disruption.outcome import MethodOutcome
from reconciler.disruption.pass_context import PassContext
from reconciler.disruption.types import STATIC_DRIFT, Candidate, Command
from reconciler.provisioning.static import GATE, allowed_new, counts, static_claim


def is_static_drift_candidate(run: PassContext, candidate: Candidate) -> bool:
    return candidate.nodepool.is_static and run.settings.gate(GATE) and run.drifted(candidate)


def static_drift(
    run: PassContext, candidates: Sequence[Candidate], allowances: Mapping[str, BudgetAllowance]
) -> MethodOutcome:
    outcome = MethodOutcome(STATIC_DRIFT)
    ordered = drift_order(run, candidates, static=True)
    outcome.eligible = len(ordered)
    for index, (candidate, drifted) in enumerate(ordered):
        pool = candidate.nodepool
        detail = drifted.detail
        allowance = allowances.get(candidate.pool)
        if allowance is None or allowance.remaining <= 0:
            outcome.budget_constrained = True
            message = allowance.explain() if allowance else f"no budget known for NodePool {candidate.pool}"
            outcome.explain(explain(candidate.node, "Budget", f"drifted ({detail}); {message}", STATIC_DRIFT))
            continue
        found = counts(run.state, pool.name)
        if len(found.running) + len(found.pending_disruption) > int(pool.replicas or 0):
            outcome.explain(explain(candidate.node, "ScalingDown",
                                    f"drifted ({detail}); NodePool {pool.name} is scaling down to "
                                    f"{pool.replicas} replicas first", STATIC_DRIFT))
            continue
        if allowed_new(pool, found, 1) < 1:
            outcome.explain(explain(candidate.node, "Limits",
                                    f"drifted ({detail}); limits.nodes of NodePool {pool.name} leaves no room "
                                    "for a replacement", STATIC_DRIFT))
            continue
        claim = static_claim(pool, run.types.get(pool.name, ()), run.settings)
        if isinstance(claim, str):
            outcome.explain(explain(candidate.node, "Unschedulable", f"drifted ({detail}), but {claim}",
                                    STATIC_DRIFT))
            continue
        outcome.command = run.builder.named(
            Command(REASON_DRIFTED, STATIC_DRIFT, [candidate], [run.builder.replacement(claim)]))
        for rest, _ in ordered[index + 1:]:
            outcome.explain(explain(rest.node, "NotEvaluated", "drift replaces one node per pass", STATIC_DRIFT))
        return outcome
    return outcome
