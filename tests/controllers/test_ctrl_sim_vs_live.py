"""The same scenario through the simulator and through the live controllers: the same decisions at the same times.

The simulator runs the scenario as ``python -m reconciler simulate`` would. The live side loads the same
objects into the same in-process fakes (``MemoryKube`` + ``SimulatedCloud``, populated by the simulator's
loader), feeds a ``StateStore`` from them and runs the live ``PodEventsController`` and
``DisruptionController`` on a manual clock, doing what the scenario's steps do (delete pods, let time pass,
disrupt) at the simulator's step times; its injected ``sleep`` moves that clock on and plays the kubelet
for replacements. Compared: which nodes each disruption pass disrupted, by which method and action, which
replacements it launched (NodePool, instance type), what it explained, and each NodeClaim's
``lastPodEventTime`` (the clock ``consolidateAfter`` counts from).
"""

from __future__ import annotations

import copy
from typing import Any

from reconciler.controllers.disruption.disruption_controller import _UNEXPLAINED, DisruptionController
from reconciler.controllers.nodeclaim.lifecycle_controller import NodeClaimLifecycle
from reconciler.controllers.nodeclaim.pod_events_controller import PodEventsController
from reconciler.controllers.runtime.context import ControllerContext, NameGenerator, Timings
from reconciler.disruption.types import Command, DisruptionDecision
from reconciler.kube.api import KINDS_BY_NAME, NODE, NODECLAIM, POD, Kind, WatchEvent
from reconciler.lifecycle.launch import node_for_instance
from reconciler.model.meta import format_time
from reconciler.observability import EventRecorder, Metrics
from reconciler.sim.runner import Simulation
from reconciler.sim.scenario import parse_scenario
from reconciler.sim.workloads import create_with_status
from reconciler.state.store import StateStore


def _instance_type(name: str, capacity: dict[str, str], price: float) -> dict[str, Any]:
    return {"name": name, "capacity": capacity, "labels": {"karpenter.k8s.aws/instance-family": name.split(".")[0]},
            "offerings": [{"capacityType": "on-demand", "zone": "us-east-1a", "price": price}]}


LARGE = {"cpu": "2", "memory": "8Gi", "pods": "29"}
XL2 = {"cpu": "8", "memory": "32Gi", "pods": "58"}
PINNED = {"karpenter.sh/do-not-disrupt": "true"}
NODECLASS = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
             "spec": {"role": "KarpenterNodeRole-demo", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                      "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                      "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}]}}


def _base() -> dict[str, Any]:
    """A catalogue of three on-demand types in one zone (prices as EC2 lists them) and one EC2NodeClass."""
    catalog = {"region": "us-east-1", "zones": ["us-east-1a"], "instanceTypes": [
        _instance_type("c5.large", {"cpu": "2", "memory": "4Gi", "pods": "29"}, 0.085),
        _instance_type("m5.large", LARGE, 0.096),
        _instance_type("m5.2xlarge", XL2, 0.384)]}
    return {"name": "sim-vs-live", "settings": {"clock": "2026-01-01T09:00:00Z"}, "catalog": catalog,
            "objects": [copy.deepcopy(NODECLASS)]}


def _pool(name: str, *, nodeclass: str = "default", weight: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": nodeclass},
            "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                             {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]}},
        "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m",
                       "budgets": [{"nodes": "100%"}]},
    }
    if weight is not None:
        spec["weight"] = weight
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def _node(name: str, instance_type: str, index: int, capacity: dict[str, str]) -> list[dict[str, Any]]:
    """A running managed node (Node + NodeClaim) of pool ``default``, last pod event an hour ago."""
    provider_id = f"aws:///us-east-1a/i-0a1b2c3d4e5f6071{index}"
    labels = {"karpenter.sh/nodepool": "default", "karpenter.k8s.aws/ec2nodeclass": "default",
              "node.kubernetes.io/instance-type": instance_type, "topology.kubernetes.io/zone": "us-east-1a",
              "topology.kubernetes.io/region": "us-east-1", "karpenter.sh/capacity-type": "on-demand",
              "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "karpenter.sh/registered": "true",
              "karpenter.sh/initialized": "true"}
    created = {"creationTimestamp": "2026-01-01T06:00:00Z", "finalizers": ["karpenter.sh/termination"]}
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, **created, "labels": {**labels, "kubernetes.io/hostname": name}},
            "spec": {"providerID": provider_id},
            "status": {"capacity": capacity, "allocatable": capacity,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "lastTransitionTime": "2026-01-01T06:01:10Z"}]}}
    claim = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
             "metadata": {"name": f"claim-{name}", **created, "labels": labels},
             "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                      "expireAfter": "720h",
                      "requirements": [
                          {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]},
                          {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [instance_type]},
                          {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]},
             "status": {"nodeName": name, "providerID": provider_id, "capacity": capacity, "allocatable": capacity,
                        "lastPodEventTime": "2026-01-01T08:00:00Z",
                        "conditions": [{"type": t, "status": "True", "lastTransitionTime": "2026-01-01T06:01:15Z"}
                                       for t in ("Launched", "Registered", "Initialized")]}}
    return [node, claim]


