"""What the cluster looks like after each simulated step: node tables with utilisation and price.

``RecordingSimulation`` is the simulator's ``Simulation`` plus a ``Frame`` after loading and after
every step, for charts and node tables (HTML report, ``status``, ``plan``). It leaves the
simulator's own run loop untouched: each step handler is wrapped, so ``run()`` returns exactly the
result document ``simulate`` prints. ``run_step`` drives steps one at a time (``plan`` decides the
next step from what happened), recording them the way ``run()`` does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from reconciler.cloud import pricesource
from reconciler.model.labels import ARCH, capacity_type_of
from reconciler.model.meta import format_time
from reconciler.model.resources import CPU, MEMORY
from reconciler.sim.environment import SimOptions
from reconciler.sim.runner import CloudFactory, Simulation, new_step_record
from reconciler.sim.scenario import STEP_KINDS, Scenario, Step
from reconciler.state.node import StateNode


@dataclass(slots=True, frozen=True)
class NodeRow:
    name: str
    nodepool: str  # "" when unmanaged
    instance_type: str
    zone: str
    capacity_type: str
    price: float  # $/h of the offering it runs on (0 when unknown)
    cpu_requested: int  # milli-cores requested by the pods bound to it (DaemonSets included)
    cpu_allocatable: int
    memory_requested: int  # milli-bytes, as Resources keeps them
    memory_allocatable: int
    pods: int
    ready: bool = True  # False while a NodeClaim has no Node yet
    arch: str = ""  # kubernetes.io/arch
    accelerator: str = ""  # extended resource of its accelerators (nvidia.com/gpu, aws.amazon.com/neuron, ...)
    accelerators_requested: int = 0
    accelerators_allocatable: int = 0
    price_source: str = ""  # where ``price`` comes from; "" = no offering priced it (price 0, shown as unknown)

    @property
    def managed(self) -> bool:
        return bool(self.nodepool)

    @property
    def priced(self) -> bool:
        """Whether some offering priced the node (a 0 without a source is "no price", not free)."""
        return bool(self.price_source) or self.price > 0

    @property
    def cpu_fraction(self) -> float:
        return self.cpu_requested / self.cpu_allocatable if self.cpu_allocatable else 0.0

    @property
    def memory_fraction(self) -> float:
        return self.memory_requested / self.memory_allocatable if self.memory_allocatable else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "nodepool": self.nodepool or None,
            "instanceType": self.instance_type or None,
            "zone": self.zone or None,
            "capacityType": self.capacity_type or None,
            "price": self.price,
            "cpuRequested": round(self.cpu_requested / 1000, 3),
            "cpuAllocatable": round(self.cpu_allocatable / 1000, 3),
            "memoryRequestedGiB": round(self.memory_requested / 1000 / 2**30, 3),
            "memoryAllocatableGiB": round(self.memory_allocatable / 1000 / 2**30, 3),
            "pods": self.pods,
            "ready": self.ready,
            "arch": self.arch or None,
            "accelerator": self.accelerator or None,
            "acceleratorsRequested": self.accelerators_requested,
            "acceleratorsAllocatable": self.accelerators_allocatable,
            "priceSource": self.price_source or None,
        }


def price_sources(rows: Sequence[NodeRow]) -> list[str]:
    """Where the prices of these rows come from (distinct, estimates last)."""
    return pricesource.legend(row.price_source for row in rows)


def unpriced(rows: Sequence[NodeRow]) -> list[str]:
    """Managed nodes no offering prices (their 0 is not a price)."""
    return [row.name for row in rows if row.managed and not row.priced]


@dataclass(slots=True, frozen=True)
class Frame:
    """The cluster after one step (``step`` is the step kind, or ``start`` after loading)."""

    step: str
    clock: datetime
    nodes: tuple[NodeRow, ...]
    pending: int
    launched: int = 0
    disrupted: int = 0

    @property
    def cost_per_hour(self) -> float:
        return round(sum(row.price for row in self.nodes), 6)

    def nodes_by_capacity_type(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in self.nodes:
            key = row.capacity_type or "unknown"
            counts[key] = counts.get(key, 0) + 1
        return dict(sorted(counts.items()))

    @property
    def pod_count(self) -> int:
        return sum(row.pods for row in self.nodes)


def node_rows(sim: Simulation) -> tuple[NodeRow, ...]:
    """Every Node and in-flight NodeClaim of the simulated cluster, priced by the simulated cloud."""
    return tuple(_row(sim, node) for node in sim.cluster.state().state_nodes())


# Extended resources that are accelerators, as device plugins name them.
ACCELERATORS = ("nvidia.com/gpu", "amd.com/gpu", "aws.amazon.com/neuron", "aws.amazon.com/neuroncore",
                "habana.ai/gaudi")


def _accelerator(node: StateNode) -> tuple[str, int, int]:
    for name in ACCELERATORS:
        total = node.allocatable.amount(name)
        if total:
            return name, node.pod_requests.amount(name) // 1000, total // 1000
    return "", 0, 0


def _row(sim: Simulation, node: StateNode) -> NodeRow:
    capacity_type = capacity_type_of(node.labels)  # a managed node group's own label too
    price = sim.cloud.price_of(node.instance_type, node.zone, capacity_type, nodepool=node.nodepool)
    source = sim.cloud.price_source_of(node.instance_type, node.zone, capacity_type, nodepool=node.nodepool) \
        if price is not None else ""
    accelerator, accelerators_requested, accelerators_allocatable = _accelerator(node)
    return NodeRow(
        name=node.name,
        nodepool=node.nodepool,
        instance_type=node.instance_type,
        zone=node.zone,
        capacity_type=capacity_type,
        price=price or 0.0,
        price_source=source,
        cpu_requested=node.pod_requests.amount(CPU),
        cpu_allocatable=node.allocatable.amount(CPU),
        memory_requested=node.pod_requests.amount(MEMORY),
        memory_allocatable=node.allocatable.amount(MEMORY),
        pods=len(node.pods),
        ready=node.node is not None,
        arch=node.labels.get(ARCH, ""),
        accelerator=accelerator,
        accelerators_requested=accelerators_requested,
        accelerators_allocatable=accelerators_allocatable,
    )


def capture(sim: Simulation, step: str, record: dict[str, Any] | None) -> Frame:
    disrupted = len(record["disrupted"]) if record else 0
    launched = len(record["launched"]) if record else 0
    return Frame(step, sim.now, node_rows(sim), len(sim.cluster.pending_pods()), launched, disrupted)


StepHandler = Callable[[Step, dict[str, Any]], Awaitable[None]]


class RecordingSimulation(Simulation):
    def __init__(self, scenario: Scenario, *, frames: bool = True, cloud: CloudFactory | None = None,
                 options: SimOptions | None = None) -> None:
        """``frames``: False records only the start frame (no per-step node tables: faster when no report
        is drawn). ``cloud`` and ``options``: as for ``Simulation``."""
        super().__init__(scenario, cloud=cloud, options=options)
        self._every_step = frames
        self.frames: list[Frame] = []
        self.records: list[dict[str, Any]] = []
        for kind in STEP_KINDS:
            handler = getattr(self, f"_step_{kind}")
            setattr(self, f"_step_{kind}", self._recording(kind, handler))

    def _recording(self, kind: str, handler: StepHandler) -> StepHandler:
        async def run(step: Step, record: dict[str, Any]) -> None:
            await handler(step, record)
            if self._every_step:
                self.frames.append(capture(self, kind, record))

        return run

    async def load(self) -> None:
        await super().load()
        self.frames.append(capture(self, "start", None))

    async def run_step(self, kind: str, args: Any, path: str = "") -> dict[str, Any]:
        """Run one step as ``Simulation.run`` would and return its result record."""
        step = Step(kind, args, path or f"steps[{len(self.records)}]")
        record = new_step_record(kind, self.now)
        await self.execute(step, record)
        record["clock"] = format_time(self.now)
        record["pending"] = self.cluster.pending_reasons()
        self.records.append(record)
        return record


def pool_shares(rows: Iterable[NodeRow]) -> dict[str, dict[str, Any]]:
    """Per NodePool: nodes, how many run on spot, nodes per zone, per architecture and per instance family (what
    a change moves)."""
    shares: dict[str, dict[str, Any]] = {}
    for row in rows:
        entry = shares.setdefault(row.nodepool or "unmanaged",
                                  {"nodes": 0, "spot": 0, "zones": {}, "arch": {}, "family": {}})
        entry["nodes"] += 1
        entry["spot"] += row.capacity_type == "spot"
        family = row.instance_type.partition(".")[0] or "?"
        for key, value in (("zones", row.zone or "?"), ("arch", row.arch or "?"), ("family", family)):
            entry[key][value] = entry[key].get(value, 0) + 1
    return {
        pool: {**entry, **{key: dict(sorted(entry[key].items())) for key in ("zones", "arch", "family")}}
        for pool, entry in sorted(shares.items())
    }


def node_mix(rows: Iterable[NodeRow]) -> list[dict[str, Any]]:
    """Nodes grouped by NodePool, instance type and capacity type, with their count and $/h."""
    groups: dict[tuple[str, str, str], list[NodeRow]] = {}
    for row in rows:
        groups.setdefault((row.nodepool, row.instance_type, row.capacity_type), []).append(row)
    return [
        {
            "nodepool": pool or None,
            "instanceType": instance_type or None,
            "capacityType": capacity or None,
            "count": len(members),
            "costPerHour": round(sum(m.price for m in members), 6),
        }
        for (pool, instance_type, capacity), members in sorted(groups.items())
    ]
