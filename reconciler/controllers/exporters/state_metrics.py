"""The metrics Karpenter derives from its cluster state, kept up to date from Adze's cache.

- Nodes (every ``NODE_PERIOD``, as Karpenter's ``metrics.node``): allocatable, system overhead
  (capacity - allocatable), pod and DaemonSet requests and limits, age — each labelled by the node's
  well-known labels — plus cluster utilization and the cluster-state node count.
- Pods: on every pod change as it arrives, and all pods again every ``POD_PERIOD`` so the Pending gauges
  keep counting (``pod_metrics``).
- Conditions and terminations of NodeClaims, NodePools, Nodes and EC2NodeClasses (``condition_metrics``).
- Offerings and cost (every ``OFFERING_PERIOD``): price and availability of every offering of every
  NodePool's instance types (Karpenter's AWS ``metrics`` controller), and each NodePool's cost — the
  summed prices of its NodeClaims' offerings; a claim whose offering has no known price counts once as a
  cost-tracking error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from reconciler.cloud.types import InstanceType
from reconciler.controllers.exporters.condition_metrics import KINDS, ConditionMetrics
from reconciler.controllers.exporters.pod_metrics import PodMetrics
from reconciler.controllers.pools_and_classes.status_controller import resource_label
from reconciler.controllers.runtime.context import ControllerContext
from reconciler.lifecycle.nodepool_types import instance_types_by_nodepool
from reconciler.model.meta import object_key
from reconciler.model.resources import Resources
from reconciler.observability.metrics import NODE_LABEL_KEYS
from reconciler.state.cluster import ClusterState
from reconciler.state.node import StateNode
from reconciler.state.store import StateStore

NODE_PERIOD = 5.0
POD_PERIOD = 30.0
OFFERING_PERIOD = 60.0
Samples = list[tuple[dict[str, str], float]]


def _pod_limits(manifest: Mapping[str, Any]) -> Resources:
    """A pod's effective limits (as its requests are computed): containers summed, the largest init container."""
    spec = manifest.get("spec") or {}

    def limits(container: Mapping[str, Any]) -> Resources:
        return Resources.from_manifest((container.get("resources") or {}).get("limits"))

    total = Resources()
    for container in spec.get("containers") or []:
        total = total + limits(container)
    for container in spec.get("initContainers") or []:
        total = total.max(limits(container))
    return total


