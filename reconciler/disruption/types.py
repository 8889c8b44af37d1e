"""Value types of the disruption engine: candidates, commands, explanations, decisions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from reconciler.cloud.types import InstanceType
from reconciler.model.nodepool import NodePool
from reconciler.model.pod import Pod
from reconciler.provisioning.lifetime import remaining_fraction
from reconciler.scheduling.results import ScheduledClaim
from reconciler.state.node import StateNode

# Method names (``Command.method``, explanations, the consolidation_type metric label). What each method
# is — its reason, class, whether it is validated, its order — is ``reconciler.disruption.methods.METHODS``.
EMPTINESS = "emptiness"
DRIFT = "drift"
STATIC_DRIFT = "static-drift"
MULTI_NODE = "multi-node"
SINGLE_NODE = "single-node"

# Disruption classes (Karpenter's Method.Class()): which candidates a method sees. Graceful methods
# respect every pod blocker; eventual ones (drift) may proceed past PDBs and do-not-disrupt pods when the
# NodeClaim's terminationGracePeriod bounds the drain.
GRACEFUL = "graceful"
EVENTUAL = "eventual"

DELETE = "delete"
REPLACE = "replace"


class PassClock:
    """The clock of the latest pass that assessed a candidate: candidates kept from pass to pass share one, set
    once per pass, instead of each carrying its pass's moment."""

    __slots__ = ("now",)

    def __init__(self, now: datetime) -> None:
        self.now = now


@dataclass(slots=True)
class Candidate:
    """A node that passed the eligibility checks every method shares."""

    node: StateNode
    nodepool: NodePool
    instance_type: InstanceType | None
    price: float  # of the offering it runs on (0 when unknown)
    pods: list[Pod]  # every pod bound to it (DaemonSet and static ones included)
    reschedulable: list[Pod]  # pods that need a new home if it goes (what the simulation reschedules)
    reschedule_cost: float  # 1 + sum of non-negative eviction costs of the reschedulable pods
    eviction_cost: float  # eviction costs of all pods
    lifetime: tuple[float, datetime] | None  # (expireAfter seconds, created), see ``provisioning.lifetime``
    clock: PassClock  # the latest pass's clock (``assessed_at``)
    # No per-pass findings here (a Candidate is kept from pass to pass): drift's are ``PassContext.drift_of``.
    # Read for every candidate several times a pass: plain attributes, set once from the node and its pods.
    name: str = field(init=False)
    # Karpenter treats "reschedule cost <= 1" as empty, which counts nodes whose pods all have
    # negative eviction cost as empty and deletes them without a simulation; Adze requires no
    # pod to move, so such pods are never left pending by emptiness.
    is_empty: bool = field(init=False)
    pool: str = field(init=False)  # the NodePool's name
    # Consolidation's order (``candidates.consolidation_order``): best savings per unit of disruption, then name.
    order_key: tuple[float, str] = field(init=False)
    # Consolidation's verdict kept with the candidate (kept from pass to pass): (since, code, message), see
    # ``underutilized.consolidatable``.
    consolidation: tuple[datetime, str, str] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.name = self.node.name
        self.is_empty = not self.reschedulable
        self.pool = self.nodepool.name
        self.order_key = (-self.savings_ratio, self.name)

    @property
    def assessed_at(self) -> datetime:
        return self.clock.now

    @property
    def disruption_cost(self) -> float:
        """Eviction costs of all pods scaled by the remaining lifetime at the pass's clock (computed when read:
        nothing in a pass reads it for most nodes)."""
        return self.eviction_cost * remaining_fraction(self.lifetime, self.assessed_at)

    @property
    def nodeclaim(self) -> str:
        return self.node.nodeclaim_name

    @property
    def zone(self) -> str:
        return self.node.zone

    @property
    def capacity_type(self) -> str:
        return self.node.capacity_type

    @property
    def instance_type_name(self) -> str:
        return self.node.instance_type

    @property
    def savings_ratio(self) -> float:
        return self.price / self.reschedule_cost


@dataclass(slots=True, frozen=True)
class Replacement:
    """A NodeClaim to launch before the candidates go (from the scheduling simulation)."""

    name: str
    nodepool: str
    instance_type_options: tuple[str, ...]  # cheapest first
    capacity_types: tuple[str, ...]
    pods: tuple[str, ...]
    manifest: dict[str, Any]  # a complete karpenter.sh/v1 NodeClaim, ready to create
    price: float  # cheapest available offering the claim allows (what the cloud will most likely launch)
    claim: ScheduledClaim | None = field(default=None, compare=False, repr=False)  # the simulated claim


