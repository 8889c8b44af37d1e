"""The scenario runner: the real engine against an in-memory cluster and a simulated cloud.

The simulator plays the parts Adze does not own — kube-controller-manager
(workload controllers), kube-scheduler (binding), the kubelet (Nodes appear and
become Ready at once) — and runs Adze's own provisioning, disruption and
lifecycle code unchanged. Time is virtual: only ``advance`` and validation
waits move the clock.
"""

from __future__ import annotations

import asyncio
import random
import string
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from reconciler.cloud.sim.provider import SimulatedCloud
from reconciler.cloud.types import Instance
from reconciler.disruption.adoption import adopt_nodeclaims
from reconciler.kube.api import KINDS_BY_NAME, NODE, NODECLAIM, Kind, Manifest, NotFoundError, kind_of
from reconciler.kube.memory import MemoryKube
from reconciler.model import labels as wk
from reconciler.model.meta import format_time
from reconciler.model.resources import Resources
from reconciler.sim import engine
from reconciler.sim.catalog import build_catalog, build_reservations, catalog_shaper, shutdown_seconds
from reconciler.sim.cluster import SimulatedCluster
from reconciler.sim.environment import SimEnvironment, SimOptions
from reconciler.sim.scenario import Scenario, ScenarioError, Step, load_scenario_file
from reconciler.sim.workloads import WorkloadControllers, create_with_status, expand_pod_replicas

__all__ = ["ScenarioError", "Simulation", "run_scenario", "run_scenario_file"]

MAX_STABLE_PASSES = 100
CLOUDS = ("simulated", "moto")
# Builds the cloud a simulation runs against, given the simulation (its clock, scenario).
CloudFactory = Callable[["Simulation"], Any]


class NameGenerator:
    """Deterministic ``<nodepool>-<5 letters>`` NodeClaim names, seeded by the scenario name."""

    def __init__(self, seed: str) -> None:
        self._random = random.Random(seed)
        self._used: set[str] = set()

    def __call__(self, nodepool: str) -> str:
        while True:
            suffix = "".join(self._random.choices(string.ascii_lowercase + string.digits, k=5))
            name = f"{nodepool}-{suffix}"
            if name not in self._used:
                self._used.add(name)
                return name

    def reserve(self, name: str) -> None:
        self._used.add(name)


def new_step_record(kind: str, clock: datetime) -> dict[str, Any]:
    return {
        "step": kind,
        "clock": format_time(clock),
        "launched": [],
        "bound": {},
        "pending": {},
        "disrupted": [],
        "events": [],
    }


