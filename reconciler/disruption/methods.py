"""The disruption methods, in the order a pass tries them (Karpenter's ``Method`` and ``c.methods``).

Each method carries everything the pass loop, the live controller and the
simulator need to know about it, so none of them keeps its own list:

- ``reason``: the budget reason it consumes and the reason its commands carry;
- ``disruption_class``: graceful (every pod blocker holds) or eventual (drift:
  waived when a terminationGracePeriod bounds the drain);
- ``should_disrupt``: which candidates of its class it considers at all;
- ``compute``: at most one command from those candidates within the budgets;
- ``validate``: how its command is re-checked after
  ``settings.consolidation_validation_wait``; None acts at once (drift).

Emptiness goes first (deleting empty nodes costs nothing), then the drift of static NodePools (a
fresh node from the template each, ``static_drift``), then drift, then
multi-node consolidation (several nodes at once, less churn), then single-node.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from reconciler.cloud.types import InstanceType
from reconciler.disruption.budgets import REASON_DRIFTED, REASON_EMPTY, REASON_UNDERUTILIZED, BudgetAllowance
from reconciler.disruption.drift_method import drift
from reconciler.disruption.emptiness import emptiness, validate_emptiness
from reconciler.disruption.outcome import MethodOutcome, ValidationResult
from reconciler.disruption.pass_context import PassContext
from reconciler.disruption.static_drift import is_static_drift_candidate, static_drift
from reconciler.disruption.types import (
    DRIFT,
    EMPTINESS,
    EVENTUAL,
    GRACEFUL,
    MULTI_NODE,
    SINGLE_NODE,
    STATIC_DRIFT,
    Candidate,
    Command,
)
from reconciler.disruption.underutilized import multi_node, single_node, validate_consolidation
from reconciler.provisioning.static import GATE as STATIC_GATE
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState


class Compute(Protocol):
    def __call__(
        self, run: PassContext, candidates: Sequence[Candidate], allowances: Mapping[str, BudgetAllowance]
    ) -> MethodOutcome: ...


class Validator(Protocol):
    def __call__(
        self,
        command: Command,
        state: ClusterState,
        instance_types_by_nodepool: Mapping[str, Sequence[InstanceType]],
        settings: Settings,
        now: datetime,
        *,
        should_stop: Callable[[], bool] | None = None,
    ) -> ValidationResult: ...


@dataclass(slots=True, frozen=True)
class Method:
    name: str  # Command.method
    reason: str
    consolidation_type: str  # Karpenter's consolidation_type metric label: empty, multi, single ("" for drift)
    disruption_class: str  # GRACEFUL | EVENTUAL
    should_disrupt: Callable[[PassContext, Candidate], bool]
    compute: Compute
    validate: Validator | None = None
    # The names of the only candidates ``should_disrupt`` can accept this pass (a kept view), or None: any.
    narrow: Callable[[PassContext], Collection[str] | None] | None = None

    @property
    def validated(self) -> bool:
        """Whether a command waits the validation period and is re-checked before it acts."""
        return self.validate is not None


def _empty(run: PassContext, candidate: Candidate) -> bool:
    return candidate.is_empty


def _not_empty(run: PassContext, candidate: Candidate) -> bool:
    return not candidate.is_empty  # empty nodes are emptiness' business


def _drifted(run: PassContext, candidate: Candidate) -> bool:
    return run.drifted(candidate)


def _drift_suspects(run: PassContext) -> Collection[str]:
    return run.drifted_names()


def _static_pool_nodes(run: PassContext) -> Collection[str] | None:
    """Nothing to ask when no NodePool is static (or the gate is off); else every candidate."""
    if not run.settings.gate(STATIC_GATE) or not any(pool.is_static for pool in run.state.nodepools.values()):
        return ()
    return None


METHODS: tuple[Method, ...] = (
    Method(EMPTINESS, REASON_EMPTY, "empty", GRACEFUL, _empty, emptiness, validate_emptiness),
    Method(STATIC_DRIFT, REASON_DRIFTED, "", EVENTUAL, is_static_drift_candidate, static_drift,
           narrow=_static_pool_nodes),
    Method(DRIFT, REASON_DRIFTED, "", EVENTUAL, _drifted, drift, narrow=_drift_suspects),
    Method(MULTI_NODE, REASON_UNDERUTILIZED, "multi", GRACEFUL, _not_empty, multi_node, validate_consolidation),
    Method(SINGLE_NODE, REASON_UNDERUTILIZED, "single", GRACEFUL, _not_empty, single_node, validate_consolidation),
)
_BY_NAME = {method.name: method for method in METHODS}


def method_named(name: str) -> Method:
    """The method a command came from (``Command.method``)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown disruption method {name!r}") from None