@dataclass(slots=True)
class Command:
    reason: str  # the method's reason: Empty | Underutilized | Drifted (budgets.REASON_*)
    method: str  # emptiness | static-drift | drift | multi-node | single-node
    candidates: list[Candidate]
    replacements: list[Replacement] = field(default_factory=list)
    # Pod key -> node: where the simulation placed the candidates' pods on existing capacity.
    placements: dict[str, str] = field(default_factory=dict)

    @property
    def action(self) -> str:
        return REPLACE if self.replacements else DELETE

    @property
    def source_price(self) -> float:
        return sum(c.price for c in self.candidates)

    @property
    def savings_per_hour(self) -> float:
        """Candidates' prices minus the expected price of the replacements (negative for a drift upgrade)."""
        return round(self.source_price - sum(r.price for r in self.replacements), 6)

    @property
    def node_names(self) -> list[str]:
        return [c.name for c in self.candidates]

    def describe(self) -> str:
        nodes = ", ".join(self.node_names)
        text = f"{self.reason}/{self.method}: {self.action} [{nodes}]"
        if self.replacements:
            types = self.replacements[0].instance_type_options
            options = ", ".join(types[:5]) + (", ..." if len(types) > 5 else "")
            text += f" -> {len(self.replacements)} replacement(s) ({options})"
        return text + f" (savings ${self.savings_per_hour:.4f}/h)"


@dataclass(slots=True, frozen=True)
class Explanation:
    """Why one node was considered and not disrupted (or not considered) this pass."""

    node: str
    nodeclaim: str
    nodepool: str
    code: str  # short machine-readable cause, e.g. "Budget", "PDB", "NotCheaper"
    message: str
    method: str = ""  # the method that rejected it ("" for shared eligibility checks)

    def as_dict(self) -> dict[str, str]:
        return {
            "node": self.node,
            "nodeclaim": self.nodeclaim,
            "nodepool": self.nodepool,
            "method": self.method,
            "code": self.code,
            "message": self.message,
        }


@dataclass(slots=True)
class MethodRun:
    """What one method of a pass looked at (Karpenter's eligible nodes and evaluation time per method)."""

    method: str  # emptiness | drift | multi-node | single-node
    reason: str  # Empty | Drifted | Underutilized
    consolidation_type: str  # Karpenter's label value: empty, multi, single, and "" for drift
    eligible: int
    seconds: float | None = None  # None when the pass had no timer
    timed_out: bool = False


class DisruptionDecision:
    """The pass's command (or none) and why every other node considered was left alone."""

    __slots__ = ("_explanations", "budget_constrained", "budgets", "command", "later", "methods", "moves",
                 "simulations", "timed_out", "unseen_pools")

    def __init__(
        self,
        command: Command | None,
        explanations: list[Explanation] | None = None,
        budget_constrained: bool = False,
        timed_out: bool = False,
        unseen_pools: list[str] | None = None,
        *,
        later: Callable[[], list[Explanation]] | None = None,
    ) -> None:
        self.command = command
        # None while ``later`` builds them (on first read): a pass that acts is seldom explained.
        self._explanations = explanations if explanations is not None or later is not None else []
        self.later = later
        # True when some candidate was held back only by a budget: a "nothing to do" result must not be cached.
        self.budget_constrained = budget_constrained
        # True when a method stopped early at its deadline / simulation budget.
        self.timed_out = timed_out
        # NodePools single-node consolidation did not reach before its deadline: pass them first next time.
        self.unseen_pools: list[str] = unseen_pools if unseen_pools is not None else []
        self.simulations = 0  # scheduling simulations this pass ran
        self.methods: list[MethodRun] = []  # in the order they ran
        self.budgets: list[Any] = []  # BudgetAllowance of each (pool, reason) evaluated
        self.moves: list[Any] = []  # balanced.ConsolidationMove put to the scorer

    def __repr__(self) -> str:
        return (f"DisruptionDecision(command={self.command!r}, explanations={len(self.explanations)}, "
                f"budget_constrained={self.budget_constrained}, timed_out={self.timed_out})")

    @property
    def explanations(self) -> list[Explanation]:
        """Why each node considered was not disrupted this pass (see ``decide``)."""
        if self._explanations is None:
            assert self.later is not None
            self._explanations, self.later = self.later(), None
        return self._explanations

    @explanations.setter
    def explanations(self, explanations: list[Explanation]) -> None:
        self._explanations, self.later = explanations, None

    def explanation_for(self, node: str) -> Explanation | None:
        return next((e for e in self.explanations if e.node == node), None)

    def explanations_by_node(self) -> dict[str, Explanation]:
        return {e.node: e for e in self.explanations}

