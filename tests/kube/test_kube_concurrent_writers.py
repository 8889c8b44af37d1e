"""Another writer between Adze's read and its write, over HTTP (issue 16, item 2: no lost writes on lists).

The fake API server lets a third party change an object just before Adze's next update of it arrives
(``FakeApiServer.before_write``), so that update was computed from an older read: the node lifecycle
controller adds ``node.kubernetes.io/not-ready:NoExecute``, an admission webhook adds its finalizer, another
controller sets its condition. Each test drives one of Adze's real call sites through ``LiveKube`` and checks
that the third party's taint, finalizer or condition survives next to Adze's own change: the write carries
the resourceVersion it was computed from (a 409 makes Adze read again), as Karpenter's optimistic locking does.
A call site reverted to the old whole-list merge patch loses the third party's entry and fails here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from support.fake_apiserver import FakeApiServer

from reconciler.cloud.sim.provider import SimulatedCloud
from reconciler.cloud.types import InstanceType, Offering
from reconciler.controllers.disruption.disruption_controller import DisruptionController
from reconciler.controllers.disruption.drift_condition import DriftMarker
from reconciler.controllers.nodeclaim.garbage_collection import GarbageCollector
from reconciler.controllers.nodeclaim.termination_controller import TerminationController
from reconciler.controllers.runtime.context import ControllerContext, ManualClock, NameGenerator, Timings
from reconciler.interruption.actions import Action, ActionKind
from reconciler.interruption.queue_consumer import execute
from reconciler.kube.api import NODE, NODECLAIM, Kind, Manifest, kind_of
from reconciler.kube.live import LiveKube
from reconciler.kube.memory import MemoryKube
from reconciler.lifecycle.launch import launch, node_for_instance, register
from reconciler.lifecycle.orchestration import CommandExecutor, InFlightCommand
from reconciler.lifecycle.termination import Terminator
from reconciler.model import labels as wk
from reconciler.model.conditions import condition
from reconciler.model.resources import Resources
from reconciler.settings import Settings
from reconciler.state.store import StateStore

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}
AUDIT = "audit.example.com/keep"
Writer = Callable[[MemoryKube], Awaitable[None]]


# --- the third party -----------------------------------------------------------------------------------

def adds_taint(name: str, taint: dict[str, str] = NOT_READY) -> Writer:
    async def write(kube: MemoryKube) -> None:
        node = await kube.get(NODE, name)
        await kube.patch(NODE, name, {"spec": {"taints": [*(node["spec"].get("taints") or []), taint]}})
    return write


def adds_finalizer(kind: Kind, name: str, finalizer: str = AUDIT) -> Writer:
    async def write(kube: MemoryKube) -> None:
        current = await kube.get(kind, name)
        finalizers = [*(current["metadata"].get("finalizers") or []), finalizer]
        await kube.patch(kind, name, {"metadata": {"finalizers": finalizers}})
    return write


def drops_finalizer(kind: Kind, name: str, finalizer: str = AUDIT) -> Writer:
    async def write(kube: MemoryKube) -> None:
        current = await kube.get(kind, name)
        finalizers = [f for f in current["metadata"].get("finalizers") or [] if f != finalizer]
        await kube.patch(kind, name, {"metadata": {"finalizers": finalizers}})
    return write


def adds_condition(name: str, condition_type: str = "ExampleHealthy") -> Writer:
    async def write(kube: MemoryKube) -> None:
        current = await kube.get(NODECLAIM, name)
        conditions = [*((current.get("status") or {}).get("conditions") or []),
                      condition(condition_type, True, NOW, reason="Checked")]
        await kube.patch(NODECLAIM, name, {"status": {"conditions": conditions}}, subresource="status")
    return write


# --- objects -------------------------------------------------------------------------------------------

def cloud() -> SimulatedCloud:
    one = InstanceType("t", Resources.of(cpu="2", memory="4Gi", pods="10"), offerings=(Offering("z", "on-demand", 1),))
    return SimulatedCloud([one], clock=lambda: NOW)


def nodeclaim(name: str = "pool-a", *, finalizers: list[str] | None = None, **status: Any) -> Manifest:
    claim: Manifest = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {wk.NODEPOOL: "pool"}, "finalizers": finalizers or []},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["t"]}],
            "taints": [{"key": "team", "value": "a", "effect": "NoSchedule"}],
        },
    }
    if status:
        claim["status"] = status
    return claim


def node(name: str = "node-a", *, taints: list[dict[str, str]] | None = None, finalizers: list[str] | None = None,
         provider_id: str = "sim:///z/i-1") -> Manifest:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {wk.NODEPOOL: "pool"}, "finalizers": finalizers or []},
            "spec": {"providerID": provider_id, "taints": taints or []},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


async def seeded(live: LiveKube, *objects: Manifest) -> None:
    """Created over HTTP, so the server's defaults are applied as a real one applies them."""
    for manifest in objects:
        status = manifest.pop("status", None)
        created = await live.create(manifest)
        if status:
            await live.patch(kind_of(created), created["metadata"]["name"], {"status": status},
                             created["metadata"].get("namespace"), subresource="status")


