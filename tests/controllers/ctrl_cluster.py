"""Test-side stand-ins for the parts of a cluster Adze does not own.

``FakeCluster`` plays, against a ``MemoryKube`` (directly, never through the
reconciler's possibly-crashing port):

- kube-controller-manager: Deployments/ReplicaSets/DaemonSets make pods (the
  simulator's ``WorkloadControllers``), and evicted pods come back pending;
- the kubelet: every running instance of the cloud registers a Node named after
  its instance ID (not after the NodeClaim: Adze must match by providerID), Ready,
  with the claim's labels/taints and ``karpenter.sh/unregistered``; a startup
  agent removes startup taints once Adze has registered the node;
- kube-scheduler: pending pods are bound to Ready nodes whose taints they
  tolerate, whose labels they select and where their requests fit; the rest are
  marked ``PodScheduled=False/Unschedulable``.

Also ``CrashingKube`` / ``CrashingCloud``: wrappers that "kill" the reconciler at
the N-th call (the call takes effect, then every later call of the dead instance
fails), and ``converged`` / ``inventory`` for the end-state assertions.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from reconciler.cloud.types import CloudProvider, Instance, LaunchRequest
from reconciler.kube.api import NODE, NODECLAIM, PDB, POD, ConflictError, Kind, Manifest, NotFoundError, kind_of
from reconciler.kube.memory import MemoryKube
from reconciler.lifecycle.launch import node_for_instance
from reconciler.model import labels as wk
from reconciler.model.conditions import is_true
from reconciler.model.meta import ManifestError
from reconciler.model.requirements import Requirements
from reconciler.model.taints import untolerated
from reconciler.sim.engine import daemon_pod_fits
from reconciler.sim.workloads import WorkloadControllers, running_status, unschedulable_status
from reconciler.state.cluster import ClusterState


def node_name_for(provider_id: str) -> str:
    return provider_id.rsplit("/", 1)[-1] + ".ec2.internal"


class FakeCluster:
    def __init__(self, kube: MemoryKube, cloud: CloudProvider, clock: Callable[[], datetime]) -> None:
        self.kube = kube
        self.cloud = cloud
        self.clock = clock
        self.workloads = WorkloadControllers(kube, self._snapshot, clock, daemon_pod_fits)
        self.bound: dict[str, str] = {}

    def _snapshot(self, kind: str) -> list[Manifest]:
        return [o for o in self.kube.objects() if o.get("kind") == kind]

    async def step(self) -> None:
        await self.workloads.reconcile()
        await self.kubelet()
        await self.startup_agents()
        await self.workloads.reconcile()  # DaemonSet pods for new nodes
        await self.schedule()
        await self.disruption_controller()

    async def run(self, interval: float = 0.02) -> None:
        while True:
            await self.step()
            await asyncio.sleep(interval)

    # -- kube-controller-manager's disruption controller ---------------------------------------------

    async def disruption_controller(self) -> None:
        """Keep every PodDisruptionBudget's status current, as the real cluster's disruption controller does
        (the reconciler, like Karpenter, reads ``status.disruptionsAllowed`` and allows nothing without it)."""
        for pdb in self.kube.objects(PDB):
            metadata = pdb["metadata"]
            computed = self.kube.pdb_status(pdb)
            status = {**computed.as_status(), "observedGeneration": metadata.get("generation", 1)}
            current = pdb.get("status") or {}
            if all(current.get(key) == value for key, value in status.items()):
                continue
            with contextlib.suppress(NotFoundError, ConflictError):
                await self.kube.patch(PDB, metadata["name"], {"status": status}, metadata.get("namespace"),
                                      subresource="status")

    # -- kubelet -----------------------------------------------------------------------------------

    async def kubelet(self) -> None:
        nodes = {(n.get("spec") or {}).get("providerID"): n for n in self.kube.objects(NODE)}
        claims = {(c.get("status") or {}).get("providerID"): c for c in self.kube.objects(NODECLAIM)}
        for instance in await self.cloud.list():
            if instance.state not in ("running", "pending") or instance.provider_id in nodes:
                continue
            claim = claims.get(instance.provider_id)
            node = node_for_instance(claim, instance, self.clock()) if claim else self._bare_node(instance)
            claim_status = (claim or {}).get("status") or {}
            if claim_status.get("allocatable"):  # a cloud listing may not carry the machine's capacity
                node["status"]["capacity"] = claim_status.get("capacity") or claim_status["allocatable"]
                node["status"]["allocatable"] = claim_status["allocatable"]
            node["metadata"]["name"] = node_name_for(instance.provider_id)
            node["metadata"]["labels"][wk.HOSTNAME] = node["metadata"]["name"]
            await _create_with_status(self.kube, node)

    def _bare_node(self, instance: Instance) -> Manifest:
        """A kubelet whose NodeClaim is gone still registers (orphaned instance)."""
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "", "labels": dict(instance.labels)},
            "spec": {
                "providerID": instance.provider_id,
                "taints": [{"key": wk.UNREGISTERED_TAINT_KEY, "effect": "NoExecute"}],
            },
            "status": {
                "capacity": instance.capacity.to_manifest(),
                "allocatable": instance.allocatable.to_manifest(),
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "lastTransitionTime": self.clock().strftime("%Y-%m-%dT%H:%M:%SZ"),
                    }
                ],
            },
        }

    async def startup_agents(self) -> None:
        claims = {(c.get("status") or {}).get("providerID"): c for c in self.kube.objects(NODECLAIM)}
        for node in self.kube.objects(NODE):
            if (node["metadata"].get("labels") or {}).get(wk.REGISTERED) != "true":
                continue
            claim = claims.get((node.get("spec") or {}).get("providerID"))
            startup = {
                (t.get("key"), t.get("effect"))
                for t in ((claim or {}).get("spec") or {}).get("startupTaints") or []
            }
            taints = (node.get("spec") or {}).get("taints") or []
            kept = [t for t in taints if (t.get("key"), t.get("effect")) not in startup]
            if len(kept) != len(taints):
                await self.kube.patch(NODE, node["metadata"]["name"], {"spec": {"taints": kept}})

    # -- kube-scheduler ----------------------------------------------------------------------------

    async def schedule(self) -> None:
        state = ClusterState()
        for obj in self.kube.objects():
            try:
                state.upsert(obj)
            except (ManifestError, ValueError):
                continue
        used: dict[str, dict[str, int]] = {}
        for key, pod in sorted(state.pods.items()):
            if pod.node_name or not pod.is_active:
                continue
            target = self._fit(state, pod, used)
            namespace, _, name = key.partition("/")
            if target is None:
                if pod.unschedulable_condition is not True:
                    await _patch_status(self.kube, name, namespace, unschedulable_status(self.clock()))
                continue
            try:
                await self.kube.patch(POD, name, {"spec": {"nodeName": target}}, namespace)
                await _patch_status(self.kube, name, namespace, running_status(self.clock()))
            except NotFoundError:
                continue
            self.bound[key] = target
            added = used.setdefault(target, {})
            for resource, value in pod.scheduling_requests.items():
                added[resource] = added.get(resource, 0) + value

    def _fit(self, state: ClusterState, pod: Any, used: Mapping[str, Mapping[str, int]]) -> str | None:
        for node in state.state_nodes():
            if node.node is None or not node.node.is_ready or node.node.deletion_timestamp is not None:
                continue
            if node.node.unschedulable:
                continue
            blocking = [
                t
                for t in untolerated(node.taints, pod.tolerations)
                if t.effect in ("NoSchedule", "NoExecute")
            ]
            if blocking:
                continue
            labels = node.labels
            if any(labels.get(k) != v for k, v in pod.node_selector.items()):
                continue
            if pod.required_terms and not any(
                Requirements.from_labels(labels).is_compatible(term.requirements)
                for term in pod.required_terms
            ):
                continue
            available = node.available - used.get(node.name, {})
            if pod.scheduling_requests.fits_in(available):
                return node.name
        return None


async def _create_with_status(kube: MemoryKube, manifest: Manifest) -> None:
    created = await kube.create(manifest)
    if manifest.get("status"):
        await kube.patch(
            kind_of(created),
            created["metadata"]["name"],
            {"status": manifest["status"]},
            created["metadata"].get("namespace"),
            subresource="status",
        )


async def _patch_status(kube: MemoryKube, name: str, namespace: str, status: Mapping[str, Any]) -> None:
    with contextlib.suppress(NotFoundError):
        await kube.patch(POD, name, {"status": dict(status)}, namespace, subresource="status")


# -- crash injection ----------------------------------------------------------------------------------


class Killed(BaseException):
    """The reconciler process died here (a BaseException: no ``except Exception`` swallows it)."""


_WRITES = ("create ", "replace ", "patch ", "delete ", "evict ", "cloud create ", "cloud delete ")


def is_write(what: str) -> bool:
    """Calls that change the cluster or the cloud; Events are bookkeeping, reads change nothing."""
    return what.startswith(_WRITES) and not what.split(" ", 2)[-1].startswith("Event/")


@dataclass
class CrashSwitch:
    """Counts what a reconciler instance does; right after its write number ``at`` takes effect, it dies.

    Only writes are crash points: dying after a read is the same as dying before the next write.
    """

    at: int | None = None
    counts: Callable[[str], bool] = field(default=lambda what: is_write(what))  # which calls are crash points
    calls: int = 0
    writes: int = 0
    dead: bool = False
    log: list[str] = field(default_factory=list)

    def before(self, what: str) -> None:
        if self.dead:
            raise Killed(f"call after death: {what}")

    def after(self, what: str) -> None:
        self.calls += 1
        if not self.counts(what):
            return
        self.writes += 1
        if self.at is not None and self.writes >= self.at and not self.dead:
            self.dead = True
            self.log.append(what)
            raise Killed(f"killed after write {self.writes}: {what}")


class CrashingKube:
    """``KubeAPI`` wrapper with a ``CrashSwitch`` (watches count once, when opened)."""

    def __init__(self, inner: Any, switch: CrashSwitch) -> None:
        self.inner = inner
        self.switch = switch

    async def _call(self, what: str, call: Callable[[], Any]) -> Any:
        self.switch.before(what)
        result = await call()
        self.switch.after(what)
        return result

    async def get(self, kind: Kind, name: str, namespace: str | None = None) -> Manifest:
        return await self._call(f"get {kind.kind}/{name}", lambda: self.inner.get(kind, name, namespace))

    async def list(
        self, kind: Kind, namespace: str | None = None, label_selector: str | None = None, **options: Any
    ) -> tuple[list[Manifest], str]:
        return await self._call(
            f"list {kind.kind}", lambda: self.inner.list(kind, namespace, label_selector, **options)
        )

    def watch(
        self, kind: Kind, resource_version: str, namespace: str | None = None, **options: Any
    ) -> AsyncIterator[Any]:
        return self._watch(kind, resource_version, namespace, **options)

    async def _watch(
        self, kind: Kind, resource_version: str, namespace: str | None, **options: Any
    ) -> AsyncIterator[Any]:
        self.switch.before(f"watch {kind.kind}")
        async for event in self.inner.watch(kind, resource_version, namespace, **options):
            self.switch.before(f"watch {kind.kind}")
            yield event

    async def create(self, manifest: Manifest) -> Manifest:
        return await self._call(
            f"create {manifest.get('kind')}/{manifest['metadata'].get('name')}",
            lambda: self.inner.create(manifest),
        )

    async def replace(self, manifest: Manifest, **options: Any) -> Manifest:
        return await self._call(
            f"replace {manifest.get('kind')}", lambda: self.inner.replace(manifest, **options)
        )

    async def patch(
        self,
        kind: Kind,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> Manifest:
        return await self._call(
            f"patch {kind.kind}/{name}{'/' + subresource if subresource else ''}",
            lambda: self.inner.patch(kind, name, patch, namespace, subresource),
        )

    async def delete(self, kind: Kind, name: str, namespace: str | None = None, **options: Any) -> None:
        return await self._call(
            f"delete {kind.kind}/{name}", lambda: self.inner.delete(kind, name, namespace, **options)
        )

    async def evict(self, name: str, namespace: str) -> None:
        return await self._call(f"evict {namespace}/{name}", lambda: self.inner.evict(name, namespace))


class CrashingCloud:
    """``CloudProvider`` wrapper sharing the kube wrapper's ``CrashSwitch``."""

    def __init__(self, inner: Any, switch: CrashSwitch) -> None:
        self.inner = inner
        self.switch = switch
        self.name = inner.name

    async def _call(self, what: str, call: Callable[[], Any]) -> Any:
        self.switch.before(what)
        result = await call()
        self.switch.after(what)
        return result

    async def instance_types(self, nodeclass: Any) -> Any:
        self.switch.before("instance_types")  # read-only and cached: not a crash point
        return await self.inner.instance_types(nodeclass)

    async def create(self, request: LaunchRequest, nodeclass: Any) -> Instance:
        return await self._call(
            f"cloud create {request.nodeclaim}", lambda: self.inner.create(request, nodeclass)
        )

    async def delete(self, provider_id: str) -> None:
        return await self._call(f"cloud delete {provider_id}", lambda: self.inner.delete(provider_id))

    async def get(self, provider_id: str) -> Instance:
        return await self._call(f"cloud get {provider_id}", lambda: self.inner.get(provider_id))

    async def list(self) -> list[Instance]:
        return await self._call("cloud list", self.inner.list)

    async def is_drifted(self, instance: Instance, nodeclass: Any) -> str | None:
        return await self.inner.is_drifted(instance, nodeclass)


