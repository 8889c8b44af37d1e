"""What one disruption method concluded, and what re-checking a command after the validation wait found."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from reconciler.disruption.types import Command, Explanation


@dataclass(slots=True)
class MethodOutcome:
    method: str
    command: Command | None = None
    explanations: list[Explanation] = field(default_factory=list)
    budget_constrained: bool = False
    timed_out: bool = False
    eligible: int = 0  # candidates that passed the method's filter (Karpenter's eligible nodes)
    # NodePools the method did not reach before its deadline (single-node): tried first next pass.
    unseen_pools: list[str] = field(default_factory=list)
    # Explanations built only when read (before and after ``explanations``): most passes that act are never
    # explained.
    earlier: list[Callable[[], list[Explanation]]] = field(default_factory=list)
    later: list[Callable[[], list[Explanation]]] = field(default_factory=list)

    def explain(self, explanation: Explanation) -> None:
        self.explanations.append(explanation)

    def all_explanations(self) -> list[Explanation]:
        """Those of ``earlier``, ``explanations`` and then those of ``later``, built now."""
        return [*(e for build in self.earlier for e in build()), *self.explanations,
                *(e for build in self.later for e in build())]


@dataclass(slots=True)
class ValidationResult:
    command: Command | None  # what to execute (emptiness may have dropped some candidates)
    reason: str = ""  # why the command was abandoned

    @property
    def valid(self) -> bool:
        return self.command is not None
