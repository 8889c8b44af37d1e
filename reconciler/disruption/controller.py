"""One disruption pass, pure: ``decide(state, instance types, settings, now) -> DisruptionDecision``.

Methods run in Karpenter's order — emptiness, drift, multi-node consolidation,
single-node consolidation — and the first that produces a command ends the
pass. Every managed node considered and not disrupted gets an explanation.

The caller executes the command: for emptiness and consolidation it first
waits ``settings.consolidation_validation_wait`` and calls
``reconciler.disruption.validation.validate`` on the fresh snapshot; then it
taints the candidates ``karpenter.sh/disrupted:NoSchedule``, creates the
replacements, waits for them to initialize and deletes the candidates.

Time limits: no clock is read here. ``should_stop`` (e.g. a monotonic deadline
from the live controller) and ``max_simulations`` bound the work; the search
keeps the best command found so far when either runs out. ``timer`` (a monotonic
clock the caller passes in) only measures each method for the decision's
``methods`` (Karpenter's evaluation-duration metric); it never changes a result.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from reconciler.cloud.types import InstanceType
from reconciler.disruption.balanced import BalancedScorer
from reconciler.disruption.budgets import REASON_DRIFTED, REASON_EMPTY, REASON_UNDERUTILIZED
from reconciler.disruption.candidates import Assessment, Catalog, assess, budget_allowances, explain
from reconciler.disruption.consolidation import ReplacementBuilder
from reconciler.disruption.drift import drift_reason
from reconciler.disruption.drifting import drift
from reconciler.disruption.emptiness import emptiness
from reconciler.disruption.outcome import MethodOutcome
from reconciler.disruption.pdb import PdbLimits
from reconciler.disruption.simulation import Simulator
from reconciler.disruption.types import Candidate, DisruptionDecision, Explanation, MethodRun
from reconciler.disruption.underutilized import multi_node, single_node
from reconciler.settings import Settings
from reconciler.state import ClusterState

T = TypeVar("T")


def default_namer(state: ClusterState) -> Callable[[str], str]:
    """Deterministic NodeClaim names that do not collide with existing ones (callers may pass their own)."""
    counter = itertools.count(1)

    def name_for(nodepool: str) -> str:
        while True:
            name = f"{nodepool}-replacement-{next(counter)}"
            if name not in state.nodeclaims and name not in state.nodes:
                return name

    return name_for


class _Pass:
    """The shared inputs of one pass, built lazily (the scheduler context only when a method needs it)."""

    def __init__(
        self,
        state: ClusterState,
        instance_types_by_nodepool: Mapping[str, Sequence[InstanceType]],
        settings: Settings,
        now: datetime,
        name_for: Callable[[str], str],
        should_stop: Callable[[], bool] | None,
        max_simulations: int | None,
    ) -> None:
        self.state = state
        self.types = instance_types_by_nodepool
        self.settings = settings
        self.now = now
        self.name_for = name_for
        self.should_stop = should_stop
        self.max_simulations = max_simulations
        self.catalog = Catalog.of(instance_types_by_nodepool)
        self.pdbs = PdbLimits.from_manifests(state.pdbs.values(), state.pod_manifests.values())
        self._simulator: Simulator | None = None
        self._builder: ReplacementBuilder | None = None

    @property
    def simulator(self) -> Simulator:
        if self._simulator is None:
            self._simulator = Simulator(
                self.state,
                self.types,
                self.settings,
                self.now,
                self.pdbs,
                should_stop=self.should_stop,
                max_runs=self.max_simulations,
            )
        return self._simulator

    @property
    def simulations(self) -> int:
        return self._simulator.runs if self._simulator is not None else 0

    @property
    def builder(self) -> ReplacementBuilder:
        if self._builder is None:
            self._builder = ReplacementBuilder(self.state, self.simulator.context, self.settings, self.name_for)
        return self._builder

    def drift_candidates(self, assessment: Assessment) -> tuple[list[Candidate], list[Explanation]]:
        """Eventual-class candidates with their drift reason filled in (non-drifted ones left out)."""
        candidates, explanations = assessment.for_class(eventual=True)
        drifted = []
        for candidate in candidates:
            claim = candidate.node.nodeclaim
            if claim is None:
                continue
            found = drift_reason(
                candidate.nodepool,
                claim,
                now=self.now,
                instance_types=self.catalog.types(candidate.pool),
                nodeclass=self.state.nodeclass(candidate.nodepool),
                node_labels=candidate.node.labels,
            )
            if found is None:
                continue
            condition = claim.conditions.get("Drifted")
            candidate.drift = found
            candidate.drift_since = (
                condition.last_transition_time
                if condition is not None and condition.is_true and condition.last_transition_time
                else claim.creation_timestamp
            )
            drifted.append(candidate)
        drifted_names = {c.name for c in drifted}
        # Only drifted nodes' eligibility problems matter to drift.
        return drifted, [e for e in explanations if e.node in drifted_names]


def decide(
    state: ClusterState,
    instance_types_by_nodepool: Mapping[str, Sequence[InstanceType]],
    settings: Settings,
    now: datetime,
    *,
    name_for: Callable[[str], str] | None = None,
    should_stop: Callable[[], bool] | None = None,
    max_simulations: int | None = None,
    first_pools: Sequence[str] = (),
    timer: Callable[[], float] | None = None,
) -> DisruptionDecision:
    """Choose at most one disruption command for this pass, explaining every node left alone.

    ``first_pools``: NodePools single-node consolidation did not reach last time
    (``DisruptionDecision.unseen_pools``), tried first this time.
    """
    run = _Pass(
        state, instance_types_by_nodepool, settings, now, name_for or default_namer(state), should_stop, max_simulations
    )
    assessment = assess(state, run.catalog, run.pdbs, now)
    graceful, ineligible = assessment.for_class(eventual=False)
    outcomes: list[MethodOutcome] = []
    runs: list[MethodRun] = []
    budgets: list[Any] = []
    scorer = BalancedScorer.build(state, run.catalog, graceful)

    def allowances_for(reason: str) -> dict[str, Any]:
        allowances = budget_allowances(state, reason, now)
        budgets.extend(allowances.values())
        return allowances

    def timed(reason: str, method: Callable[[], T]) -> T:
        started = timer() if timer is not None else None
        result = method()
        outcome = result[0] if isinstance(result, tuple) else result
        assert isinstance(outcome, MethodOutcome)
        seconds = timer() - started if timer is not None and started is not None else None
        runs.append(MethodRun(outcome.method, reason, outcome.eligible, seconds, outcome.timed_out))
        return result

    def finish(outcome: MethodOutcome | None, unseen: Sequence[str] = ()) -> DisruptionDecision:
        if outcome is not None:
            outcomes.append(outcome)
        decision = _decision(graceful, ineligible, outcomes, outcome, unseen)
        decision.simulations = run.simulations
        decision.methods, decision.budgets, decision.moves = runs, budgets, scorer.moves
        return decision

    empty = timed(REASON_EMPTY, lambda: emptiness(graceful, allowances_for(REASON_EMPTY), now))
    if empty.command is not None:
        return finish(empty)
    outcomes.append(empty)

    drifted, drift_blocked = run.drift_candidates(assessment)
    ineligible = _merge(ineligible, drift_blocked)
    if drifted:
        drifting = timed(REASON_DRIFTED, lambda: drift(drifted, allowances_for(REASON_DRIFTED), run.simulator,
                                                       run.builder))
        if drifting.command is not None:
            return finish(drifting)
        outcomes.append(drifting)

    allowances = allowances_for(REASON_UNDERUTILIZED)
    if any(not c.is_empty for c in graceful):
        multi = timed(REASON_UNDERUTILIZED,
                      lambda: multi_node(graceful, allowances, run.simulator, run.builder, scorer, now))
        if multi.command is not None:
            return finish(multi)
        # Single-node sees the same candidates and explains each of them individually.
        multi.explanations.clear()
        outcomes.append(multi)
        single, unseen = timed(REASON_UNDERUTILIZED, lambda: single_node(
            graceful, allowances, run.simulator, run.builder, scorer, now, first_pools=first_pools
        ))
        return finish(single, unseen)
    return finish(None)


def _merge(first: list[Explanation], more: list[Explanation]) -> list[Explanation]:
    seen = {(e.node, e.code) for e in first}
    return first + [e for e in more if (e.node, e.code) not in seen]


def _decision(
    graceful: Sequence[Candidate],
    ineligible: list[Explanation],
    outcomes: Sequence[MethodOutcome],
    acted: MethodOutcome | None,
    unseen: Sequence[str],
) -> DisruptionDecision:
    command = acted.command if acted is not None else None
    chosen = set(command.node_names) if command else set()
    explanations = list(ineligible)
    for outcome in outcomes:
        explanations.extend(outcome.explanations)
    explained = {e.node for e in explanations}
    for candidate in graceful:
        if candidate.name in chosen or candidate.name in explained:
            continue
        if command is not None:
            message = f"{command.method} acted this pass ({command.describe()})"
            explanations.append(explain(candidate.node, "NotEvaluated", message))
        elif candidate.is_empty:
            explanations.append(explain(candidate.node, "NoAction", "empty, but not removable this pass"))
        else:
            explanations.append(explain(candidate.node, "NoAction", "no consolidation found for this node"))
    return DisruptionDecision(
        command=command,
        explanations=[e for e in explanations if e.node not in chosen],
        budget_constrained=any(o.budget_constrained for o in outcomes),
        timed_out=any(o.timed_out for o in outcomes),
        unseen_pools=list(unseen),
    )
