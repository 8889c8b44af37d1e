"""List fields written by Adze survive another writer (issue 16: lost writes).

A proxy API lets a second writer change the object right after Adze reads it. Registration, the
termination finalizer and NodeClaim conditions must keep what that writer added (the node lifecycle
controller's not-ready taint, a third-party finalizer, another controller's condition): the write is
guarded by the read resourceVersion and retried on 409, as Karpenter's optimistic locking is."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from reconciler.kube.api import NODE, NODECLAIM, Kind
from reconciler.kube.edits import remove_finalizer
from reconciler.kube.memory import MemoryKube
from reconciler.lifecycle.conditions import set_condition
from reconciler.lifecycle.launch import register
from reconciler.model import labels as wk
from reconciler.model.conditions import condition

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class RacingKube:
    """Delegates to a MemoryKube; after the first read of (kind, name) another writer acts."""

    def __init__(self, kube: MemoryKube, kind: Kind, name: str, interfere: Callable[[], Awaitable[None]]) -> None:
        self._kube, self._target, self._interfere, self.raced = kube, (kind.kind, name), interfere, False

    async def get(self, kind: Kind, name: str, namespace: str | None = None) -> Any:
        found = await self._kube.get(kind, name, namespace)
        if not self.raced and (kind.kind, name) == self._target:
            self.raced = True
            await self._interfere()
        return found

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._kube, attribute)


def node(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "finalizers": []}, "spec": spec}


def nodeclaim(name: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {wk.NODEPOOL: "default"}},
            "spec": {"taints": [{"key": "team", "value": "a", "effect": "NoSchedule"}]},
            "status": {"conditions": []}}


async def _add(kube: MemoryKube, name: str, *, taint: dict[str, str] | None = None, finalizer: str = "") -> None:
    current = await kube.get(NODE, name)
    if taint:
        await kube.patch(NODE, name, {"spec": {"taints": [*(current["spec"].get("taints") or []), taint]}})
    if finalizer:
        await kube.patch(NODE, name, {"metadata": {"finalizers": [*(current["metadata"].get("finalizers") or []),
                                                                  finalizer]}})


async def test_registration_keeps_a_taint_and_a_finalizer_added_meanwhile() -> None:
    kube = MemoryKube()
    kube.load([node("n1", taints=[{"key": wk.UNREGISTERED_TAINT_KEY, "effect": "NoExecute"}]), nodeclaim("c1")])
    not_ready = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}

    async def lifecycle_controller() -> None:
        await _add(kube, "n1", taint=not_ready, finalizer="example.com/protect")

    stale_node = await kube.get(NODE, "n1")  # the copy registration is handed (e.g. the informer's)
    await lifecycle_controller()
    await register(kube, nodeclaim("c1"), stale_node, NOW)

    stored = await kube.get(NODE, "n1")
    keys = [t["key"] for t in stored["spec"]["taints"]]
    assert keys == ["node.kubernetes.io/not-ready", "team"]  # unregistered taint gone, the other kept
    assert stored["metadata"]["finalizers"] == ["example.com/protect", wk.TERMINATION_FINALIZER]
    assert stored["metadata"]["labels"][wk.REGISTERED] == "true"


async def test_removing_our_finalizer_keeps_one_added_meanwhile() -> None:
    kube = MemoryKube()
    kube.load([{**node("n1"), "metadata": {"name": "n1", "finalizers": [wk.TERMINATION_FINALIZER, "a.io/x"]}}])

    async def other() -> None:
        await _add(kube, "n1", finalizer="b.io/late")

    await remove_finalizer(RacingKube(kube, NODE, "n1", other), NODE, "n1", wk.TERMINATION_FINALIZER)  # type: ignore[arg-type]
    assert (await kube.get(NODE, "n1"))["metadata"]["finalizers"] == ["a.io/x", "b.io/late"]


async def test_a_condition_set_meanwhile_by_another_controller_stays() -> None:
    kube = MemoryKube()
    kube.load([nodeclaim("c1")])

    async def other() -> None:
        await set_condition(kube, "c1", condition("Initialized", True, NOW))

    await set_condition(RacingKube(kube, NODECLAIM, "c1", other), "c1", condition("Registered", True, NOW))  # type: ignore[arg-type]
    types = [c["type"] for c in (await kube.get(NODECLAIM, "c1"))["status"]["conditions"]]
    assert {"Initialized", "Registered"} <= set(types)  # (plus Ready and its other dependents, as Unknown)
