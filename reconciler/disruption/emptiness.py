"""Emptiness: delete nodes that run nothing that would need to move (reason Empty, every policy).

A node qualifies when its NodePool has consolidation enabled (consolidateAfter
not ``Never``) and it has been quiet for consolidateAfter. All qualifying nodes
go in one delete command, as many per pool as its Empty budget allows, most
expensive first. No simulation is needed: nothing has to be rescheduled.

After the validation wait, ``validate_emptiness`` keeps the candidates that
are still eligible, still empty, still quiet, not nominated and within the
Empty budget (the command shrinks); it fails only when none is left.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from reconciler.cloud.types import InstanceType
from reconciler.disruption.budgets import REASON_EMPTY, BudgetAllowance
from reconciler.disruption.candidates import (
    Catalog,
    budget_allowances,
    build_candidates,
    consolidation_order,
    explain,
)
from reconciler.disruption.outcome import MethodOutcome, ValidationResult
from reconciler.disruption.pass_context import PassContext
from reconciler.disruption.policy import consolidation_wait, describe_wait, settings_of
from reconciler.disruption.types import EMPTINESS, Candidate, Command
from reconciler.model.pdb import PdbLimits
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState


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
    run: PassContext, candidates: Sequence[Candidate], allowances: Mapping[str, BudgetAllowance]
) -> MethodOutcome:
    outcome = MethodOutcome(EMPTINESS)
    remaining = {pool: a.remaining for pool, a in allowances.items()}
    chosen = []
    eligible = empty_candidates(candidates, run.now, outcome)
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
        outcome.command = Command(REASON_EMPTY, EMPTINESS, chosen)
    return outcome


def validate_emptiness(
    command: Command,
    state: ClusterState,
    instance_types_by_nodepool: Mapping[str, Sequence[InstanceType]],
    settings: Settings,
    now: datetime,
    *,
    should_stop: Callable[[], bool] | None = None,
) -> ValidationResult:
    """The command's candidates that can still go on the fresh snapshot (no simulation: nothing moves)."""
    pdbs = PdbLimits.from_manifests(
        state.pdbs.values(), state.pod_manifests.values(), lookup=state.stored_controller
    )
    wanted = [c.name for c in command.candidates]
    # Only the command's nodes: emptiness' filter judges each node alone.
    current, _ = build_candidates(state, Catalog.of(instance_types_by_nodepool), pdbs, now, names=wanted)
    still_empty = {c.name: c for c in empty_candidates(current, now, MethodOutcome(EMPTINESS))}
    remaining = {pool: a.remaining for pool, a in budget_allowances(state, REASON_EMPTY, now).items()}
    kept = []
    for name in wanted:
        candidate = still_empty.get(name)
        if candidate is None or remaining.get(candidate.pool, 0) <= 0:
            continue
        remaining[candidate.pool] -= 1
        kept.append(candidate)
    if not kept:
        return ValidationResult(None, f"none of the {len(wanted)} empty node(s) can still be removed")
    return ValidationResult(replace(command, candidates=kept))