def context(live: LiveKube, cloud_provider: Any = None, **timings: Any) -> ControllerContext:
    return ControllerContext(live, cloud_provider or cloud(), Settings(cluster_name="test"),
                             clock=ManualClock(NOW), timings=Timings(**timings))


async def store_of(server: FakeApiServer) -> StateStore:
    store = StateStore()
    for manifest in server.kube.objects():
        store.upsert(manifest)
    store.synced = True
    return store


def taint_keys(manifest: Manifest) -> list[str]:
    return [t["key"] for t in (manifest.get("spec") or {}).get("taints") or []]


def condition_types(manifest: Manifest) -> list[str]:
    return sorted(c["type"] for c in (manifest.get("status") or {}).get("conditions") or [])


# --- lifecycle/launch ------------------------------------------------------------------------------------

async def test_launch_keeps_a_finalizer_and_a_condition_written_meanwhile(server: FakeApiServer,
                                                                           live: LiveKube) -> None:
    await seeded(live, nodeclaim())
    server.before_write(NODECLAIM, "pool-a", adds_finalizer(NODECLAIM, "pool-a"), subresource=None)
    server.before_write(NODECLAIM, "pool-a", adds_condition("pool-a"), subresource="status")  # before Launched
    outcome = await launch(live, cloud(), await live.get(NODECLAIM, "pool-a"), NOW)
    assert outcome.instance is not None and server.interleaved_writes == 2
    stored = await live.get(NODECLAIM, "pool-a")
    assert stored["metadata"]["finalizers"] == [AUDIT, wk.TERMINATION_FINALIZER]
    assert {"ExampleHealthy", "Launched"} <= set(condition_types(stored))
    assert stored["status"]["providerID"] == outcome.instance.provider_id


async def test_a_launch_without_capacity_releases_only_its_own_finalizer(server: FakeApiServer,
                                                                         live: LiveKube) -> None:
    await seeded(live, nodeclaim(finalizers=[wk.TERMINATION_FINALIZER]))
    server.before_write(NODECLAIM, "pool-a", adds_finalizer(NODECLAIM, "pool-a"))
    no_capacity = SimulatedCloud([InstanceType("t", Resources.of(cpu="2", memory="4Gi", pods="10"))],
                                 clock=lambda: NOW)
    outcome = await launch(live, no_capacity, await live.get(NODECLAIM, "pool-a"), NOW)
    assert outcome.instance is None and server.interleaved_writes == 1
    stored = await live.get(NODECLAIM, "pool-a")  # deleting, held by the third party's finalizer only
    assert stored["metadata"]["finalizers"] == [AUDIT] and stored["metadata"].get("deletionTimestamp")


async def test_registration_keeps_the_not_ready_taint_a_finalizer_and_a_condition(server: FakeApiServer,
                                                                                  live: LiveKube) -> None:
    provider = cloud()
    await seeded(live, nodeclaim())
    await launch(live, provider, await live.get(NODECLAIM, "pool-a"), NOW)
    [instance] = await provider.list()
    joined = node_for_instance(await live.get(NODECLAIM, "pool-a"), instance, NOW)
    await seeded(live, joined)
    name = joined["metadata"]["name"]

    async def lifecycle_controller(kube: MemoryKube) -> None:
        await adds_taint(name)(kube)
        await adds_finalizer(NODE, name)(kube)

    server.before_write(NODE, name, lifecycle_controller)
    server.before_write(NODECLAIM, "pool-a", adds_condition("pool-a"), subresource="status")  # before Registered
    await register(live, await live.get(NODECLAIM, "pool-a"), await live.get(NODE, name), NOW)
    assert server.interleaved_writes == 2
    stored = await live.get(NODE, name)
    assert sorted(taint_keys(stored)) == ["node.kubernetes.io/not-ready", "team"]  # unregistered gone
    assert stored["metadata"]["finalizers"] == [AUDIT, wk.TERMINATION_FINALIZER]
    assert {"ExampleHealthy", "Launched", "Registered"} <= set(condition_types(await live.get(NODECLAIM, "pool-a")))