def _pod(name: str, node: str, cpu: str = "500m", **annotations: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": name.rsplit("-", 1)[0]},
                         "creationTimestamp": "2026-01-01T08:00:00Z", "annotations": annotations,
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                              "uid": "5b0e3b7e-8f21-4c47-9f0e-0c6f1c7d2a11", "controller": True}]},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu,
                                                                                              "memory": "1Gi"}}}]},
            "status": {"phase": "Running", "startTime": "2026-01-01T08:00:00Z",
                       "conditions": [{"type": "Ready", "status": "True",
                                       "lastTransitionTime": "2026-01-01T08:00:05Z"}]}}


def emptiness_timing_scenario() -> dict[str, Any]:
    """Node a loses both its pods 5 s apart; node b is held by a do-not-disrupt pod. Live, a's claim is stamped
    when its first pod leaves and again when the 10 s dedupe window ends, so ``consolidateAfter: 1m`` lets
    a go only 70 s after the first pod left: the passes at +45 s and +67 s leave it, the one at +75 s deletes it."""
    document = _base()
    document["objects"] += [_pool("default"), *_node("a", "m5.large", 1, LARGE), *_node("b", "m5.large", 2, LARGE),
                            _pod("web-0", "a"), _pod("web-1", "a"), _pod("pinned-0", "b", **PINNED)]
    document["steps"] = [
        {"delete": [{"kind": "Pod", "name": "web-0", "namespace": "default"}]},
        {"advance": "5s"},
        {"delete": [{"kind": "Pod", "name": "web-1", "namespace": "default"}]},
        {"advance": "40s"}, {"disrupt": {}},
        {"advance": "22s"}, {"disrupt": {}},
        {"advance": "8s"}, {"disrupt": {}},
    ]
    return document


def replacement_pool_scenario() -> dict[str, Any]:
    """An oversized m5.2xlarge with one small pod is replaced by a cheaper node. NodePool ``ghost`` weighs more,
    but its EC2NodeClass ``retired`` is deleted first: a pool without its class has no instance types (as in
    Karpenter), so the replacement is ``default``'s."""
    document = _base()
    retired = copy.deepcopy(document["objects"][0])
    retired["metadata"]["name"] = "retired"
    document["objects"] += [retired, _pool("default"), _pool("ghost", nodeclass="retired", weight=100),
                            *_node("big", "m5.2xlarge", 3, XL2), _pod("reports-0", "big")]
    document["steps"] = [{"delete": [{"kind": "EC2NodeClass", "name": "retired"}]}, {"disrupt": {}}]
    return document


def _disrupt_summary(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "disrupted": sorted((d["node"], d["method"], d["action"]) for d in record["disrupted"]),
        "launched": sorted((item["nodepool"], item["instanceType"]) for item in record["launched"]),
        "blocked": sorted((e["object"].removeprefix("Node/"), e["message"].split(":")[0])
                          for e in record["events"] if e["reason"] == "DisruptionBlocked"),
    }


def _stamps(kube: Any) -> dict[str, str]:
    return {c["metadata"]["name"]: (c.get("status") or {}).get("lastPodEventTime", "")
            for c in kube.objects(NODECLAIM) if not c["metadata"].get("deletionTimestamp")}


