"""Re-checking a command after the validation wait, pure: is it still safe and still the same command?

The executor waits ``settings.consolidation_validation_wait`` (15 s) after
``decide`` chose an emptiness or consolidation command, takes a fresh snapshot
and calls ``validate``:

- Emptiness keeps the candidates that are still eligible, still empty, still
  quiet, not nominated and within the Empty budget (the command shrinks); it
  fails only when none is left.
- Consolidation requires every candidate to still be eligible and within the
  budget, and a fresh simulation to need the same number of new NodeClaims
  (0 or 1), the planned instance types being a subset of the new options (so a
  replacement cannot have become pricier). Anything else aborts the command.
- Drift is not re-validated (it has no wait).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from reconciler.cloud.types import InstanceType
from reconciler.disruption.budgets import REASON_EMPTY, REASON_UNDERUTILIZED
from reconciler.disruption.candidates import Catalog, budget_allowances, build_candidates
from reconciler.disruption.emptiness import empty_candidates
from reconciler.disruption.outcome import MethodOutcome
from reconciler.disruption.pdb import PdbLimits
from reconciler.disruption.simulation import SimulationBudgetExceeded, Simulator
from reconciler.disruption.types import DRIFT, EMPTINESS, Candidate, Command
from reconciler.disruption.underutilized import consolidatable
from reconciler.settings import Settings
from reconciler.state import ClusterState


@dataclass(slots=True)
class ValidationResult:
    command: Command | None  # what to execute (emptiness may have dropped some candidates)
    reason: str = ""  # why the command was abandoned

    @property
    def valid(self) -> bool:
        return self.command is not None


def validate(
    command: Command,
    state: ClusterState,
    instance_types_by_nodepool: Mapping[str, Sequence[InstanceType]],
    settings: Settings,
    now: datetime,
    *,
    should_stop: Callable[[], bool] | None = None,
) -> ValidationResult:
    if command.method == DRIFT:
        return ValidationResult(command)
    catalog = Catalog.of(instance_types_by_nodepool)
    pdbs = PdbLimits.from_manifests(state.pdbs.values(), state.pod_manifests.values())
    current, ineligible = build_candidates(state, catalog, pdbs, now)
    why_not = {e.node: e.message for e in ineligible}
    wanted = [c.name for c in command.candidates]
    if command.method == EMPTINESS:
        return _validate_emptiness(command, state, current, wanted, now)
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


def _budget_problem(candidates: Sequence[Candidate], allowances: Mapping[str, object]) -> str:
    remaining = {pool: getattr(a, "remaining", 0) for pool, a in allowances.items()}
    for candidate in candidates:
        if remaining.get(candidate.pool, 0) <= 0:
            return f"disrupting {candidate.name} would now exceed NodePool {candidate.pool}'s budget"
        remaining[candidate.pool] -= 1
    return ""


def _validate_emptiness(
    command: Command, state: ClusterState, current: Sequence[Candidate], wanted: Sequence[str], now: datetime
) -> ValidationResult:
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