# --- lifecycle/termination and its controller -------------------------------------------------------------

async def test_termination_keeps_others_taints_and_finalizers_on_node_and_nodeclaim(server: FakeApiServer,
                                                                                    live: LiveKube) -> None:
    provider = cloud()
    await seeded(live, nodeclaim(finalizers=[wk.TERMINATION_FINALIZER, AUDIT]))
    outcome = await launch(live, provider, await live.get(NODECLAIM, "pool-a"), NOW)
    assert outcome.instance is not None
    await seeded(live, node(finalizers=[wk.TERMINATION_FINALIZER], provider_id=outcome.instance.provider_id))
    await server.kube.patch(NODECLAIM, "pool-a", {"status": {"nodeName": "node-a"}}, subresource="status")
    await server.kube.delete(NODECLAIM, "pool-a")
    server.before_write(NODE, "node-a", adds_taint("node-a"))  # before the disrupted taint
    terminator = Terminator(live, provider)
    assert not (await terminator.step(await live.get(NODECLAIM, "pool-a"), NOW)).finished
    tainted = await live.get(NODE, "node-a")
    assert taint_keys(tainted) == ["node.kubernetes.io/not-ready", wk.DISRUPTED_TAINT_KEY]

    # Releasing: a finalizer lands on the node just before ours goes; the deleting claim's other holder lets go
    # of it just before ours goes (a deleting object takes no new finalizers, so a stale list would fail too).
    server.before_write(NODE, "node-a", adds_finalizer(NODE, "node-a"))
    server.before_write(NODECLAIM, "pool-a", drops_finalizer(NODECLAIM, "pool-a"))
    assert (await terminator.step(await live.get(NODECLAIM, "pool-a"), NOW + timedelta(seconds=5))).finished
    assert server.interleaved_writes == 3
    released = await live.get(NODE, "node-a")
    assert released["metadata"]["finalizers"] == [AUDIT] and released["metadata"].get("deletionTimestamp")
    assert server.kube.peek(NODECLAIM, "pool-a") is None, "both finalizers gone: the NodeClaim is deleted"


async def test_a_deleted_node_without_a_nodeclaim_loses_our_finalizer_as_its_other_holder_lets_go(server: FakeApiServer,
                                                                           live: LiveKube) -> None:
    await seeded(live, node(finalizers=[wk.TERMINATION_FINALIZER, AUDIT]))
    await server.kube.delete(NODE, "node-a")
    server.before_write(NODE, "node-a", drops_finalizer(NODE, "node-a"))  # its other holder lets go meanwhile
    ctx = context(live)
    await TerminationController(ctx, await store_of(server)).reconcile_all()
    assert server.interleaved_writes == 1
    assert server.kube.peek(NODE, "node-a") is None


# --- controllers/disruption and lifecycle/orchestration ------------------------------------------------------

async def test_clearing_a_stale_disrupted_taint_keeps_a_taint_and_a_condition_added_meanwhile(
    server: FakeApiServer, live: LiveKube
) -> None:
    disrupted = {"key": wk.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}
    await seeded(live, node(taints=[disrupted]),
                 nodeclaim(providerID="sim:///z/i-1", nodeName="node-a",
                           conditions=[condition("DisruptionReason", True, NOW, reason="Underutilized")]))
    store = await store_of(server)  # the cache's copies: the third party's writes below are newer
    server.before_write(NODE, "node-a", adds_taint("node-a"))
    server.before_write(NODECLAIM, "pool-a", adds_condition("pool-a"))
    controller = DisruptionController(context(live), store, NameGenerator(lambda _: False, seed=1))
    assert await controller.clear_stale_taints() == ["node-a"]
    assert server.interleaved_writes == 2
    assert taint_keys(await live.get(NODE, "node-a")) == ["node.kubernetes.io/not-ready"]
    assert condition_types(await live.get(NODECLAIM, "pool-a")) == ["ExampleHealthy"]


