"""The informer cache drops ``metadata.managedFields`` (as Karpenter's manager does), and that is safe for writes.

Safe means: every write built from a cached object (``kube.retry.modify`` and the list edits of ``kube.edits``,
which write a merge patch of the difference between the copy held and its edited copy) sends exactly what it
sends from the full object, and the object on the server keeps its managedFields and every other field.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from ctrl_harness import Rig, running, wait_for
from ctrl_objects import nodepool

from reconciler.kube import edits
from reconciler.kube.api import NODE, NODECLAIM, Kind, Manifest
from reconciler.kube.memory import MemoryKube
from reconciler.kube.reflector import Reflector, drop_managed_fields
from reconciler.kube.retry import modify
from reconciler.sim.workloads import pending_pod
from reconciler.state.store import StateStore

MANAGED = [
    {"manager": "kube-scheduler", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
     "fieldsV1": {"f:status": {"f:conditions": {}}}},
    {"manager": "kwok", "operation": "Update", "apiVersion": "v1", "subresource": "status", "fieldsType": "FieldsV1",
     "fieldsV1": {"f:status": {"f:phase": {}}}},
]


def with_managed_fields(manifest: Manifest) -> Manifest:
    manifest = copy.deepcopy(manifest)
    manifest["metadata"]["managedFields"] = copy.deepcopy(MANAGED)
    return manifest


def node() -> Manifest:
    return with_managed_fields({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "labels": {"a": "b"}, "finalizers": ["other.io/keep"],
                     "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
        "spec": {"providerID": "aws:///us-east-1a/i-1",
                 "taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Extra", "status": "True"}]},
    })


def nodeclaim() -> Manifest:
    return with_managed_fields({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": "c1", "finalizers": ["karpenter.sh/termination", "other.io/keep"]},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": []},
        "status": {"conditions": [{"type": "Drifted", "status": "True"}, {"type": "Ready", "status": "True"}]},
    })


class Recording:
    """A ``KubeAPI`` that records the patches sent through it."""

    def __init__(self, inner: MemoryKube) -> None:
        self.inner = inner
        self.patches: list[tuple[str, str, Manifest]] = []

    async def get(self, kind: Kind, name: str, namespace: str | None = None) -> Manifest:
        return await self.inner.get(kind, name, namespace)

    async def patch(self, kind: Kind, name: str, patch: Any, namespace: str | None = None,
                    subresource: str | None = None) -> Manifest:
        self.patches.append((kind.kind, name, copy.deepcopy(dict(patch))))
        return await self.inner.patch(kind, name, patch, namespace, subresource)


Edit = Callable[[Any, Manifest], Awaitable[Any]]


def _status_edit(obj: Manifest) -> Manifest:
    obj["status"]["conditions"] = [*obj["status"]["conditions"], {"type": "Initialized", "status": "True"}]
    return obj


EDITS: dict[str, tuple[Kind, Callable[[], Manifest], Edit]] = {
    "add_finalizer": (NODE, node, lambda kube, held: edits.add_finalizer(
        kube, NODE, "n1", "karpenter.sh/termination", current=held)),
    "remove_finalizer": (NODECLAIM, nodeclaim, lambda kube, held: edits.remove_finalizer(
        kube, NODECLAIM, "c1", "karpenter.sh/termination", current=held)),
    "edit_taints": (NODE, node, lambda kube, held: edits.edit_taints(
        kube, "n1", lambda taints: [*taints, {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}],
        current=held)),
    "drop_condition": (NODECLAIM, nodeclaim, lambda kube, held: edits.drop_condition(
        kube, "c1", "Drifted", current=held)),
    "modify_status": (NODECLAIM, nodeclaim, lambda kube, held: modify(
        kube, NODECLAIM, "c1", _status_edit, subresource="status", current=held)),
}


async def _write_from(held_copy: Callable[[Manifest], Manifest], kind: Kind, make: Callable[[], Manifest],
                      edit: Edit) -> tuple[list[tuple[str, str, Manifest]], Manifest]:
    server = MemoryKube(seed=1)
    stored = await server.create(make())
    if kind is NODECLAIM:  # create ignores status (the subresource); put it there as the controllers would
        stored = await server.replace({**stored, "status": make()["status"]}, subresource="status")
    kube = Recording(server)
    await edit(kube, held_copy(copy.deepcopy(stored)))
    return kube.patches, await server.get(kind, make()["metadata"]["name"])


@pytest.mark.parametrize("name", sorted(EDITS))
async def test_a_write_from_the_stripped_cache_copy_sends_what_the_full_copy_sends(name: str) -> None:
    kind, make, edit = EDITS[name]
    full_patches, full_after = await _write_from(lambda held: held, kind, make, edit)
    stripped_patches, stripped_after = await _write_from(drop_managed_fields, kind, make, edit)

    assert full_patches and stripped_patches == full_patches  # the same bytes on the wire
    assert all("managedFields" not in (p.get("metadata") or {}) for _, _, p in stripped_patches)
    assert stripped_after["metadata"]["managedFields"] == MANAGED  # the server's object lost nothing
    assert stripped_after == full_after


def test_drop_managed_fields_removes_only_managed_fields() -> None:
    full = node()
    stripped = drop_managed_fields(copy.deepcopy(full))
    del full["metadata"]["managedFields"]
    assert stripped == full  # annotations (last-applied-configuration included), labels, spec, status kept
    assert drop_managed_fields({"kind": "Event"}) == {"kind": "Event"}  # nothing to drop: unchanged


async def test_reflector_stores_and_delivers_objects_without_managed_fields() -> None:
    server = MemoryKube(seed=1)
    await server.create(node())
    delivered: list[Manifest] = []
    reflector = Reflector(server, NODE, on_upsert=delivered.append, on_delete=delivered.append,
                          transform=drop_managed_fields)
    task = asyncio.create_task(reflector.run())
    try:
        await asyncio.wait_for(reflector.synced.wait(), 30)
        changed = await server.get(NODE, "n1")
        changed["metadata"]["labels"]["changed"] = "yes"
        await server.replace(changed)  # a watch event
        assert await wait_for(lambda: _true(len(delivered) == 2))
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert [m["metadata"]["labels"].get("changed") for m in delivered] == [None, "yes"]
    assert all("managedFields" not in m["metadata"] for m in [*delivered, *reflector.store.values()])
    assert (await server.get(NODE, "n1"))["metadata"]["managedFields"] == MANAGED


def test_write_through_caches_the_answer_without_managed_fields() -> None:
    store = StateStore()
    answer = nodeclaim()
    answer["metadata"]["resourceVersion"] = "5"
    store.write_through(answer)
    held = store.get("NodeClaim", "c1")
    assert held is not None and "managedFields" not in held["metadata"]
    assert held["metadata"]["finalizers"] == ["karpenter.sh/termination", "other.io/keep"]


async def test_live_cache_holds_no_managed_fields_and_writes_keep_them_on_the_server() -> None:
    """The controllers' reflectors drop managedFields; the NodePool's status written from that copy leaves
    the server's managedFields in place."""
    rig = Rig()
    template = {"spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}]}}
    waiting = pending_pod(template, name="p1", namespace="default", now=rig.clock.now())
    await rig.apply(with_managed_fields(nodepool()), with_managed_fields(waiting))
    async with running(rig) as reconciler:
        async def pool_written() -> bool:
            pools = reconciler.store.manifests("NodePool")
            return bool(pools) and bool((pools[0].get("status") or {}).get("conditions"))

        assert await wait_for(pool_written)
        assert await wait_for(lambda: _true(bool(reconciler.store.manifests("Pod"))))
        for kind in ("NodePool", "Pod"):
            assert all("managedFields" not in m["metadata"] for m in reconciler.store.manifests(kind)), kind
    for stored in rig.kube.objects():
        if stored["kind"] in ("NodePool", "Pod"):
            assert stored["metadata"]["managedFields"] == MANAGED, stored["kind"]


async def _true(value: bool) -> bool:
    return value
