"""Status of NodePools (resources, nodes, conditions, usage/limit metrics) and EC2NodeClasses.

EC2NodeClass: providers that resolve node classes (AWS: subnets, security
groups, AMIs, instance profile) report the status through an optional
``nodeclass_status(nodeclass)`` method; for a provider without one (the
simulated cloud) an existing node class is simply Ready. Refreshed every
``nodeclass_refresh`` seconds and whenever its spec changes.

NodePool: ``ValidationSucceeded`` (the manifest passes the API model),
``NodeClassReady`` (its EC2NodeClass exists and is Ready), ``Ready`` (the root
over both, ``lifecycle.conditions``) and ``NodeRegistrationHealthy`` (Unknown
again whenever the pool or its EC2NodeClass changes; True/False from the
lifecycle's ``RegistrationHealth``), plus ``resources`` (summed capacity of its
nodes and in-flight claims, with ``nodes``) and ``nodes``. A pool that is not
Ready is not provisioned from.

Every status write (both kinds) happens only when something changed, is computed against the object as
the informer holds it and sent guarded by its resourceVersion, and merges only the conditions this
controller owns into the list as it stands: a condition another writer added meanwhile is kept (a 409 reads
the object and merges again). A failed write is retried after the per-object backoff.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.api.errors import ValidationFailure
from reconciler.api.objects import parse_object
from reconciler.controllers.pools_and_classes.registration_health import NODE_REGISTRATION_HEALTHY, RegistrationHealth
from reconciler.controllers.runtime.backoff import Retries
from reconciler.controllers.runtime.context import ControllerContext, ControllerLog, Wakeup, ref
from reconciler.controllers.runtime.workers import wait_time
from reconciler.kube.api import EC2NODECLASS, NODEPOOL, ApiError, NotFoundError
from reconciler.kube.retry import modify
from reconciler.model.conditions import (
    NODEPOOL_DEPENDENTS,
    condition,
    condition_of,
    is_true,
    make,
    merged_conditions,
    with_root,
)
from reconciler.model.meta import format_time
from reconciler.model.quantity import parse_quantity
from reconciler.state.store import StateStore

log = ControllerLog("status")


def _condition_view(status: Mapping[str, Any]) -> dict[str, tuple[str, str, str, Any]]:
    return {
        c.get("type", ""): (c.get("status", ""), c.get("reason", ""), c.get("message", ""), c.get("observedGeneration"))
        for c in status.get("conditions") or []
    }


def _differs(current: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    for key, value in desired.items():
        if key == "conditions":
            if _condition_view(current) != _condition_view(desired):
                return True
        elif current.get(key) != value:
            return True
    return False


class StatusController:
    def __init__(self, ctx: ControllerContext, store: StateStore, health: RegistrationHealth | None = None) -> None:
        self.ctx = ctx
        self.store = store
        self.health = health or RegistrationHealth(ctx, store)
        self.wake = Wakeup()
        self.retries = Retries(log, ctx.clock.monotonic)  # failed status writes, per object
        self._nodeclass_seen: dict[str, tuple[int, float]] = {}  # name -> (generation, monotonic refresh time)
        store.subscribe(self._on_change)

    def _on_change(self, kind: str, manifest: dict[str, Any], deleted: bool) -> None:
        if kind in ("NodePool", "EC2NodeClass", "NodeClaim"):
            self.wake.set()

    async def run(self) -> None:
        while True:
            async with self.ctx.reconciling():
                await self.reconcile_once()
            await self.wake.wait(wait_time(self.ctx.timings.status_interval, self.retries.next_due()))

    async def reconcile_once(self) -> None:
        await self.nodeclasses_once()
        await self.nodepools_once()

    # -- EC2NodeClass --------------------------------------------------------------------------------

    async def nodeclasses_once(self, *, force: bool = False) -> None:
        now_mono = self.ctx.clock.monotonic()
        for nodeclass in self.store.manifests("EC2NodeClass"):
            metadata = nodeclass["metadata"]
            if metadata.get("deletionTimestamp"):
                continue
            name, generation = metadata["name"], int(metadata.get("generation") or 0)
            seen = self._nodeclass_seen.get(name)
            due = seen is None or seen[0] != generation or now_mono - seen[1] >= self.ctx.timings.nodeclass_refresh
            if not (due or force):
                continue
            if not self.retries.ready(f"EC2NodeClass/{name}"):
                continue
            self._nodeclass_seen[name] = (generation, now_mono)
            desired = await self._nodeclass_status(nodeclass)
            try:
                patched = await self._write_nodeclass_status(nodeclass, desired)
            except NotFoundError:
                continue
            except ApiError as err:
                self._nodeclass_seen.pop(name, None)  # refreshed again once the backoff allows, not in a minute
                self.retries.failure(f"EC2NodeClass/{name}", err, "updating EC2NodeClass status failed; backing off",
                                     EC2NodeClass=ref(name))
                continue
            self.retries.forget(f"EC2NodeClass/{name}")
            if patched is None:
                continue
            self.store.write_through(patched)  # NodePool readiness below must see it
            ready: Mapping[str, Any] = condition_of(patched, "Ready") or {}
            log.info("updated ec2nodeclass status", EC2NodeClass=ref(name), ready=ready.get("status"),
                     detail=ready.get("message", ""))
            await self.ctx.event(nodeclass, "Normal" if ready.get("status") == "True" else "Warning",
                                 "Ready" if ready.get("status") == "True" else "NotReady",
                                 ready.get("message") or f"Status condition transitioned, Type: Ready, "
                                                         f"Status: {ready.get('status')}")

    async def _write_nodeclass_status(
        self, nodeclass: dict[str, Any], desired: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Write the resolved status onto the class as stored: the fields we own replaced, our conditions merged
        into the conditions as they are at write time (another writer's condition stays), guarded by the
        resourceVersion (a 409 re-reads and merges again). The class as stored, or None when nothing changed."""
        owned = list(desired.get("conditions") or [])
        wrote = False

        def edit(current: dict[str, Any]) -> dict[str, Any] | None:
            nonlocal wrote
            wanted = {**desired, "conditions": merged_conditions(current, *owned)}
            if not _differs(current.get("status") or {}, wanted):
                wrote = False
                return None
            current["status"] = {**(current.get("status") or {}), **wanted}
            wrote = True
            return current

        stored = await modify(self.ctx.kube, EC2NODECLASS, str(nodeclass["metadata"]["name"]), edit,
                              subresource="status", current=nodeclass)
        return stored if wrote else None

    async def _nodeclass_status(self, nodeclass: dict[str, Any]) -> dict[str, Any]:
        now = self.ctx.now()
        resolver = getattr(self.ctx.cloud, "nodeclass_status", None)
        if resolver is None:
            return {"conditions": [condition("Ready", True, now, reason="Ready")]}
        try:
            status = dict(await resolver(nodeclass))
        except Exception as err:  # an AWS outage marks the class not ready instead of crashing
            return {"conditions": [condition("Ready", False, now, reason="ResolutionFailed", message=str(err)[:1024])]}
        return status

    # -- NodePool ------------------------------------------------------------------------------------

    async def nodepools_once(self) -> None:
        pools = self.store.manifests("NodePool")
        self._export_metrics(pools)
        for pool in pools:
            name = pool["metadata"]["name"]
            self.health.hydrate(pool)
            desired = self.nodepool_status(pool)
            if not _differs(pool.get("status") or {}, desired) or not self.retries.ready(f"NodePool/{name}"):
                continue

            def edit(current: dict[str, Any]) -> dict[str, Any] | None:
                wanted = self.nodepool_status(current)
                if not _differs(current.get("status") or {}, wanted):
                    return None
                current["status"] = {**(current.get("status") or {}), **wanted}
                return current

            try:
                self.store.write_through(await modify(self.ctx.kube, NODEPOOL, name, edit, subresource="status",
                                                      current=pool))
            except NotFoundError:
                continue
            except ApiError as err:
                self.retries.failure(f"NodePool/{name}", err, "updating NodePool status failed; backing off",
                                     NodePool=ref(name))
                continue
            self.retries.forget(f"NodePool/{name}")
            before = _condition_view(pool.get("status") or {}).get("Ready")
            after = _condition_view(desired).get("Ready")
            if before != after and after is not None:
                log.info("nodepool readiness changed", NodePool=ref(name), ready=after[0], reason=after[1],
                         detail=after[2])
                await self.ctx.event(pool, "Normal" if after[0] == "True" else "Warning",
                                     "Ready" if after[0] == "True" else "NotReady", after[2] or after[1])

    def nodepool_status(self, pool: dict[str, Any]) -> dict[str, Any]:
        now = self.ctx.now()
        name = pool["metadata"]["name"]
        usage = self.store.state.nodepool_usage(name).to_manifest()
        nodes = self.store.state.nodepool_node_counts().get(name, 0)
        problems = ""
        try:
            parse_object(pool)
        except ValidationFailure as err:
            problems = str(err)
        ref_name = str(((((pool.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeClassRef")
                        or {}).get("name", ""))
        nodeclass = self.store.get("EC2NodeClass", ref_name)
        if nodeclass is None:
            class_ready, class_message = False, f"EC2NodeClass {ref_name!r} not found"
        elif nodeclass["metadata"].get("deletionTimestamp"):
            class_ready, class_message = False, f"EC2NodeClass {ref_name!r} is being deleted"
        elif not is_true(nodeclass, "Ready"):
            class_ready, class_message = False, f"EC2NodeClass {ref_name!r} is not Ready"
        else:
            class_ready, class_message = True, ""
        valid = not problems
        updates = [
            condition("ValidationSucceeded", valid, now, reason="ValidationSucceeded" if valid else "ValidationFailed",
                      message=problems[:1024]),
            condition("NodeClassReady", class_ready, now,
                      reason="NodeClassReady" if class_ready else "NodeClassNotReady", message=class_message),
        ]
        class_generation = int(nodeclass["metadata"].get("generation") or 0) if nodeclass is not None else None
        health = self._registration_health(pool, class_generation, format_time(now))
        if health is not None:
            updates.append(health)
        conditions = with_root(merged_conditions(pool, *updates), NODEPOOL_DEPENDENTS, format_time(now))
        status: dict[str, Any] = {"resources": usage, "nodes": nodes, "conditions": conditions}
        if class_generation is not None:
            status["nodeClassObservedGeneration"] = class_generation
        return status

    def _registration_health(self, pool: Mapping[str, Any], class_generation: int | None,
                             stamp: str) -> dict[str, Any] | None:
        """NodeRegistrationHealthy back to Unknown (the record cleared) when it is missing or the pool or its
        EC2NodeClass has a new generation since it was set; None keeps the condition as it is."""
        found = condition_of(pool, NODE_REGISTRATION_HEALTHY)
        generation = int((pool.get("metadata") or {}).get("generation") or 0)
        observed_class = (pool.get("status") or {}).get("nodeClassObservedGeneration")
        changed = (class_generation is not None and observed_class is not None and observed_class != class_generation)
        if found is not None and not changed and int(found.get("observedGeneration") or 0) == generation:
            return None
        self.health.reset(str((pool.get("metadata") or {}).get("uid") or (pool.get("metadata") or {}).get("name")))
        return {**make(NODE_REGISTRATION_HEALTHY, "Unknown", stamp), "observedGeneration": generation}

    def _export_metrics(self, pools: list[dict[str, Any]]) -> None:
        """Usage and limits per pool as Karpenter's nodepool metrics controller reports them (resource names
        snake_case; a deleted pool's series go with it)."""
        state = self.store.state
        usage: dict[str, list[tuple[dict[str, str], float]]] = {}
        limits: dict[str, list[tuple[dict[str, str], float]]] = {}
        for pool in pools:
            name = str(pool["metadata"]["name"])
            usage[name] = [({"nodepool": name, "resource_type": resource_label(k)}, _number(v))
                           for k, v in state.nodepool_usage(name).to_manifest().items()]
            limits[name] = [({"nodepool": name, "resource_type": resource_label(k)}, _number(str(v)))
                            for k, v in (((pool.get("spec") or {}).get("limits")) or {}).items()]
        self.ctx.metrics.nodepool_usage.replace_all(usage)
        self.ctx.metrics.nodepool_limit.replace_all(limits)


def resource_label(resource: str) -> str:
    """A resource name as Karpenter's metrics write it: lower case, ``-`` -> ``_`` (``ephemeral_storage``)."""
    return resource.lower().replace("-", "_")


def _number(quantity: str) -> float:
    try:
        return parse_quantity(quantity) / 1000.0
    except ValueError:
        return 0.0