async def test_a_disruption_command_taints_and_its_abort_untaints_keeping_others(server: FakeApiServer,
                                                                                 live: LiveKube) -> None:
    await seeded(live, node(), nodeclaim(providerID="sim:///z/i-1", nodeName="node-a"))
    server.before_write(NODE, "node-a", adds_taint("node-a"))  # before the disrupted taint
    server.before_write(NODECLAIM, "pool-a", adds_condition("pool-a"))  # before DisruptionReason
    executor = CommandExecutor(live, cloud())
    command = SimpleNamespace(reason="Underutilized", method="single", replacements=[],
                              candidates=[SimpleNamespace(name="node-a", nodeclaim="pool-a")])
    flight = await executor.start(command, NOW)
    assert flight.state == "waiting"
    assert taint_keys(await live.get(NODE, "node-a")) == ["node.kubernetes.io/not-ready", wk.DISRUPTED_TAINT_KEY]
    assert {"DisruptionReason", "ExampleHealthy"} <= set(condition_types(await live.get(NODECLAIM, "pool-a")))

    server.before_write(NODE, "node-a", adds_taint("node-a", {"key": "example.com/drain", "effect": "NoSchedule"}))
    server.before_write(NODECLAIM, "pool-a", adds_condition("pool-a", "ExampleChecked"))
    await executor.abort(flight, "a replacement did not initialize")
    assert server.interleaved_writes == 4
    assert taint_keys(await live.get(NODE, "node-a")) == ["node.kubernetes.io/not-ready", "example.com/drain"]
    after = condition_types(await live.get(NODECLAIM, "pool-a"))
    assert {"ExampleChecked", "ExampleHealthy"} <= set(after) and "DisruptionReason" not in after
    assert isinstance(flight, InFlightCommand) and flight.state == "aborted"


# --- interruption, drift, garbage collection ---------------------------------------------------------------

async def test_cordoning_for_an_interruption_keeps_a_taint_added_meanwhile(server: FakeApiServer,
                                                                            live: LiveKube) -> None:
    await seeded(live, node(), nodeclaim(providerID="sim:///z/i-1", nodeName="node-a",
                                           finalizers=[wk.TERMINATION_FINALIZER]))
    server.before_write(NODE, "node-a", adds_taint("node-a"))
    action = Action(ActionKind.CORDON_DRAIN, "i-1", nodeclaim="pool-a", node="node-a", reason="RebalanceRecommendation")
    await execute(live, action, NOW)
    assert server.interleaved_writes == 1
    cordoned = await live.get(NODE, "node-a")
    assert cordoned["spec"]["unschedulable"] is True
    assert taint_keys(cordoned) == ["node.kubernetes.io/not-ready", wk.DISRUPTED_TAINT_KEY]


async def test_a_nodeclaim_that_is_no_longer_drifted_keeps_a_condition_added_meanwhile(server: FakeApiServer,
                                                                                       live: LiveKube) -> None:
    provider = cloud()
    await seeded(live, nodeclaim())
    await launch(live, provider, await live.get(NODECLAIM, "pool-a"), NOW)
    launched = [c for c in (await live.get(NODECLAIM, "pool-a"))["status"]["conditions"]
                if c["type"] not in ("Initialized", "Drifted")]
    await server.kube.patch(NODECLAIM, "pool-a", {"status": {"conditions": [
        *launched, condition("Initialized", True, NOW), condition("Drifted", True, NOW, reason="AMIDrift")]}},
        subresource="status")
    store = await store_of(server)
    server.before_write(NODECLAIM, "pool-a", adds_condition("pool-a"))
    marker = DriftMarker(context(live, provider), store)
    assert await marker.reconcile_once() == ["pool-a"]  # the simulated cloud reports no drift: cleared
    assert server.interleaved_writes == 1
    after = condition_types(await live.get(NODECLAIM, "pool-a"))
    assert {"ExampleHealthy", "Initialized", "Launched"} <= set(after) and "Drifted" not in after


async def test_garbage_collection_releases_an_orphans_node_as_its_other_holder_lets_go(server: FakeApiServer,
                                                                                        live: LiveKube) -> None:
    provider = cloud()
    from reconciler.cloud.types import LaunchRequest

    orphan = await provider.create(LaunchRequest(nodeclaim="lost", nodepool="pool", nodeclass="default",
                                                 instance_types=["t"]), None)
    await seeded(live, node(finalizers=[wk.TERMINATION_FINALIZER, AUDIT], provider_id=orphan.provider_id))
    server.before_write(NODE, "node-a", drops_finalizer(NODE, "node-a"))
    collector = GarbageCollector(context(live, provider, gc_min_age=0.0), await store_of(server))
    result = await collector.collect_once()
    assert result.instances == [orphan.provider_id] and server.interleaved_writes == 1
    assert result.nodes == ["node-a"] and server.kube.peek(NODE, "node-a") is None
