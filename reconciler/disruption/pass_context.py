"""The shared inputs of one disruption pass, each built at most once and only when a method needs it.

Every method of a pass reads the same assessment of the nodes, the same budget
allowances per reason, the same scheduling simulator and replacement builder,
so trying a later method costs no more than it would on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconciler.cloud.types import InstanceType
from reconciler.disruption.balanced import BalancedScorer
from reconciler.disruption.budgets import BudgetAllowance
from reconciler.disruption.candidates import (
    Assessment,
    Catalog,
    budget_allowances,
    node_drift,
)
from reconciler.disruption.consolidation import ReplacementBuilder
from reconciler.disruption.kept_assessment import kept_assess
from reconciler.disruption.kept_drift import drifted_names
from reconciler.disruption.simulation import Simulator
from reconciler.disruption.types import EVENTUAL, GRACEFUL, Candidate, Explanation
from reconciler.model.pdb import PdbLimits
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState


class PassContext:
    def __init__(
        self,
        state: ClusterState,
        instance_types_by_nodepool: Mapping[str, Sequence[InstanceType]],
        settings: Settings,
        now: datetime,
        name_for: Callable[[str], str],
        *,
        should_stop: Callable[[], bool] | None = None,
        max_simulations: int | None = None,
        first_pools: Sequence[str] = (),
    ) -> None:
        self.state = state
        self.types = instance_types_by_nodepool
        self.settings = settings
        self.now = now
        self.name_for = name_for
        self.should_stop = should_stop
        self.max_simulations = max_simulations
        self.first_pools = first_pools  # NodePools single-node consolidation did not reach last pass
        self.catalog = Catalog.of(instance_types_by_nodepool)
        self.pdbs = PdbLimits.from_manifests(
            state.pdbs.values(), state.pod_manifests.values(), lookup=state.stored_controller
        )
        self.assessment: Assessment = kept_assess(state, self.catalog, self.pdbs, now)
        self._classes: dict[str, tuple[list[Candidate], list[Explanation]]] = {}
        self._allowances: dict[str, dict[str, BudgetAllowance]] = {}
        self._simulator: Simulator | None = None
        self._builder: ReplacementBuilder | None = None
        self._scorer: BalancedScorer | None = None
        # Consolidation's filter (``underutilized._filtered``): the candidates, those chosen in order, a function
        # listing those refused.
        self.consolidation_filtered: tuple[list[Candidate], list[Candidate], Callable[[], list[Any]]] | None = None
        self._chosen: dict[tuple[int, Callable[..., bool]], tuple[list[Candidate], list[Candidate]]] = {}
        # What ``drifted`` found this pass, by node name: kept candidates carry nothing from an earlier pass.
        self._drift: dict[str, Drift] = {}

    def chosen(
        self, candidates: list[Candidate], should_disrupt: Callable[[PassContext, Candidate], bool]
    ) -> list[Candidate]:
        """The candidates ``should_disrupt`` accepts (a new list), once per pass for the same filter on the same
        list (multi- and single-node consolidation filter the graceful candidates alike)."""
        key = (id(candidates), should_disrupt)
        kept = self._chosen.get(key)
        if kept is None or kept[0] is not candidates:
            kept = self._chosen[key] = (candidates, [c for c in candidates if should_disrupt(self, c)])
        return list(kept[1])

    def candidates(self, disruption_class: str) -> tuple[list[Candidate], list[Explanation]]:
        """The candidates of a disruption class, and explanations for every managed node it turns away."""
        found = self._classes.get(disruption_class)
        if found is None:
            if disruption_class not in (GRACEFUL, EVENTUAL):
                raise ValueError(f"unknown disruption class {disruption_class!r}")
            found = self.assessment.for_class(eventual=disruption_class == EVENTUAL)
            self._classes[disruption_class] = found
        return found

    def allowances(self, reason: str) -> dict[str, BudgetAllowance]:
        """Per NodePool, how many more nodes may start disrupting for ``reason`` this pass."""
        found = self._allowances.get(reason)
        if found is None:
            found = self._allowances[reason] = budget_allowances(self.state, reason, self.now)
        return found

    def budgets_evaluated(self) -> list[BudgetAllowance]:
        """Every (NodePool, reason) allowance this pass computed (Karpenter's allowed-disruptions gauge)."""
        return [allowance for allowances in self._allowances.values() for allowance in allowances.values()]

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

    @property
    def scorer(self) -> BalancedScorer:
        """Balanced consolidation's pool totals, over every graceful candidate."""
        if self._scorer is None:
            self._scorer = BalancedScorer.build(self.state, self.catalog, self.candidates(GRACEFUL)[0])
        return self._scorer

    def drifted_names(self) -> frozenset[str]:
        """The nodes ``drifted`` can accept this pass (``kept_drift``: kept from pass to pass)."""
        return drifted_names(self.state, self.catalog, self.now)

    def drifted(self, candidate: Candidate) -> bool:
        """Whether the candidate drifted; its drift reason and since when are ``drift_of`` for this pass (drift's
        filter)."""
        claim = candidate.node.nodeclaim
        if claim is None:
            return False
        found = node_drift(self.state, candidate.node, candidate.nodepool, self.catalog.types(candidate.pool), self.now)
        if found is None:
            return False
        condition = claim.conditions.get("Drifted")
        since = (
            condition.last_transition_time
            if condition is not None and condition.is_true and condition.last_transition_time
            else claim.creation_timestamp
        )
        self._drift[candidate.name] = Drift(found, since)
        return True

    def drift_of(self, candidate: Candidate) -> Drift | None:
        """The drift ``drifted`` found for this candidate this pass, or None (not asked, or not drifted)."""
        return self._drift.get(candidate.name)


@dataclass(slots=True, frozen=True)
class Drift:
    """Why a candidate drifted (reason, detail) and since when: found once per pass (``PassContext.drifted``)."""

    reason: tuple[str, str]
    since: datetime | None

    @property
    def detail(self) -> str:
        return self.reason[1]
