"""What one disruption method concluded: at most one command, plus explanations for what it turned down."""

from __future__ import annotations

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

    def explain(self, explanation: Explanation) -> None:
        self.explanations.append(explanation)
