"""Fields Adze does not implement, reported on the objects that set them (``reconciler.api.support``).

A NodePool, NodeClaim or EC2NodeClass setting a field Adze does not act on (or one behind a feature gate that
is off) gets the condition ``FieldsSupported=False`` (reason ``UnsupportedField``, the fields and why in the
message), a Warning event and a log line, once per change of what it sets; once it no longer sets any, the
condition turns True. Nothing else changes: the object is still used as far as Adze implements it. Objects
are looked at when the informer cache sees them change.
"""

from __future__ import annotations

from typing import Any

from reconciler.api.support_check import CONDITION, REASON, Finding, condition_message, unsupported_fields
from reconciler.controllers.runtime.context import ControllerContext, ControllerLog, Wakeup, ref
from reconciler.kube.api import EC2NODECLASS, NODECLAIM, NODEPOOL, ApiError, Kind, NotFoundError
from reconciler.kube.retry import modify
from reconciler.model.conditions import condition, condition_of, merged_conditions
from reconciler.state.store import StateStore

log = ControllerLog("fields.support")
KINDS: dict[str, Kind] = {"NodePool": NODEPOOL, "NodeClaim": NODECLAIM, "EC2NodeClass": EC2NODECLASS}


class FieldSupportController:
    def __init__(self, ctx: ControllerContext, store: StateStore) -> None:
        self.ctx = ctx
        self.store = store
        self.wake = Wakeup()
        self._dirty: set[tuple[str, str]] = set()
        store.subscribe(self._on_change)

    def _on_change(self, kind: str, manifest: dict[str, Any], deleted: bool) -> None:
        if kind not in KINDS:
            return
        key = (kind, str((manifest.get("metadata") or {}).get("name", "")))
        if deleted:
            self._dirty.discard(key)
        else:
            self._dirty.add(key)
            self.wake.set()

    async def run(self) -> None:
        for kind in KINDS:  # everything the cache holds at start-up, then what changes
            self._dirty.update((kind, str(m["metadata"]["name"])) for m in self.store.manifests(kind))
        while True:
            async with self.ctx.reconciling():
                await self.reconcile_once()
            await self.wake.wait(None)

    async def reconcile_once(self) -> dict[tuple[str, str], list[Finding]]:
        dirty, self._dirty = self._dirty, set()
        reported = {}
        for kind, name in sorted(dirty):
            manifest = self.store.get(kind, name)
            if manifest is None or (manifest.get("metadata") or {}).get("deletionTimestamp"):
                continue
            findings = unsupported_fields(manifest, self.ctx.settings.feature_gates)
            reported[(kind, name)] = findings
            await self._report(kind, name, manifest, findings)
        return reported

    async def _report(self, kind: str, name: str, manifest: dict[str, Any], findings: list[Finding]) -> None:
        current = condition_of(manifest, CONDITION) or {}
        now = self.ctx.now()
        if findings:
            desired = condition(CONDITION, False, now, reason=REASON, message=condition_message(findings))
        elif current and current.get("status") != "True":
            desired = condition(CONDITION, True, now, reason=CONDITION,
                                message="every field set is implemented by Adze")
        else:
            return
        if current.get("status") == desired["status"] and current.get("message") == desired["message"]:
            return

        def edit(stored: dict[str, Any]) -> dict[str, Any]:
            stored["status"] = {**(stored.get("status") or {}), "conditions": merged_conditions(stored, desired)}
            return stored

        try:
            await modify(self.ctx.kube, KINDS[kind], name, edit, subresource="status")
        except (NotFoundError, ApiError) as err:
            log.warning("updating the FieldsSupported condition failed", **{kind: ref(name)}, error=str(err))
            return
        if findings:
            log.warning("object sets fields Adze does not implement", **{kind: ref(name)},
                        fields=[f.path for f in findings], detail=desired["message"])
            await self.ctx.event(manifest, "Warning", REASON, desired["message"][:1024])
        else:
            log.info("object no longer sets fields Adze does not implement", **{kind: ref(name)})
