"""One disruption pass, pure: ``decide(state, instance types, settings, now) -> DisruptionDecision``.

The pass tries the methods of ``reconciler.disruption.methods.METHODS`` in
their order — emptiness, drift, multi-node consolidation, single-node
consolidation — and the first that produces a command ends it. Each method sees
the candidates of its disruption class that it should disrupt, within the
budgets of its reason. Every managed node considered and not disrupted gets an
explanation.

The caller executes the command: for a validated method (``Method.validated``:
emptiness and consolidation) it first waits
``settings.consolidation_validation_wait`` and calls
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

from reconciler.cloud.types import InstanceType
from reconciler.disruption.candidates import explain
from reconciler.disruption.methods import METHODS
from reconciler.disruption.outcome import MethodOutcome
from reconciler.disruption.pass_context import PassContext
from reconciler.disruption.types import GRACEFUL, Candidate, DisruptionDecision, Explanation, MethodRun
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState


def default_namer(state: ClusterState) -> Callable[[str], str]:
    """Deterministic NodeClaim names that do not collide with existing ones (callers may pass their own)."""
    counter = itertools.count(1)

    def name_for(nodepool: str) -> str:
        while True:
            name = f"{nodepool}-replacement-{next(counter)}"
            if name not in state.nodeclaims and name not in state.nodes:
                return name

    return name_for


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
    run = PassContext(
        state, instance_types_by_nodepool, settings, now, name_for or default_namer(state),
        should_stop=should_stop, max_simulations=max_simulations, first_pools=first_pools,
    )
    ineligible: list[Explanation] = []
    outcomes: list[MethodOutcome] = []
    runs: list[MethodRun] = []
    acted: MethodOutcome | None = None
    for method in METHODS:
        # As Karpenter's disrupt(): every method tried is measured and reports its eligible nodes, even none.
        started = timer() if timer is not None else None
        of_class, turned_away = run.candidates(method.disruption_class)
        ineligible = _merge(ineligible, turned_away)
        suspects = method.narrow(run) if method.narrow is not None else None
        if suspects is not None:
            of_class = [c for c in of_class if c.name in suspects] if suspects else []
        candidates = run.chosen(of_class, method.should_disrupt)
        allowances = run.allowances(method.reason)
        outcome = method.compute(run, candidates, allowances) if candidates else None
        seconds = timer() - started if timer is not None and started is not None else None
        runs.append(MethodRun(method.name, method.reason, method.consolidation_type,
                              outcome.eligible if outcome is not None else 0, seconds,
                              outcome is not None and outcome.timed_out))
        if outcome is None:
            continue
        outcomes.append(outcome)
        if outcome.command is not None:
            acted = outcome
            break
    decision = _decision(run.candidates(GRACEFUL)[0], ineligible, outcomes, acted)
    decision.simulations = run.simulations
    decision.methods, decision.budgets, decision.moves = runs, run.budgets_evaluated(), run.scorer.moves
    return decision


def _merge(first: list[Explanation], more: list[Explanation]) -> list[Explanation]:
    seen = {(e.node, e.code) for e in first}
    return first + [e for e in more if (e.node, e.code) not in seen]


def _decision(
    graceful: Sequence[Candidate],
    ineligible: list[Explanation],
    outcomes: Sequence[MethodOutcome],
    acted: MethodOutcome | None,
) -> DisruptionDecision:
    command = acted.command if acted is not None else None
    chosen = set(command.node_names) if command else set()

    def explained() -> list[Explanation]:
        explanations = list(ineligible)
        for outcome in outcomes:
            explanations.extend(outcome.all_explanations())
        seen = {e.node for e in explanations}
        for candidate in graceful:
            if candidate.name in chosen or candidate.name in seen:
                continue
            if command is not None:
                message = f"{command.method} acted this pass ({command.describe()})"
                explanations.append(explain(candidate.node, "NotEvaluated", message))
            elif candidate.nodepool.is_static:
                explanations.append(explain(candidate.node, "StaticNodePool",
                                            f"NodePool {candidate.pool} is static (replicas "
                                            f"{candidate.nodepool.replicas}): its nodes are never consolidated, only "
                                            "replaced when drifted"))
            elif candidate.is_empty:
                explanations.append(explain(candidate.node, "NoAction", "empty, but not removable this pass"))
            else:
                explanations.append(explain(candidate.node, "NoAction", "no consolidation found for this node"))
        return [e for e in explanations if e.node not in chosen]

    # A pass that acts is explained only when someone reads it (the simulator reads the command alone).
    return DisruptionDecision(
        command=command,
        explanations=None if command is not None else explained(),
        later=explained if command is not None else None,
        budget_constrained=any(o.budget_constrained for o in outcomes),
        timed_out=any(o.timed_out for o in outcomes),
        unseen_pools=[pool for outcome in outcomes for pool in outcome.unseen_pools],
    )