class Simulation:
    def __init__(
        self, scenario: Scenario, *, cloud: CloudFactory | None = None, options: SimOptions | None = None
    ) -> None:
        """``cloud`` builds another cloud than the simulated one (``moto_cloud``: the real AWS provider on
        moto); it must also answer ``price_of``, ``price_source_of``, ``mark_unavailable`` and
        ``register_existing`` as ``SimulatedCloud`` does. ``options``: see ``SimOptions``."""
        self.scenario = scenario
        self.settings = scenario.settings
        self.kube = MemoryKube(clock=lambda: self.env.now, seed=0)
        self.cloud: Any = (
            cloud(self)
            if cloud is not None
            else self._simulated_cloud(scenario)
        )
        self.names = NameGenerator(scenario.name)
        self.options = options or SimOptions()
        self.env = SimEnvironment(self.kube, self.cloud, self.settings, self.names, scenario.clock,
                                  spec_memo=scenario.spec_memo, options=self.options)
        self.cluster = SimulatedCluster(self.env)

    def _simulated_cloud(self, scenario: Scenario) -> SimulatedCloud:
        types = build_catalog(scenario.catalog)
        return SimulatedCloud(
            types, clock=lambda: self.now, shaper=catalog_shaper(scenario.catalog),
            shutdown_seconds=shutdown_seconds(scenario.catalog),
            capacity_reservations=build_reservations(scenario.catalog, types),
            reserved_capacity=scenario.settings.gate("ReservedCapacity"),
        )

    @property
    def now(self) -> datetime:
        env = getattr(self, "env", None)  # a cloud built before the environment (moto) reads the start time
        return self.scenario.clock if env is None else env.now

    @property
    def workloads(self) -> WorkloadControllers:
        return self.cluster.workloads

    # -- helpers used by the step handlers ------------------------------------------------------
    def snapshot(self, kind_name: str) -> list[Manifest]:
        """Read-only views of one kind's objects (callers must not modify them)."""
        return self.cluster.manifests(kind_name)

    def advance(self, seconds: float) -> None:
        self.env.advance(seconds)

    async def load(self) -> None:
        expanded: list[Manifest] = []
        for index, manifest in enumerate(self.scenario.objects):
            if manifest.get("kind") == "PodDisruptionBudget" and manifest.get("status"):
                manifest = observed_budget(manifest)
            for obj in expand_pod_replicas(manifest):
                obj.setdefault("metadata", {})
                if kind_of(obj).namespaced:
                    obj["metadata"].setdefault("namespace", "default")
                expanded.append(obj)
            if manifest.get("kind") == "NodeClaim":
                self.names.reserve(manifest["metadata"]["name"])
            if manifest.get("kind") == "Node":
                self._adopt_instance(manifest, f"objects[{index}]")
        adopt_nodeclaims(expanded)  # NodeClaims stamped by Karpenter's hash versions, re-stamped as Adze would
        try:
            self.kube.load(expanded, share=True)  # the scenario's objects are never changed afterwards
        except ScenarioError:
            raise
        except Exception as err:  # duplicate names and the like
            raise ScenarioError(f"objects: {err}") from None
        if not self.settings.require_nodeclass:  # a plain scenario, not a real cluster's snapshot
            self.cluster.imply_nodeclasses(engine.implied_nodeclasses(expanded))
        await self.cluster.sync_nodeclass_status()
        await self.cluster.publish_overlays()
        await self.workloads.reconcile()
        self.cluster.count_pod_events()

    def _adopt_instance(self, node: Mapping[str, Any], path: str) -> None:
        """A scenario Node with a providerID is a running instance of the simulated cloud."""
        provider_id = (node.get("spec") or {}).get("providerID")
        labels = (node.get("metadata") or {}).get("labels") or {}
        if not provider_id:
            return
        instance_type = labels.get(wk.INSTANCE_TYPE, "")
        zone = labels.get(wk.ZONE, "")
        capacity_type = wk.capacity_type_of(labels) or wk.CAPACITY_TYPE_ON_DEMAND
        price = self.cloud.price_of(instance_type, zone, capacity_type) or 0.0
        reported = (node.get("status") or {}).get("capacity")
        try:
            capacity = Resources.from_manifest(reported, path=f"{path}.status.capacity")
        except ValueError as err:  # the message starts with the key path
            raise ScenarioError(str(err)) from None
        self.cloud.register_existing(
            Instance(
                provider_id=provider_id,
                instance_type=instance_type,
                zone=zone,
                capacity_type=capacity_type,
                price=price,
                nodepool=labels.get(wk.NODEPOOL, ""),
                capacity=capacity,
                labels=dict(labels),
            )
        )

    # -- steps ---------------------------------------------------------------------------------
    async def run(self, after_step: Callable[[Step, dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Run every step; ``after_step(step, record)`` sees the cluster after each (invariant checks)."""
        await self.load()
        steps = []
        for step in self.scenario.steps:
            record = new_step_record(step.kind, self.now)
            await self.execute(step, record)
            record["clock"] = format_time(self.now)
            record["pending"] = self.cluster.pending_reasons()
            steps.append(record)
            if after_step is not None:
                after_step(step, record)
        return {"scenario": self.scenario.name, "steps": steps, "final": self.cluster.final_summary()}

    async def execute(self, step: Step, record: dict[str, Any]) -> None:
        """Run one step's handler; a clock pushed past what a timestamp holds is the scenario's error."""
        try:
            await getattr(self, f"_step_{step.kind}")(step, record)
        except OverflowError:
            raise ScenarioError(
                f"{step.path}.{step.kind}: the simulated clock would leave the years 0001-9999 a timestamp can hold "
                f"(settings.clock is {format_time(self.scenario.clock)})"
            ) from None

    async def _step_provision(self, step: Step, record: dict[str, Any]) -> None:
        await self.cluster.provision(record, launch_ready=step.args.get("launch", "ready") == "ready")

    async def _step_disrupt(self, step: Step, record: dict[str, Any]) -> None:
        passes = MAX_STABLE_PASSES if step.args.get("until") == "stable" else 1
        for _ in range(passes):
            # A pass's explanations describe the nodes it saw; a later pass may disrupt a node an earlier one
            # held back, so the step keeps only the last pass's (never "disrupted" and "blocked" at once).
            record["events"] = [e for e in record["events"] if e.get("reason") != "DisruptionBlocked"]
            first_item, first_event = len(record["disrupted"]), len(record["events"])
            acted = await _disruption_steps().disrupt_once(self.cluster, record)
            if not acted:
                break
            if self.options.after_disruption_pass is not None:
                self.options.after_disruption_pass(self, record, first_item, first_event)

    async def _step_expire(self, step: Step, record: dict[str, Any]) -> None:
        await _disruption_steps().expire(self.cluster, record)

    async def _step_advance(self, step: Step, record: dict[str, Any]) -> None:
        self.advance(step.args)
        await self.cluster.boot_pending_nodes(record)
        await self.cluster.settle(record)

    async def _step_apply(self, step: Step, record: dict[str, Any]) -> None:
        for index, manifest in enumerate(step.args):
            for obj in expand_pod_replicas(manifest):
                await self._apply_object(obj, f"{step.path}.apply[{index}]")
        await self.cluster.sync_nodeclass_status()
        await self.cluster.publish_overlays()
        await self.cluster.publish_overlays()
        await self.workloads.reconcile()
        await self.cluster.settle(record)

    async def _apply_object(self, manifest: Manifest, path: str) -> None:
        kind = kind_of(manifest)
        metadata = manifest.setdefault("metadata", {})
        if kind.namespaced:
            metadata.setdefault("namespace", "default")
        current = self.kube.peek(kind, metadata["name"], metadata.get("namespace"))
        try:
            if current is None:
                await create_with_status(self.kube, manifest)
            else:
                metadata["resourceVersion"] = current["metadata"]["resourceVersion"]
                await self.kube.replace(manifest)
        except Exception as err:
            raise ScenarioError(f"{path}: {err}") from None

    async def _step_delete(self, step: Step, record: dict[str, Any]) -> None:
        for index, ref in enumerate(step.args):
            kind = _kind_for_reference(ref, f"{step.path}.delete[{index}]")
            namespace = ref.get("namespace", "default") if kind.namespaced else None
            try:
                if kind in (NODECLAIM, NODE):
                    await self.cluster.delete_capacity(kind, ref["name"], record)
                else:
                    await self.kube.delete(kind, ref["name"], namespace)
            except NotFoundError:
                record["events"].append(
                    {"object": f"{ref['kind']}/{ref['name']}", "reason": "NotFound", "message": "nothing to delete"}
                )
        await self.workloads.reconcile()
        await self.cluster.settle(record)

    async def _step_interrupt(self, step: Step, record: dict[str, Any]) -> None:
        await _disruption_steps().interrupt(self.cluster, step.args["node"], step.args.get("kind", "spot_interrupted"),
                                            record, path=f"{step.path}.interrupt.node")

    async def _step_nodeCondition(self, step: Step, record: dict[str, Any]) -> None:  # the step name
        from reconciler.sim import repair_steps

        await repair_steps.node_condition(self.cluster, step.args, record, path=f"{step.path}.nodeCondition")

    async def _step_repair(self, step: Step, record: dict[str, Any]) -> None:
        from reconciler.sim import repair_steps

        await repair_steps.repair(self.cluster, record)

    async def _step_unavailable(self, step: Step, record: dict[str, Any]) -> None:
        for index, offering in enumerate(step.args):
            try:
                changed = self.cloud.mark_unavailable(
                    offering["instanceType"], offering.get("zone"), offering.get("capacityType")
                )
            except KeyError:
                raise ScenarioError(
                    f"{step.path}.unavailable[{index}].instanceType: {offering['instanceType']!r} is not in the catalog"
                ) from None
            record["events"].append(
                {
                    "object": f"InstanceType/{offering['instanceType']}",
                    "reason": "InsufficientCapacity",
                    "message": f"{changed} offering(s) marked unavailable",
                }
            )


# What a PodDisruptionBudget's given status still says once the simulation moves: how many pods the real
# disruption controller expected (used when its pods' controllers are not in the scenario).
_OBSERVED_BUDGET_FIELDS = ("expectedPods", "observedGeneration")


def observed_budget(pdb: Mapping[str, Any]) -> Manifest:
    """The simulated disruption controller's starting point: a budget's counts (healthy, desired, disruptions
    allowed) are recomputed from the simulated pods whenever read, so only what the real controller observed
    about its expected pods is kept."""
    status = {k: v for k, v in (pdb.get("status") or {}).items() if k in _OBSERVED_BUDGET_FIELDS}
    return {**{k: v for k, v in pdb.items() if k != "status"}, **({"status": status} if status else {})}


def _disruption_steps() -> ModuleType:
    """The disrupt / expire / interrupt steps, imported when a scenario first uses one: they bring the
    disruption and interruption controllers (~0.1 s of imports) that a provisioning-only run never needs."""
    from reconciler.sim import disruption_steps

    return disruption_steps


def _kind_for_reference(ref: Mapping[str, Any], path: str) -> Kind:
    kind = KINDS_BY_NAME.get(str(ref.get("kind")))
    if kind is None:
        raise ScenarioError(f"{path}.kind: {ref.get('kind')!r} is not a kind the simulator knows")
    return kind


def moto_cloud(sim: Simulation) -> Any:
    """The real AWS provider against an in-process moto seeded from the scenario (``--cloud moto``)."""
    from reconciler.sim.moto_cloud import MotoSimulatedCloud

    return MotoSimulatedCloud(sim.scenario.catalog, sim.scenario.objects, lambda: sim.now,
                              reserved_capacity=sim.scenario.settings.gate("ReservedCapacity"))


def cloud_factory(name: str) -> CloudFactory | None:
    if name not in CLOUDS:
        raise ScenarioError(f"--cloud: {name!r} must be one of {', '.join(CLOUDS)}")
    return moto_cloud if name == "moto" else None


async def run_simulation(
    sim: Simulation, after_step: Callable[[Step, dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """Run ``sim`` to the end and release its cloud (the moto server) whatever happens."""
    try:
        check = getattr(sim.cloud, "check_types", None)
        if check is not None:
            await check()
        return await sim.run(after_step)
    finally:
        close = getattr(sim.cloud, "close", None)
        if close is not None:
            close()


def run_scenario(scenario: Scenario, *, cloud: str = "simulated") -> dict[str, Any]:
    return asyncio.run(run_simulation(Simulation(scenario, cloud=cloud_factory(cloud))))


def run_scenario_file(path: str | Path, *, cloud: str = "simulated") -> dict[str, Any]:
    return run_scenario(load_scenario_file(path), cloud=cloud)

