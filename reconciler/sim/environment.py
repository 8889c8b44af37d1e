"""What a simulation's parts share: the in-memory API server, the simulated cloud, settings, names, the clock.

The runner builds one ``SimEnvironment`` and hands it to the simulated cluster;
the step functions reach it through the cluster. Nothing here points back at
the runner, so the cluster and the steps import neither it nor each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from reconciler.kube.memory import MemoryKube
from reconciler.model.pod import SpecFactsMemo
from reconciler.settings import Settings


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
    # False: a disrupt step records DisruptionBlocked events only for its command-less passes (what ``plan``
    # reads), not for each pass that acted; result documents keep every pass's.
    explain_every_pass: bool = True
    # Pod specs already parsed from the scenario's (never changed) objects while validating them.
    spec_memo: SpecFactsMemo | None = None

    def advance(self, seconds: float) -> None:
        self.now = self.now + timedelta(seconds=seconds)

    def clock(self) -> datetime:
        return self.now
