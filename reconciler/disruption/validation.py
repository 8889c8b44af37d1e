"""Re-checking a command after the validation wait, pure: is it still safe and still the same command?

The executor waits ``settings.consolidation_validation_wait`` (15 s) after
``decide`` chose a command of a validated method, takes a fresh snapshot and
calls ``validate``, which applies that method's own check
(``emptiness.validate_emptiness``, ``underutilized.validate_consolidation``).
A method without a validator (drift) is not re-checked.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from reconciler.cloud.types import InstanceType
from reconciler.disruption.methods import method_named
from reconciler.disruption.outcome import ValidationResult
from reconciler.disruption.types import Command
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState

__all__ = ["ValidationResult", "validate"]


def validate(
    command: Command,
    state: ClusterState,
    instance_types_by_nodepool: Mapping[str, Sequence[InstanceType]],
    settings: Settings,
    now: datetime,
    *,
    should_stop: Callable[[], bool] | None = None,
) -> ValidationResult:
    check = method_named(command.method).validate
    if check is None:
        return ValidationResult(command)
    return check(command, state, instance_types_by_nodepool, settings, now, should_stop=should_stop)
