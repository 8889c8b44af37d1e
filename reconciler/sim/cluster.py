"""The simulated cluster's moving parts: provisioning passes, kube-scheduler binding, kubelets, terminations.

``SimulatedCluster`` calls Adze's real engine (``provisioning``, ``disruption``)
and lifecycle executors (``lifecycle``) and plays kube-controller-manager's
workload controllers, kube-scheduler and the kubelet around them. It works on
a ``SimEnvironment`` (API server, cloud, settings, clock); the runner calls it
and the step functions (``sim.disruption_steps``), which call it in turn.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from reconciler.cloud import pricesource
from reconciler.kube.api import KINDS_BY_NAME, NODE, NODECLAIM, POD, Kind, Manifest, NotFoundError, WatchEvent
from reconciler.lifecycle.launch import initialize, launch, node_for_instance, register
from reconciler.lifecycle.nodepool_types import instance_types_by_nodepool
from reconciler.lifecycle.pod_events import PodEventStamper
from reconciler.lifecycle.termination import Terminator
from reconciler.model import labels as wk
from reconciler.model.conditions import condition_of
from reconciler.model.meta import ManifestError, format_time, owned_by_daemonset
from reconciler.model.podutil import manifest_key
from reconciler.provisioning.static import plan_static
from reconciler.sim import engine
from reconciler.sim.environment import SimEnvironment
from reconciler.sim.scenario import ScenarioError
from reconciler.sim.workloads import (
    WorkloadControllers,
    controller_reference,
    create_with_status,
    running_status,
    unschedulable_status,
)
from reconciler.state.cluster import ClusterState

# Re-planning after insufficient capacity at launch is bounded, like Karpenter's next batches.
MAX_LAUNCH_RETRIES = 3
MAX_GRACE_WAITS = 20  # distinct grace-period deadlines a disrupt step waits through
UNPLANNED = "not yet considered by a provisioning pass"


def is_terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


class SimulatedCluster:
    def __init__(self, env: SimEnvironment) -> None:
        self.env = env
        self.reasons: dict[str, str] = {}
        self.booting: dict[str, str] = {}  # nodeclaim -> provider id, launched with `launch: pending`
        self.nominated: dict[str, str] = {}  # pod key -> the launching claim it waits for
        self.terminator = Terminator(env.kube, env.cloud, min_drain=env.options.min_drain)
        self._drain_ends: dict[str, datetime] = {}  # deleting NodeClaim -> when its minimum drain time is over
        # Unowned pods deleted with a grace period: recreated (pending) once they are really gone.
        self._awaiting_removal: dict[str, Manifest] = {}
        # Kept current from every write, as the live reflectors keep it: no rebuild per decision.
        # Stored objects are never edited in place; the scenario's own were parsed once already.
        self._state = ClusterState(immutable_manifests=True, spec_memo=env.spec_memo)
        # Pod events stamp lastPodEventTime as the live controller does; the scenario's starting pods are only
        # learnt (``count_pod_events`` turns counting on once they are loaded).
        self.pod_events = PodEventStamper()
        self._pod_events_count = False
        env.kube.subscribe(self._observe, copy=False)  # the state only reads what it is given
        self._daemon_pods: dict[int, tuple[Mapping[str, Any], Any]] = {}  # id(template) -> (it, its pod)
        self.workloads = WorkloadControllers(env.kube, self.manifests, env.clock, self.daemon_pod_fits)

    def _observe(self, kind: Kind, event: WatchEvent) -> None:
        if kind == POD:
            self.pod_events.observe(event.object, event.type == "DELETED", self.env.now,
                                    counts=self._pod_events_count)
        try:
            if event.type == "DELETED":
                self._state.remove(event.object)
            else:
                self._state.upsert(event.object)
        except ManifestError as err:
            raise ScenarioError(f"objects: {err}") from None

    # -- reading the cluster --------------------------------------------------------------------
    def pods(self) -> list[Manifest]:
        return self.manifests("Pod")

    def pending_pods(self) -> list[Manifest]:
        """Pods with no node that are neither finished nor terminating (kept indexed by the state)."""
        return self._state.unbound_pod_manifests()

    def pending_reasons(self) -> dict[str, str]:
        return {manifest_key(p): self.reasons.get(manifest_key(p), UNPLANNED) for p in self.pending_pods()}

    def daemon_pod_fits(self, template: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
        # The template's pod is read once per template: stored objects are never edited in place, so the same
        # object (kept alive here, so its id is not reused) is the same template.
        kept = self._daemon_pods.get(id(template))
        if kept is None or kept[0] is not template:
            if len(self._daemon_pods) > 64:
                self._daemon_pods.clear()
            kept = self._daemon_pods[id(template)] = (template, engine.daemon_pod(template))
        return engine.daemon_pod_fits_on(kept[1], node)

    def state(self) -> ClusterState:
        return self._state

    def manifests(self, kind_name: str) -> list[Manifest]:
        """Current objects of a kind from the incrementally kept state: read-only, no copies."""
        state = self._state
        by_kind: dict[str, Mapping[str, Manifest]] = {
            "Pod": state.pod_manifests, "Node": state.node_manifests, "NodeClaim": state.nodeclaim_manifests,
            "NodePool": state.nodepool_manifests, "Deployment": state.deployments, "ReplicaSet": state.replicasets,
            "StatefulSet": state.statefulsets, "Job": state.jobs, "DaemonSet": state.daemonsets,
        }
        if kind_name in by_kind:
            return list(by_kind[kind_name].values())
        return self.env.kube.objects(KINDS_BY_NAME[kind_name])

    async def publish_overlays(self) -> None:
        """Evaluate the NodeOverlays now (gate on), so nodes are priced with them before any decision is made
        (``instance_types_by_nodepool`` publishes the evaluation to the simulated cloud)."""
        if self.env.settings.gate("NodeOverlay") and self._state.nodeoverlays:
            await instance_types_by_nodepool(self.env.cloud, self._state, self.env.settings)

    async def sync_nodeclass_status(self) -> None:
        """Write each EC2NodeClass's ``status.capacityReservations`` (and ``CapacityReservationsReady``) as the
        live NodeClass controller does, from what the cloud resolves its selector terms to (drift reads it)."""
        resolve = getattr(self.env.cloud, "reservation_status", None)
        if resolve is None:
            return
        for nodeclass in self.env.kube.objects(KINDS_BY_NAME["EC2NodeClass"]):
            entries = await resolve(nodeclass)
            if entries is None:
                continue
            status = nodeclass.get("status") or {}
            conditions = [c for c in status.get("conditions") or [] if c.get("type") != "CapacityReservationsReady"]
            ready = condition_of(nodeclass, "CapacityReservationsReady")
            current = status.get("capacityReservations", [])
            if current == entries and ready is not None and ready.get("status") == "True":
                continue
            conditions.append({"type": "CapacityReservationsReady", "status": "True",
                               "reason": "CapacityReservationsReady", "message": "",
                               "lastTransitionTime": format_time(self.env.now)})
            await self.env.kube.patch(KINDS_BY_NAME["EC2NodeClass"], nodeclass["metadata"]["name"],
                                      {"status": {"capacityReservations": entries or None,
                                                  "conditions": conditions}}, subresource="status")

    # -- provisioning ---------------------------------------------------------------------------
    async def provision(self, record: dict[str, Any], *, launch_ready: bool) -> None:
        await self.provision_static(record, launch_ready=launch_ready)
        for _ in range(MAX_LAUNCH_RETRIES):
            plan = await self._plan()
            await self._bind(plan.existing, record)
            retry = False
            for planned in plan.nodeclaims:
                outcome = await self._launch_planned(planned, record, launch_ready=launch_ready)
                retry = retry or outcome is None
            self.reasons.update(plan.pending)
            for key in plan.pending:
                self.nominated.pop(key, None)  # no longer planned onto the claim it waited for
            for key, reason in plan.pending.items():
                record["events"].append({"object": f"Pod/{key}", "reason": "FailedScheduling", "message": reason})
            if not retry:
                break

    async def provision_static(self, record: dict[str, Any], *, launch_ready: bool) -> None:
        """Static NodePools (``spec.replicas``, gate StaticCapacity) brought to their replica count: missing
        claims launched (with no pods), surplus ones deleted and drained."""
        state = self.state()
        if not any(pool.is_static for pool in state.nodepools.values()):
            return
        types = await instance_types_by_nodepool(self.env.cloud, state)
        plan = plan_static(state, types, self.env.settings, self.env.now, self.env.names)
        for pool, note in plan.notes:
            record["events"].append({"object": f"NodePool/{pool}", "reason": "StaticCapacityBlocked",
                                     "message": note})
        for planned in plan.create:
            await self._launch_planned(planned, record, launch_ready=launch_ready)
        for name in plan.delete:
            await self.env.kube.delete(NODECLAIM, name)
            record["events"].append({"object": f"NodeClaim/{name}", "reason": "StaticScaleDown",
                                     "message": "deleted: its static NodePool has more nodes than its replicas"})
        if plan.delete:
            await self.drain_out(record)

    async def _plan(self) -> Any:
        types = await instance_types_by_nodepool(self.env.cloud, self.state(), self.env.settings)
        return engine.plan(self.state(), types, self.env.settings, self.env.now, self.env.names)

    async def _launch_planned(self, planned: Any, record: dict[str, Any], *, launch_ready: bool) -> str | None:
        manifest = planned.manifest()
        await self.env.kube.create(manifest)
        claim = self._stored(NODECLAIM, manifest["metadata"]["name"])
        outcome = await launch(self.env.kube, self.env.cloud, claim, self.env.now)
        if outcome.instance is None:
            record["events"].append(
                {"object": f"NodeClaim/{outcome.nodeclaim}", "reason": "InsufficientCapacityError",
                 "message": outcome.error}
            )
            return None
        instance = outcome.instance
        if getattr(self.env.cloud, "price_overlays", None) is not None:  # NodeOverlays price it for the engine
            offering = (instance.instance_type, instance.zone, instance.capacity_type)
            overlaid = self.env.cloud.price_of(*offering, nodepool=planned.nodepool)
            if overlaid is not None:
                instance.price = overlaid
                instance.price_source = self.env.cloud.price_source_of(*offering, nodepool=planned.nodepool)
        record["launched"].append(
            {
                "nodeclaim": planned.name,
                "nodepool": planned.nodepool,
                "node": planned.name,
                "instanceType": instance.instance_type,
                "zone": instance.zone,
                "capacityType": instance.capacity_type,
                "price": instance.price,
                "priceSource": instance.price_source or None,
                "instanceTypeOptions": list(planned.instance_type_options),
                "pods": list(planned.pods),
            }
        )
        record["events"].append(
            {"object": f"NodeClaim/{planned.name}", "reason": "Launched",
             "message": f"launched {instance.instance_type} {instance.capacity_type} in {instance.zone} "
                        f"for {len(planned.pods)} pod(s) at {instance.price} $/h"}
        )
        if not launch_ready:
            self.booting[planned.name] = instance.provider_id
        else:
            await self.boot(planned.name)
        await self._bind({key: planned.name for key in planned.pods}, record)
        return planned.name

    async def boot(self, nodeclaim_name: str) -> None:
        """The simulated kubelet joins, Adze registers and initializes the claim (startup agents done)."""
        claim = self.env.kube.peek(NODECLAIM, nodeclaim_name)
        if claim is None:
            return
        instance = await self.env.cloud.get(claim["status"]["providerID"])
        node = node_for_instance(claim, instance, self.env.now)
        await self.env.kube.create(node)
        await register(self.env.kube, claim, self._stored(NODE, nodeclaim_name), self.env.now)
        # The agents that own startup taints (e.g. a CNI) remove them once they run.
        startup = {(t.get("key"), t.get("effect")) for t in (claim.get("spec") or {}).get("startupTaints") or []}
        current = self._stored(NODE, nodeclaim_name)
        if startup:
            taints = [t for t in current["spec"].get("taints") or [] if (t.get("key"), t.get("effect")) not in startup]
            await self.env.kube.patch(NODE, nodeclaim_name, {"spec": {"taints": taints}})
        await initialize(
            self.env.kube, self._stored(NODECLAIM, nodeclaim_name), self._stored(NODE, nodeclaim_name), self.env.now
        )
        await self.workloads.reconcile()  # DaemonSet pods for the new node

    def _stored(self, kind: Kind, name: str) -> Manifest:
        """An object the simulation has just written (it exists unless something is badly wrong)."""
        found = self.env.kube.peek(kind, name)
        if found is None:
            raise LookupError(f"{kind.kind} {name} vanished from the simulated API server")
        return found

    async def boot_pending_nodes(self, record: dict[str, Any]) -> None:
        for name in list(self.booting):
            del self.booting[name]
            await self.boot(name)
            # kube-scheduler binds the pods nominated for this claim once its Node is Ready.
            nominated = {key: claim for key, claim in self.nominated.items() if claim == name}
            await self._bind(nominated, record)

    async def _bind(self, placements: Mapping[str, str], record: dict[str, Any], *, nominate: bool = True) -> None:
        """kube-scheduler binds pods where Adze planned them, once the target Node exists; a pod planned
        onto a claim that is still launching stays pending, nominated for it. Without ``nominate``
        (kube-scheduler alone, rebinding displaced pods) a pod is only ever bound to a Node that exists: a
        nomination is Karpenter's, made by a provisioning pass that plans every pending pod at once, so two
        partial plans never promise one launching claim more than it holds."""
        for key, node_name in placements.items():
            if not self.env.kube.has(NODE, node_name):
                if not nominate:
                    continue
                self.nominated[key] = node_name
                self.reasons[key] = f"nominated for NodeClaim {node_name}, which is still launching"
                continue
            self.nominated.pop(key, None)
            namespace, _, name = key.partition("/")
            try:
                pod = await self.env.kube.get(POD, name, namespace)
            except NotFoundError:
                continue
            if (pod.get("spec") or {}).get("nodeName"):
                continue
            await self.env.kube.patch_unread(POD, name, {"spec": {"nodeName": node_name}}, namespace)
            await self.env.kube.patch_unread(POD, name, {"status": running_status(self.env.now)}, namespace,
                                             subresource="status")
            record["bound"][key] = node_name
            self.reasons.pop(key, None)
        await self.stamp_pod_events()

    def imply_nodeclasses(self, nodeclasses: list[Manifest]) -> None:
        """EC2NodeClasses the scenario's NodePools name without defining them (``engine.implied_nodeclasses``):
        in the engine's view only; a scenario object of the same name replaces one when applied."""
        for nodeclass in nodeclasses:
            self._state.upsert(nodeclass)

    def count_pod_events(self) -> None:
        """From now on pod changes are pod events (the scenario's starting objects are loaded)."""
        self._pod_events_count = True

    async def stamp_pod_events(self) -> None:
        """Write the ``lastPodEventTime`` stamps due by now (``lifecycle.pod_events``, as live)."""
        claims: dict[str, Any] = {}  # node name -> its NodeClaim, indexed when a stamp is first due (most calls
        # have none, and indexing every claim per bind was O(nodes))

        def live_claim(node: str) -> str | None:
            if not claims:
                claims.update((c.node_name, c) for c in self._state.nodeclaims.values() if c.node_name)
            claim = claims.get(node)
            return None if claim is None or claim.deletion_timestamp is not None else claim.name

        for stamp in self.pod_events.due(self.env.now, live_claim):
            stamped = {"status": {"lastPodEventTime": format_time(stamp.at)}}
            await self.env.kube.patch_unread(NODECLAIM, stamp.nodeclaim, stamped, subresource="status")
            self.pod_events.written(stamp)

    async def settle(self, record: dict[str, Any]) -> None:
        """Let terminations progress; pods they displace are rebound on existing capacity.

        Other pending pods wait for a ``provision`` step, which is where the
        scenario format places binding decisions.
        """
        await self.progress_terminations(record)
        await self.stamp_pod_events()

    async def _plan_existing_only(self) -> dict[str, str]:
        types = await instance_types_by_nodepool(self.env.cloud, self.state(), self.env.settings)
        return engine.bindable(self.state(), types, self.env.settings, self.env.now)

    # -- disruption and termination -------------------------------------------------------------
    async def delete_capacity(self, kind: Kind, name: str, record: dict[str, Any]) -> None:
        """A user deleted a Node or NodeClaim: Adze's termination finalizer drains it first."""
        claim_name = name
        if kind == NODE:
            node = self.env.kube.peek(NODE, name)
            if node is None:
                raise NotFoundError(f"node {name}")
            claim_name = engine.nodeclaim_for_node(self.env.kube, node) or ""
            if not claim_name:
                await self.env.kube.delete(NODE, name)
                return
        await self.env.kube.delete(NODECLAIM, claim_name)
        await self.drain_out(record)

    async def progress_terminations(self, record: dict[str, Any]) -> None:
        """Drive every deleting NodeClaim's termination as far as it can go now."""
        await self._drive_terminations(record)
        if self._awaiting_removal:
            await self._recreate_unowned(dict(self._awaiting_removal), list(self._awaiting_removal))

    async def finish_terminations(self, record: dict[str, Any]) -> None:
        """Drive deleting NodeClaims to the end, as a ``disrupt`` step promises: when only pods that are
        already terminating hold a node, their grace periods elapse in simulated time (the kubelet then
        removes them) and the drain goes on; so does the drain's minimum duration (5 s)."""
        for _ in range(MAX_GRACE_WAITS):
            await self.progress_terminations(record)
            waits = [t for t in (self._grace_ends_on_deleting_nodes(), self._drain_ends_on_deleting_nodes())
                     if t is not None]
            until = min(waits) if waits else None
            if until is None or until <= self.env.now:
                return
            self.env.advance((until - self.env.now).total_seconds())

    async def drain_out(self, record: dict[str, Any]) -> None:
        """Drive terminations as far as they go now, letting simulated time run on only for the drain's
        minimum duration (a node drained within a step is gone at its end, 5 s later on the clock)."""
        for _ in range(MAX_GRACE_WAITS):
            await self.progress_terminations(record)
            until = self._drain_ends_on_deleting_nodes()
            if until is None or until <= self.env.now:
                return
            self.env.advance((until - self.env.now).total_seconds())

    def _drain_ends_on_deleting_nodes(self) -> datetime | None:
        """When the first drain of a still deleting NodeClaim reaches its minimum duration."""
        deleting = {c["metadata"]["name"] for c in self._state.deleting_nodeclaim_manifests()}
        ends = [when for name, when in self._drain_ends.items() if name in deleting]
        return min(ends) if ends else None

    def _grace_ends_on_deleting_nodes(self) -> datetime | None:
        """When the first terminating pod on a deleting NodeClaim's node is due to be gone."""
        nodes = {
            (claim.get("status") or {}).get("nodeName") or claim["metadata"]["name"]
            for claim in self._state.deleting_nodeclaim_manifests()
        }
        ends = [
            pod.deletion_timestamp
            for node in nodes for pod in self._state.pods_on(node) if pod.deletion_timestamp is not None
        ]
        return min(ends) if ends else None

    async def _drive_terminations(self, record: dict[str, Any]) -> None:
        for _ in range(10):
            deleting = self._state.deleting_nodeclaim_manifests()
            if not deleting:
                return
            progressed = displaced = False
            before = self._pods_of_deleting(deleting)
            for claim in deleting:
                result = await self.terminator.step(claim, self.env.now)
                if result.drain_ends_at is not None:
                    self._drain_ends[claim["metadata"]["name"]] = result.drain_ends_at
                else:
                    self._drain_ends.pop(claim["metadata"]["name"], None)
                await self._recreate_unowned(before, result.evicted + result.force_deleted + result.deleted_with_node)
                displaced = displaced or bool(result.evicted or result.force_deleted or result.finished)
                for key in result.evicted:
                    event = {"object": f"Pod/{key}", "reason": "Evicted",
                             "message": f"evicted from {claim['metadata']['name']}"}
                    owner = controller_reference(before.get(key) or {})
                    if owner is not None:  # optional key: the evicted pod's controller, as Kind/name
                        event["owner"] = f"{owner.get('kind')}/{owner.get('name')}"
                    record["events"].append(event)
                for key in result.deleted_with_node:
                    if owned_by_daemonset((before.get(key) or {}).get("metadata")):
                        continue  # DaemonSet pods belong to their node
                    record["events"].append({"object": f"Pod/{key}", "reason": "DeletedWithNode",
                                             "message": f"died with the node of {claim['metadata']['name']} "
                                                        "(not drained: its instance is gone, or the pod "
                                                        "tolerates the disrupted taint)"})
                for message in result.blocked:
                    record["events"].append({"object": f"NodeClaim/{claim['metadata']['name']}",
                                             "reason": "TerminationBlocked", "message": message})
                progressed = progressed or result.progressed
            await self.workloads.reconcile()
            if displaced and self.pending_pods():
                await self._bind(await self._plan_existing_only(), record, nominate=False)
            if not progressed:
                return

    def _pods_of_deleting(self, deleting: list[Manifest]) -> Mapping[str, Manifest]:
        """The manifests of the pods on these deleting NodeClaims' nodes as they are now (what a termination
        step may evict or delete), by "namespace/name"; any other pod as the state has it when asked. The state
        replaces manifests and never edits them, so these stay as they are now; copying every pod's entry
        made each step O(pods in the cluster)."""
        state = self._state
        names: set[str] = set()
        for claim in deleting:
            claim_name = claim["metadata"]["name"]
            names.add((claim.get("status") or {}).get("nodeName") or claim_name)
            node = state.state_node(claim_name)
            if node is not None:
                names.add(node.name)
        kept = {pod.key: manifest for name in sorted(names) for pod in state.pods_on(name)
                if (manifest := state.pod_manifests.get(pod.key)) is not None}
        return ChainMap(kept, state.pod_manifests)

    async def _recreate_unowned(self, before: Mapping[str, Manifest], removed: list[str]) -> None:
        """Evicted pods that no stored workload controls come back pending under the same name (a snapshot's
        pods whose controllers the dump left out: their controller would recreate them)."""
        for key in removed:
            pod = before.get(key)
            if pod is None or self.workloads.controls(pod):
                continue
            metadata = pod["metadata"]
            if await self._exists(POD, metadata["name"], metadata.get("namespace")):
                self._awaiting_removal[key] = pod  # still terminating (grace period): recreate once gone
                continue
            self._awaiting_removal.pop(key, None)
            fresh = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {k: v for k, v in metadata.items()
                             if k in ("name", "namespace", "labels", "annotations", "ownerReferences")},
                "spec": {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"},
                "status": unschedulable_status(self.env.now),
            }
            await create_with_status(self.env.kube, fresh)

    async def _exists(self, kind: Kind, name: str, namespace: str | None) -> bool:
        """Through the API (not ``peek``): a read lets the store finish graceful deletions that are due."""
        try:
            await self.env.kube.get(kind, name, namespace)
        except NotFoundError:
            return False
        return True

    # -- results --------------------------------------------------------------------------------
    def final_summary(self) -> dict[str, Any]:
        pods_by_node: dict[str, list[str]] = {}
        for pod in self.pods():
            node_name = (pod.get("spec") or {}).get("nodeName")
            if node_name and not is_terminal(pod):
                pods_by_node.setdefault(node_name, []).append(manifest_key(pod))
        nodes = []
        total = 0.0
        for node in sorted(self.env.kube.objects(NODE), key=lambda n: n["metadata"]["name"]):
            labels = node["metadata"].get("labels") or {}
            # A managed node group's node says its capacity type in EKS' label: priced as status and plan price it.
            capacity_type = wk.capacity_type_of(labels)
            offering = (labels.get(wk.INSTANCE_TYPE, ""), labels.get(wk.ZONE, ""), capacity_type)
            pool = labels.get(wk.NODEPOOL)
            price = self.env.cloud.price_of(*offering, nodepool=pool)
            source = self.env.cloud.price_source_of(*offering, nodepool=pool) if price is not None else ""
            price = price or 0.0  # the format's rule for nodes without a known offering; priceSource is null
            total += price
            nodes.append(
                {
                    "name": node["metadata"]["name"],
                    "nodepool": labels.get(wk.NODEPOOL),
                    "instanceType": labels.get(wk.INSTANCE_TYPE),
                    "zone": labels.get(wk.ZONE),
                    "capacityType": capacity_type or None,
                    "price": price,
                    "priceSource": source or None,
                    "pods": sorted(pods_by_node.get(node["metadata"]["name"], [])),
                    "managed": wk.NODEPOOL in labels,
                }
            )
        final: dict[str, Any] = {
            "nodes": nodes,
            "pending": sorted(manifest_key(p) for p in self.pending_pods()),
            "costPerHour": round(total, 6),
        }
        sources = pricesource.legend(node["priceSource"] for node in nodes)
        if sources:  # optional key (scenario-format: new keys only): where costPerHour's prices come from
            final["priceSources"] = sources
        return final


__all__ = ["SimulatedCluster"]
