"""What a simulation's parts share: the in-memory API server, the simulated cloud, settings, names, the clock.

The runner builds one ``SimEnvironment`` and hands it to the simulated cluster;
the step functions reach it through the cluster. Nothing here points back at
the runner, so the cluster and the steps import neither it nor each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from reconciler.kube.memory import MemoryKube
from reconciler.lifecycle.drain import MIN_DRAIN_TIME
from reconciler.model.pod import SpecFactsMemo
from reconciler.settings import Settings

# Told after each disruption pass that acted: (the simulation, the step record, the index of the pass's first
# ``disrupted`` item, the index of its first event).
PassObserver = Callable[[Any, dict[str, Any], int, int], None]


@dataclass(slots=True, frozen=True)
class SimOptions:
    """How a simulation runs beyond its scenario (callers such as ``plan``; ``simulate`` uses the defaults).

    ``min_drain``: the drain's minimum duration (Karpenter's 5 s); ``plan`` times drains itself and passes 0.
    ``after_disruption_pass``: called after each disruption pass that acted (``plan`` times each command).
    ``explain_every_pass``: False records DisruptionBlocked events only for a disrupt step's command-less
    passes (what ``plan`` reads), not for each pass that acted; result documents keep every pass's.
    """

    min_drain: timedelta = MIN_DRAIN_TIME
    after_disruption_pass: PassObserver | None = field(default=None, compare=False)
    explain_every_pass: bool = True


@dataclass(slots=True)
class SimEnvironment:
    kube: MemoryKube
    # ``SimulatedCloud``, or with ``--cloud moto`` the real AWS provider on moto (``MotoSimulatedCloud``): a
    # CloudProvider that also answers price_of, price_source_of, mark_unavailable, register_existing and has
    # an ``unavailable`` cache.
    cloud: Any
    settings: Settings
    names: Callable[[str], str]  # NodeClaim names per NodePool, deterministic per scenario
    now: datetime  # virtual time: only ``advance`` moves it
    options: SimOptions = field(default_factory=SimOptions)
    # Pod specs already parsed from the scenario's (never changed) objects while validating them.
    spec_memo: SpecFactsMemo | None = None

    def advance(self, seconds: float) -> None:
        self.now = self.now + timedelta(seconds=seconds)

    def clock(self) -> datetime:
        return self.now
