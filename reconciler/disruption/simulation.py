"""Disruption's use of the scheduler: "if these candidates went away, where would their pods go?"

One ``Simulator`` per decision: it builds the scheduling context once and runs
any number of what-ifs against the same snapshot. Each run schedules the
pending pods, the pods that would leave the candidates (not do-not-disrupt, not
fully PDB-blocked) and those of nodes already being deleted, against every
other active node. In consolidation runs, nodes still inside their
consolidateAfter window only accept pending pods. A candidate's pod that would
land on a node that is not initialized yet makes the result unusable, as in
Karpenter: the decision would rest on capacity that may never come up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from reconciler.cloud.types import InstanceType
from reconciler.disruption.policy import quiet_until, settings_of
from reconciler.disruption.savings_bound import SavingsBound
from reconciler.disruption.types import Candidate
from reconciler.model.nodepool import NodePool
from reconciler.model.pdb import PdbLimits
from reconciler.model.pod import Pod
from reconciler.provisioning.validation import split_pods
from reconciler.scheduling import Scheduler, SchedulingContext, SchedulingResult
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState
from reconciler.state.node import StateNode
from reconciler.state.pods import deleting_nodes_pods
from reconciler.state.views import node_values


@dataclass(slots=True)
class Simulation:
    result: SchedulingResult
    moving: list[str]  # keys of the candidates' pods that were rescheduled
    failures: dict[str, str] = field(default_factory=dict)  # candidate pod -> why it found no home
    stopped: bool = False  # the run was cut short (deadline): treat as unusable

    @property
    def ok(self) -> bool:
        return not self.failures and not self.stopped


def _consolidate_after_ends(node: StateNode, nodepools: Mapping[str, NodePool]) -> datetime | None:
    """Until when the node is inside its NodePool's consolidateAfter (None: it is not, at any moment)."""
    pool = nodepools.get(node.nodepool)
    if pool is None or node.nodeclaim is None or not node.initialized:
        return None
    settings = settings_of(pool)
    if not settings.enabled or not settings.consolidate_after or settings.consolidate_after <= 0:
        return None
    return quiet_until(node, settings.consolidate_after)


class SimulationBudgetExceeded(Exception):
    """The decision has used up the simulations it may run (or its deadline passed)."""


class Simulator:
    def __init__(
        self,
        state: ClusterState,
        instance_types_by_nodepool: Mapping[str, Sequence[InstanceType]],
        settings: Settings,
        now: datetime,
        pdbs: PdbLimits,
        *,
        should_stop: Callable[[], bool] | None = None,
        max_runs: int | None = None,
    ) -> None:
        self.state = state
        self.now = now
        self.pdbs = pdbs
        self.context = SchedulingContext.build(state, instance_types_by_nodepool, settings)
        self._should_stop = should_stop
        self._max_runs = max_runs
        self.runs = 0
        pending = state.pending_pods()
        accepted, _, _ = split_pods(pending, state) if pending else ([], {}, {})
        self.pending: list[Pod] = list(accepted)
        self.deleting_nodes, self.deleting = deleting_nodes_pods(state, pdbs, now)
        self.busy_nodes = self._under_consolidate_after()
        self._savings_bound: SavingsBound | None = None

    @property
    def savings_bound(self) -> SavingsBound:
        """Proves consolidation tries unprofitable without simulating them (see ``savings_bound``)."""
        if self._savings_bound is None:
            self._savings_bound = SavingsBound(self.context, self.busy_nodes)
        return self._savings_bound

    def _under_consolidate_after(self) -> set[str]:
        now = self.now
        pools = self.state.nodepools
        view = node_values(self.state, "disruption.consolidate_after_ends",
                           lambda node: _consolidate_after_ends(node, pools), tuple(pools.values()), ordered=False)
        return {name for name, until in view.values.items() if until is not None and now < until}

    def exhausted(self) -> bool:
        if self._max_runs is not None and self.runs >= self._max_runs:
            return True
        return self._should_stop is not None and self._should_stop()

    def run(self, candidates: Sequence[Candidate], *, consolidation: bool) -> Simulation:
        """Simulate removing ``candidates``; raises ``SimulationBudgetExceeded`` when out of budget."""
        if self.exhausted():
            raise SimulationBudgetExceeded()
        self.runs += 1
        removed = {c.name for c in candidates}
        moving = [pod for c in candidates for pod in c.reschedulable]
        pods = [*self.pending, *moving, *self.deleting]
        scheduler = Scheduler(
            self.context,
            self.now,
            exclude_nodes=removed,
            pending_only_nodes=(self.busy_nodes - removed) if consolidation else (),
            scheduling_pods={pod.key for pod in moving} | {pod.key for pod in self.deleting},
            should_stop=self._should_stop,
        )
        result = scheduler.solve(pods)
        simulation = Simulation(result, [pod.key for pod in moving])
        if self._should_stop is not None and self._should_stop():
            simulation.stopped = True  # the deadline passed, possibly mid-run: the result may be partial
        # Pending pods may stay pending; every pod that is running now must find a home.
        for key in [*simulation.moving, *(pod.key for pod in self.deleting)]:
            if key in result.errors:
                simulation.failures[key] = result.errors[key]
        moving_keys = set(simulation.moving)
        for key, node_name in result.existing.items():
            if key not in moving_keys:
                continue
            node = self.state.state_node(node_name)
            if node is not None and node.managed and not node.initialized:
                simulation.failures[key] = f"would schedule against uninitialized node {node_name}"
        return simulation
