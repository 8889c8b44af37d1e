"""``consolidationPolicy: Balanced``: only moves whose savings are worth their disruption.

For each Balanced NodePool a command touches, the pool's share of the savings
(savings / the pool's hourly cost) divided by its share of the disruption (the
candidates' reschedule cost / the whole pool's) must reach 1/2. This answers
the churn complaints (aws#8868, #2319) — replacing busy nodes for pennies — and
is why Adze implements it: the rule only ever removes moves, never adds any.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from reconciler.disruption.candidates import Catalog
from reconciler.disruption.policy import BALANCED, BALANCED_K, settings_of
from reconciler.disruption.types import Candidate, Command
from reconciler.model import podutil
from reconciler.state.cluster import ClusterState


@dataclass(slots=True, frozen=True)
class PoolTotals:
    cost: float  # $/h of every node in the pool
    disruption: float  # summed reschedule cost of every node in the pool


@dataclass(slots=True, frozen=True)
class Score:
    savings_share: float
    disruption_share: float

    @property
    def value(self) -> float:
        if self.savings_share <= 0:
            return 0.0
        if self.disruption_share <= 0:
            return float("inf")
        return self.savings_share / self.disruption_share

    @property
    def approved(self) -> bool:
        return self.value >= 1 / BALANCED_K


@dataclass(slots=True, frozen=True)
class ConsolidationMove:
    """One consolidation move put to the scorer (Karpenter's consolidation_moves_total / _score)."""

    decision: str  # approved | rejected: the move (moves_total)
    nodepool: str
    policy: str
    score: float | None  # None for pools that are not Balanced (not scored)
    score_decision: str = ""  # approved | rejected: this pool's score (the score histogram)


class BalancedScorer:
    def __init__(self, totals: dict[str, PoolTotals], balanced_pools: set[str],
                 policies: dict[str, str] | None = None) -> None:
        self.totals = totals
        self.balanced_pools = balanced_pools
        self.policies = policies or {}
        self.moves: list[ConsolidationMove] = []

    @classmethod
    def build(cls, state: ClusterState, catalog: Catalog, candidates: Iterable[Candidate]) -> BalancedScorer:
        policies = {name: settings_of(pool).policy for name, pool in state.nodepools.items()}
        balanced = {name for name, policy in policies.items() if policy == BALANCED}
        if not balanced:
            return cls({}, set(), policies)
        known = {c.name: c.reschedule_cost for c in candidates}
        cost: dict[str, float] = {}
        disruption: dict[str, float] = {}
        for node in state.state_nodes():
            pool = node.nodepool
            if pool not in balanced:
                continue
            cost[pool] = cost.get(pool, 0.0) + catalog.price(pool, node)
            node_cost = known.get(node.name)
            if node_cost is None:
                node_cost = podutil.reschedule_cost(p for p in node.pods.values() if podutil.is_reschedulable(p))
            disruption[pool] = disruption.get(pool, 0.0) + node_cost
        totals = {pool: PoolTotals(cost.get(pool, 0.0), disruption.get(pool, 0.0)) for pool in balanced}
        return cls(totals, balanced, policies)

    def _score(self, pool: str, savings: float, disruption: float) -> Score:
        totals = self.totals.get(pool)
        if totals is None or totals.cost <= 0 or totals.disruption <= 0:
            return Score(0.0, 0.0)
        return Score(savings / totals.cost, disruption / totals.disruption)

    def scores(self, command: Command) -> dict[str, Score]:
        by_pool: dict[str, list[Candidate]] = {}
        for candidate in command.candidates:
            by_pool.setdefault(candidate.pool, []).append(candidate)
        savings, source = command.savings_per_hour, command.source_price
        result = {}
        for pool, members in by_pool.items():
            if pool not in self.balanced_pools:
                continue
            pool_price = sum(c.price for c in members)
            # Net savings are attributed to each pool by its share of what the candidates cost.
            share = savings * (pool_price / source) if len(by_pool) > 1 and source > 0 else savings
            result[pool] = self._score(pool, share, sum(c.reschedule_cost for c in members))
        return result

    def approves(self, command: Command) -> bool:
        """Whether the move passes every Balanced pool it touches; each pool's part is recorded in ``moves``."""
        scores = self.scores(command)
        approved = all(score.approved for score in scores.values())
        for pool in dict.fromkeys(c.pool for c in command.candidates):
            score = scores.get(pool)
            # A single-candidate move is judged by its pool's score, a multi-node one as a whole (Karpenter's).
            verdict = score.approved if score is not None and len(command.candidates) == 1 else approved
            self.moves.append(ConsolidationMove(
                "approved" if verdict else "rejected", pool, self.policies.get(pool, ""),
                score.value if score is not None else None,
                "approved" if score is not None and score.approved else "rejected"))
        return approved

    def could_pass(self, candidate: Candidate) -> bool:
        """Deleting outright is the best case; if even that fails the threshold, skip the simulation."""
        if candidate.pool not in self.balanced_pools:
            return True
        return self._score(candidate.pool, candidate.price, candidate.reschedule_cost).approved

    def describe_best_case(self, candidate: Candidate) -> str:
        score = self._score(candidate.pool, candidate.price, candidate.reschedule_cost)
        return _text(candidate.pool, score, "even deleting it")

    def describe(self, command: Command) -> str:
        rejected = [(pool, s) for pool, s in self.scores(command).items() if not s.approved]
        pool, score = rejected[0]
        return _text(pool, score, f"saving ${command.savings_per_hour:.4f}/h")


def _text(pool: str, score: Score, move: str) -> str:
    return (
        f"Balanced NodePool {pool}: {move} saves {score.savings_share:.1%} of the pool's cost for "
        f"{score.disruption_share:.1%} of its disruption (score {score.value:.2f} < {1 / BALANCED_K:.2f})"
    )