class StateMetrics:
    def __init__(self, ctx: ControllerContext, store: StateStore) -> None:
        self.ctx = ctx
        self.store = store
        self.pods = PodMetrics(ctx.metrics, store)
        self.conditions = ConditionMetrics(ctx.metrics.runtime)
        self._cost_errors: set[str] = set()  # claims already counted as a cost-tracking error
        self._last_pods = self._last_offerings = float("-inf")
        store.subscribe(self._on_change)

    def _on_change(self, kind: str, manifest: dict[str, Any], deleted: bool) -> None:
        if kind == "Pod":
            self.pods.update(object_key(manifest), None if deleted else manifest, self.ctx.now())
        elif kind in KINDS:
            self.conditions.observe(kind, manifest, deleted, self.ctx.now())

    def pods_decided(self, keys: list[str]) -> None:
        """The provisioner decided about these pods: their undecided / provisioning gauges change now."""
        now = self.ctx.now()
        for key in keys:
            self.pods.update(key, self.store.get("Pod", key), now)

    async def run(self) -> None:
        while True:
            async with self.ctx.reconciling():
                await self.refresh()
            await asyncio.sleep(NODE_PERIOD)

    async def refresh(self, *, force: bool = False) -> None:
        """One pass: nodes, conditions, every POD_PERIOD all pods; offerings and cost when due."""
        now, mono = self.ctx.now(), self.ctx.clock.monotonic()
        state = self.store.state  # read on the loop, never from a thread: no private copy needed
        self.export_nodes(state, now)
        if force or mono - self._last_pods >= POD_PERIOD:
            self._last_pods = mono
            for pod in self.store.manifests("Pod"):
                self.pods.update(object_key(pod), pod, now)
        self.conditions.refresh({kind: self.store.manifests(kind) for kind in KINDS}, now)
        if force or mono - self._last_offerings >= OFFERING_PERIOD:
            self._last_offerings = mono
            types = await instance_types_by_nodepool(self.ctx.cloud, state, self.ctx.settings)
            self.export_offerings(types)
            self.export_cost(state, types)

    def export_nodes(self, state: ClusterState, now: datetime) -> None:
        metrics = self.ctx.metrics
        families = {"allocatable": {}, "overhead": {}, "requests": {}, "limits": {}, "daemon_requests": {},
                    "daemon_limits": {}, "age": {}}  # type: dict[str, dict[str, Samples]]
        allocatable_total: dict[str, int] = {}
        requested_total: dict[str, int] = {}
        nodes = [n for n in state.state_nodes() if n.node is not None]
        for node in nodes:
            labels = self._node_labels(node)
            limits, daemon_limits = self._limits(node)
            for family, resources in (("allocatable", node.allocatable),
                                      ("overhead", (node.capacity - node.allocatable).clamp_non_negative()),
                                      ("requests", node.pod_requests), ("limits", limits),
                                      ("daemon_requests", node.daemonset_requests), ("daemon_limits", daemon_limits)):
                # Quantities are held in milli-units: CPU in cores, everything else in whole units.
                families[family][node.name] = [({**labels, "resource_type": resource_label(name)}, value / 1000.0)
                                               for name, value in resources.items()]
            created = node.node.creation_timestamp if node.node is not None else None
            families["age"][node.name] = [(labels, max(0.0, (now - created).total_seconds()))] if created else []
            for name, value in node.allocatable.items():
                allocatable_total[name] = allocatable_total.get(name, 0) + value
            for name, value in node.pod_requests.items():
                requested_total[name] = requested_total.get(name, 0) + value
        metrics.nodes_allocatable.replace_all(families["allocatable"])
        metrics.nodes_system_overhead.replace_all(families["overhead"])
        metrics.nodes_total_pod_requests.replace_all(families["requests"])
        metrics.nodes_total_pod_limits.replace_all(families["limits"])
        metrics.nodes_total_daemon_requests.replace_all(families["daemon_requests"])
        metrics.nodes_total_daemon_limits.replace_all(families["daemon_limits"])
        metrics.nodes_current_lifetime.replace_all(families["age"])
        metrics.cluster_utilization.replace_all({"cluster": [
            ({"resource_type": resource_label(name)}, 100.0 * requested_total.get(name, 0) / total)
            for name, total in allocatable_total.items() if total > 0]})
        metrics.cluster_state_node_count.set(len(nodes))

    def _node_labels(self, node: StateNode) -> dict[str, str]:
        manifest = self.store.get("Node", node.name) or {}
        node_labels = (manifest.get("metadata") or {}).get("labels") or {}
        labels = {metric: str(node_labels.get(key, "")) for metric, key in NODE_LABEL_KEYS.items()}
        labels.update(node_name=node.name, phase=str((manifest.get("status") or {}).get("phase") or ""),
                      managed="true" if node.managed else "false")
        return labels

    def _limits(self, node: StateNode) -> tuple[Resources, Resources]:
        total, daemon = Resources(), Resources()
        for key, pod in node.pods.items():
            manifest = self.store.get("Pod", key)
            if manifest is None:
                continue
            limits = _pod_limits(manifest)
            total = total + limits
            if pod.is_daemonset_pod:
                daemon = daemon + limits
        return total, daemon

    def export_offerings(self, types: Mapping[str, Sequence[InstanceType]]) -> None:
        available: dict[tuple[str, str, str], bool] = {}
        prices: dict[tuple[str, str, str], float] = {}
        for instance_types in types.values():
            for instance_type in instance_types:
                for offering in instance_type.offerings:
                    key = (instance_type.name, offering.capacity_type, offering.zone)
                    available[key] = available.get(key, False) or offering.available
                    prices[key] = offering.price

        def series(values: Mapping[tuple[str, str, str], float]) -> dict[str, Samples]:
            return {"/".join(k): [({"instance_type": k[0], "capacity_type": k[1], "zone": k[2]}, v)]
                    for k, v in values.items()}

        self.ctx.metrics.offering_available.replace_all(series({k: float(v) for k, v in available.items()}))
        self.ctx.metrics.offering_price.replace_all(series(prices))

    def export_cost(self, state: ClusterState, types: Mapping[str, Sequence[InstanceType]]) -> None:
        metrics = self.ctx.metrics
        cost: dict[str, float] = {name: 0.0 for name in state.nodepools}
        for node in state.state_nodes():
            claim, pool = node.nodeclaim, node.nodepool
            if claim is None or pool not in cost or node.deleting:
                continue
            instance_type = next((t for t in types.get(pool) or () if t.name == node.instance_type), None)
            offering = instance_type.offering(node.zone, node.capacity_type) if instance_type is not None else None
            if offering is None or not offering.price:
                if claim.name not in self._cost_errors:
                    self._cost_errors.add(claim.name)
                    metrics.nodepool_cost_errors.labels(nodepool=pool).inc()
                continue
            cost[pool] += offering.price
        metrics.nodepool_cost.replace_all({pool: [({"nodepool": pool}, value)] for pool, value in cost.items()})
        live = {c.name for c in state.nodeclaims.values()}
        self._cost_errors &= live
