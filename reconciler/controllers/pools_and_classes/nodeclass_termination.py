"""The EC2NodeClass finalizer ``karpenter.k8s.aws/termination``, as Karpenter's node class controller runs it.

Every EC2NodeClass gets the finalizer. A deleted class then stays until

1. no NodeClaim references it (``spec.nodeClassRef``; the NodeClaims of its NodePools are drained and
   their instances terminated by the NodeClaim finalizer first), read from the API server, not the cache,
   right before cleaning up, so a claim created a moment ago still holds the class;
2. the cloud has deleted what it created for the class (AWS: its launch templates and the instance
   profiles managed for it; ``delete_nodeclass_resources``, optional for a cloud);

and only then is the finalizer released. A failed cleanup (or a failed finalizer write) is retried after the
per-class backoff (1 s doubling to 1 min; events and logs say why), so ``pulumi destroy`` cannot leave launch
templates or instance profiles behind while the reconciler runs. A deleting class takes no new launches (its
NodePools are not Ready and the AWS provider refuses).
"""

from __future__ import annotations

from typing import Any

from reconciler.controllers.runtime.backoff import Retries
from reconciler.controllers.runtime.context import ControllerContext, ControllerLog, Wakeup, ref
from reconciler.controllers.runtime.workers import wait_time
from reconciler.kube.api import EC2NODECLASS, NODECLAIM, Manifest, NotFoundError
from reconciler.kube.retry import modify
from reconciler.model.labels import NODECLASS_TERMINATION_FINALIZER
from reconciler.state.store import StateStore

log = ControllerLog("nodeclass.termination")
NODECLASS_GROUP = "karpenter.k8s.aws"


def references(nodeclaim: Manifest, nodeclass: str) -> bool:
    ref_ = ((nodeclaim.get("spec") or {}).get("nodeClassRef")) or {}
    return ref_.get("name") == nodeclass and ref_.get("group", NODECLASS_GROUP) == NODECLASS_GROUP


class NodeClassTermination:
    def __init__(self, ctx: ControllerContext, store: StateStore) -> None:
        self.ctx = ctx
        self.store = store
        self.wake = Wakeup()
        self.retries = Retries(log, ctx.clock.monotonic)  # failed passes, per class
        self._waiting: dict[str, int] = {}  # class -> NodeClaims it was last seen waiting on (log on change)
        store.subscribe(self._on_change)

    def _on_change(self, kind: str, manifest: dict[str, Any], deleted: bool) -> None:
        if kind == "EC2NodeClass" or (kind == "NodeClaim" and deleted):
            self.wake.set()

    async def run(self) -> None:
        while True:
            await self.reconcile_once()
            await self.wake.wait(wait_time(self.ctx.timings.status_interval, self.retries.next_due()))

    async def reconcile_once(self) -> list[str]:
        """One pass over every class; returns the names whose finalizer was released."""
        released = []
        for nodeclass in self.store.manifests("EC2NodeClass"):
            metadata = nodeclass["metadata"]
            name = str(metadata["name"])
            if not self.retries.ready(name):
                continue
            try:
                if not metadata.get("deletionTimestamp"):
                    await self._ensure_finalizer(nodeclass)
                elif NODECLASS_TERMINATION_FINALIZER in (metadata.get("finalizers") or []) and \
                        await self._finalize(nodeclass):
                    released.append(name)
                self.retries.forget(name)
            except NotFoundError:
                continue
            except Exception as err:  # AWS or API trouble: keep the finalizer, retry after the backoff
                self.retries.failure(name, err, "finalizing ec2nodeclass failed; backing off", EC2NodeClass=ref(name))
                if metadata.get("deletionTimestamp"):
                    await self.ctx.event(nodeclass, "Warning", "FailedCleanup",
                                         f"Deleting the EC2NodeClass's cloud resources failed: {err}"[:1024])
        return released

    async def _ensure_finalizer(self, nodeclass: Manifest) -> None:
        name = str(nodeclass["metadata"]["name"])
        if NODECLASS_TERMINATION_FINALIZER in (nodeclass["metadata"].get("finalizers") or []):
            return  # the informer's copy has it: nothing to read or write
        added = False

        def edit(current: Manifest) -> Manifest | None:
            nonlocal added
            metadata = current["metadata"]
            finalizers = list(metadata.get("finalizers") or [])
            # A terminating object may not gain finalizers (the API server forbids it).
            if NODECLASS_TERMINATION_FINALIZER in finalizers or metadata.get("deletionTimestamp"):
                return None
            metadata["finalizers"] = [*finalizers, NODECLASS_TERMINATION_FINALIZER]
            added = True
            return current

        written = await modify(self.ctx.kube, EC2NODECLASS, name, edit, current=nodeclass)
        if added:
            self.store.write_through(written)
            log.info("added finalizer", EC2NodeClass=ref(name), finalizer=NODECLASS_TERMINATION_FINALIZER)

    async def _finalize(self, nodeclass: Manifest) -> bool:
        name = str(nodeclass["metadata"]["name"])
        claims, _ = await self.ctx.kube.list(NODECLAIM)
        holding = sorted(str(c["metadata"]["name"]) for c in claims if references(c, name))
        if holding:
            if self._waiting.get(name) != len(holding):
                self._waiting[name] = len(holding)
                log.info("waiting on nodeclaim termination", EC2NodeClass=ref(name), nodeclaims=len(holding),
                         NodeClaim=ref(holding[0]))
                await self.ctx.event(nodeclass, "Normal", "WaitingOnNodeClaimTermination",
                                     f"Waiting on NodeClaim termination for {', '.join(holding[:5])}"
                                     + (f" and {len(holding) - 5} other(s)" if len(holding) > 5 else ""))
            return False
        self._waiting.pop(name, None)
        cleanup = getattr(self.ctx.cloud, "delete_nodeclass_resources", None)
        deleted: dict[str, list[str]] = dict(await cleanup(nodeclass)) if cleanup is not None else {}
        for kind, names in deleted.items():
            if names:
                log.info(f"deleted {kind}", EC2NodeClass=ref(name), names=names)
        edit_done = await self._release(nodeclass)
        if edit_done:
            log.info("released finalizer", EC2NodeClass=ref(name), finalizer=NODECLASS_TERMINATION_FINALIZER,
                     **{kind: len(names) for kind, names in deleted.items()})
        return edit_done

    async def _release(self, nodeclass: Manifest) -> bool:
        name = str(nodeclass["metadata"]["name"])
        released = False

        def edit(current: Manifest) -> Manifest | None:
            nonlocal released
            finalizers = list(current["metadata"].get("finalizers") or [])
            if NODECLASS_TERMINATION_FINALIZER not in finalizers:
                return None
            current["metadata"]["finalizers"] = [f for f in finalizers if f != NODECLASS_TERMINATION_FINALIZER]
            released = True
            return current

        try:
            await modify(self.ctx.kube, EC2NODECLASS, name, edit, current=nodeclass)
        except NotFoundError:
            return False
        return released