# -- end-state checks -----------------------------------------------------------------------------------


@dataclass(slots=True)
class Inventory:
    instances: set[str]
    nodeclaims: set[str]  # provider IDs of NodeClaims
    nodes: set[str]  # provider IDs of Nodes
    unlaunched_claims: list[str]
    uninitialized_claims: list[str]
    deleting: list[str]
    pending_pods: list[str]
    pods_on_missing_nodes: list[str]

    @property
    def converged(self) -> bool:
        return (
            self.instances == self.nodeclaims == self.nodes
            and not self.unlaunched_claims
            and not self.uninitialized_claims
            and not self.deleting
            and not self.pending_pods
            and not self.pods_on_missing_nodes
        )


async def inventory(kube: MemoryKube, cloud: CloudProvider) -> Inventory:
    instances = {i.provider_id for i in await cloud.list() if i.state not in ("shutting-down", "terminated")}
    claims = kube.objects(NODECLAIM)
    nodes = kube.objects(NODE)
    node_names = {n["metadata"]["name"] for n in nodes}
    pods = kube.objects(POD)
    return Inventory(
        instances=instances,
        nodeclaims={c["status"]["providerID"] for c in claims if (c.get("status") or {}).get("providerID")},
        nodes={(n.get("spec") or {}).get("providerID", "") for n in nodes},
        unlaunched_claims=[
            c["metadata"]["name"] for c in claims if not (c.get("status") or {}).get("providerID")
        ],
        uninitialized_claims=[c["metadata"]["name"] for c in claims if not is_true(c, "Initialized")],
        deleting=[o["metadata"]["name"] for o in [*claims, *nodes] if o["metadata"].get("deletionTimestamp")],
        pending_pods=sorted(p["metadata"]["name"] for p in pods if not (p.get("spec") or {}).get("nodeName")),
        pods_on_missing_nodes=sorted(
            p["metadata"]["name"]
            for p in pods
            if (p.get("spec") or {}).get("nodeName") and p["spec"]["nodeName"] not in node_names
        ),
    )


def utc(year: int = 2026, month: int = 1, day: int = 1, hour: int = 9) -> datetime:
    return datetime(year, month, day, hour, tzinfo=UTC)


# Real us-east-1 on-demand prices; also the test catalogue's (ctrl_objects.catalog).
C5_ON_DEMAND = {"c5.large": 0.085, "c5.xlarge": 0.17, "c5.2xlarge": 0.34}


def hourly_cost(kube: MemoryKube) -> float:
    """What the cluster's NodeClaims cost per hour (by their launched instance type)."""
    return round(sum(
        C5_ON_DEMAND.get((c["metadata"].get("labels") or {}).get(wk.INSTANCE_TYPE, ""), 99.0)
        for c in kube.objects(NODECLAIM)
    ), 6)


async def packed(kube: MemoryKube, cloud: CloudProvider, pods: int, cost: float) -> bool:
    """Converged, ``pods`` pods running, and no more than ``cost`` $/h: consolidation has finished."""
    inv = await inventory(kube, cloud)
    return inv.converged and bool(inv.instances) and len(kube.objects(POD)) == pods and hourly_cost(kube) <= cost