async def simulated(document: dict[str, Any], *, kubelets: bool = True) -> list[dict[str, Any]]:
    """Each disrupt step's decisions, and the claims' pod-event stamps after every step, from the simulator.
    Without ``kubelets`` no new node ever joins (a fault: replacements never initialize)."""
    sim = Simulation(parse_scenario(copy.deepcopy(document)))
    if not kubelets:
        async def never_joins(name: str) -> None:
            return None

        sim.cluster.boot = never_joins  # type: ignore[method-assign]
    seen: list[dict[str, Any]] = []

    def after(step: Any, record: dict[str, Any]) -> None:
        entry: dict[str, Any] = {"step": step.kind, "stamps": _stamps(sim.kube), "clock": record["clock"]}
        if step.kind == "disrupt":
            entry.update(_disrupt_summary(record))
        seen.append(entry)

    await sim.run(after_step=after)
    return seen


class _EnvClock:
    """The live controllers' clock: the fakes' own (virtual) time, moved on by the test."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.start = sim.env.now

    def now(self) -> Any:
        return self.sim.env.now

    def monotonic(self) -> float:
        return (self.sim.env.now - self.start).total_seconds()

    def advance(self, seconds: float) -> None:
        self.sim.env.advance(seconds)


class _RecordingDisruption(DisruptionController):
    """Notes each command as it starts (after validation) and what each pass explained (before the Kubernetes
    events' own dedupe), as the simulator's record does."""

    started_commands: list[Command]
    explained: list[tuple[str, str]]

    async def starting(self, command: Command) -> None:
        self.started_commands.append(command)
        await super().starting(command)

    async def _explain(self, decision: DisruptionDecision) -> None:
        self.explained = [(e.node, e.code) for e in decision.explanations if e.code not in _UNEXPLAINED]
        await super()._explain(decision)


class LiveRig:
    """The live controllers against the fakes the simulator's loader populated."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.kube, self.cloud = sim.kube, sim.cloud
        self.clock = _EnvClock(sim)
        self.store = StateStore()
        for kind_name in ("EC2NodeClass", "NodePool", "NodeClaim", "Node", "Pod"):
            for manifest in self.kube.objects(KINDS_BY_NAME[kind_name]):
                self.store.upsert(manifest)
        self.store.synced = True
        self.kube.subscribe(self._feed)
        timings = Timings(command_poll=1.0)
        self.ctx = ControllerContext(self.kube, self.cloud, sim.settings, clock=self.clock, timings=timings,
                                     metrics=Metrics(), events=EventRecorder(self.kube, clock=self.clock.now))
        self.podevents = PodEventsController(self.ctx, self.store)
        for pod in self.kube.objects(POD):  # running before the controller started: where they are, not events
            self.podevents.stamper.observe(pod, False, self.clock.now(), counts=False)
        self.lifecycle = NodeClaimLifecycle(self.ctx, self.store, on_launch_failed=lambda: None)
        names = NameGenerator(lambda name: self.store.get("NodeClaim", name) is not None, seed=1)
        self.disruption = _RecordingDisruption(self.ctx, self.store, names, sleep=self.sleep)
        self.disruption.started_commands = []
        self.kubelets = True

    def _feed(self, kind: Kind, event: WatchEvent) -> None:
        if event.type == "DELETED":
            self.store.remove(event.object)
        else:
            self.store.upsert(event.object)

    async def sleep(self, seconds: float) -> None:
        """Time passes: pod events are written, and kubelets join for launched replacements."""
        self.clock.advance(seconds)
        await self.podevents.flush()
        await self.kubelet()

    async def kubelet(self) -> None:
        if not self.kubelets:
            return
        for claim in self.kube.objects(NODECLAIM):
            provider_id = (claim.get("status") or {}).get("providerID")
            if not provider_id or any((n.get("spec") or {}).get("providerID") == provider_id
                                      for n in self.kube.objects(NODE)):
                continue
            node = node_for_instance(claim, await self.cloud.get(provider_id), self.clock.now())
            node["metadata"]["name"] = claim["metadata"]["name"]
            await create_with_status(self.kube, node)
        for _ in range(2):
            self.lifecycle.reconcile_all()
            await self.lifecycle.workers.drain()

    async def disrupt(self) -> dict[str, Any]:
        first_command = len(self.disruption.started_commands)
        self.disruption.explained = []
        await self.podevents.flush()
        flight = await self.disruption.reconcile_once()
        commands = self.disruption.started_commands[first_command:]
        disrupted, launched = [], []
        if flight is not None and flight.state != "aborted":
            for command in commands:
                disrupted += [(c.name, command.method, command.action) for c in command.candidates]
            for name in flight.launched:
                labels = (self.kube.peek(NODECLAIM, name) or {}).get("metadata", {}).get("labels") or {}
                launched.append((labels.get("karpenter.sh/nodepool"), labels.get("node.kubernetes.io/instance-type")))
        blocked = self.disruption.explained
        return {"disrupted": sorted(disrupted), "launched": sorted(launched), "blocked": sorted(blocked)}


async def live(document: dict[str, Any], *, kubelets: bool = True) -> list[dict[str, Any]]:
    """The same steps, done by the live controllers at the simulator's step times."""
    sim = Simulation(parse_scenario(copy.deepcopy(document)))
    await sim.load()
    rig = LiveRig(sim)
    rig.kubelets = kubelets
    seen: list[dict[str, Any]] = []
    for step in document["steps"]:
        (kind, args), = step.items()
        entry: dict[str, Any] = {"step": kind}
        if kind == "delete":
            for ref in args:
                kube_kind = KINDS_BY_NAME[ref["kind"]]
                await rig.kube.delete(kube_kind, ref["name"], ref.get("namespace", "default") if kube_kind.namespaced
                                      else None)
            await rig.podevents.flush()
        elif kind == "advance":
            await rig.sleep(float(str(args).removesuffix("s")))
        elif kind == "disrupt":
            entry.update(await rig.disrupt())
        entry["stamps"] = _stamps(rig.kube)
        entry["clock"] = format_time(rig.clock.now())
        seen.append(entry)
    return seen


def _comparable(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """From a command on, the two sides' clusters differ where the simulator also plays the termination
    controller and kube-scheduler (the candidates drained, their pods moved): stamps are compared until then."""
    out = []
    acted = False
    for entry in entries:
        item = dict(entry)
        acted = acted or bool(entry.get("disrupted"))
        if acted:  # the simulator drains (and lets time pass for it) where no live termination controller runs
            item.pop("stamps")
            item.pop("clock")
        out.append(item)
    return out


async def test_consolidate_after_counts_from_the_same_pod_events_in_simulation_and_live() -> None:
    document = emptiness_timing_scenario()
    simulation, controllers = await simulated(document), await live(document)
    assert _comparable(simulation) == _comparable(controllers)
    # The scenario shows what it is meant to: node a kept until +75 s, then deleted as empty.
    passes = [e for e in simulation if e["step"] == "disrupt"]
    assert [p["disrupted"] for p in passes] == [[], [], [("a", "emptiness", "delete")]]
    assert ("a", "ConsolidateAfter") in passes[1]["blocked"]
    assert simulation[2]["stamps"]["claim-a"] == "2026-01-01T09:00:00Z"  # the first pod left
    assert simulation[3]["stamps"]["claim-a"] == format_time(parse_scenario(document).clock.replace(second=10))


async def test_a_nodepool_without_its_nodeclass_gets_no_replacements_in_simulation_or_live() -> None:
    document = replacement_pool_scenario()
    simulation, controllers = await simulated(document), await live(document)
    assert _comparable(simulation) == _comparable(controllers)
    _, only = simulation
    assert only["disrupted"] == [("big", "single-node", "replace")]
    assert [pool for pool, _ in only["launched"]] == ["default"]


async def test_a_replacement_that_never_initializes_aborts_the_command_in_simulation_and_live() -> None:
    """No kubelet joins for the replacement: both wait for it as the live loop does, then abort after the
    replacement timeout — no node disrupted, nothing left launched, at the same time on both clocks."""
    document = replacement_pool_scenario()
    simulation = await simulated(document, kubelets=False)
    controllers = await live(document, kubelets=False)
    assert _comparable(simulation) == _comparable(controllers)
    _, only = simulation
    assert only["disrupted"] == [] and only["launched"] == []
    assert only["clock"] > "2026-01-01T09:10:00Z"  # it waited out REPLACEMENT_TIMEOUT (10 min)

