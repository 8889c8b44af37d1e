"""MemoryKube's pods-by-node index and structural sharing (issue 14) keep the API server's answers.

A pod list selecting ``spec.nodeName`` reads the index; it must return what a scan of every pod returns,
in the same (store) order, through binds, moves, deletions and re-creations. Writes share unchanged
subtrees with the version before; nothing a caller gets back, and no earlier version a watch replays,
may change because of a later write.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.kube.api import POD
from reconciler.kube.memory import MemoryKube

NODES = ["n1", "n2", "n3"]


def pod(name: str, node: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default",
                                                           "labels": {"app": name[:1]}}, "spec": spec}


async def scanned(kube: MemoryKube, node: str, extra: str = "") -> list[str]:
    items, _ = await kube.list(POD)
    return [p["metadata"]["name"] for p in items if (p.get("spec") or {}).get("nodeName") == node
            and (not extra or p["metadata"]["labels"]["app"] == extra)]


async def indexed(kube: MemoryKube, node: str, extra: str = "") -> list[str]:
    selector = f"spec.nodeName={node}"
    items, _ = await kube.list(POD, field_selector=selector, label_selector=f"app={extra}" if extra else None)
    return [p["metadata"]["name"] for p in items]


OPERATIONS = st.lists(st.tuples(st.sampled_from(["create", "bind", "move", "delete", "evict", "finalize"]),
                                st.integers(0, 7), st.sampled_from(NODES)), max_size=40)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(OPERATIONS)
def test_a_node_selected_pod_list_equals_a_scan_of_every_pod(operations: list[tuple[str, int, str]]) -> None:
    async def run() -> None:
        kube = MemoryKube(seed=1)
        for verb, index, node in operations:
            name = f"{'ab'[index % 2]}{index}"
            exists = kube.peek(POD, name, "default") is not None
            if verb == "create" and not exists:
                await kube.create(pod(name, node if index % 3 else None))
            elif verb in ("bind", "move") and exists:
                await kube.patch(POD, name, {"spec": {"nodeName": node}}, "default")
            elif verb == "delete" and exists:
                await kube.delete(POD, name, "default", grace_period_seconds=30 if index % 2 else None)
            elif verb == "evict" and exists:
                await kube.evict(name, "default")
            elif verb == "finalize" and exists:
                await kube.patch(POD, name, {"metadata": {"finalizers": ["x"] if index % 2 else None}}, "default")
            for candidate in NODES:
                assert await indexed(kube, candidate) == await scanned(kube, candidate)
                assert await indexed(kube, candidate, "a") == await scanned(kube, candidate, "a")
        unbound, _ = await kube.list(POD, field_selector="spec.nodeName=")
        everything, _ = await kube.list(POD)
        assert [p["metadata"]["name"] for p in unbound] == [
            p["metadata"]["name"] for p in everything if not p["spec"].get("nodeName")]

    asyncio.run(run())


def test_writes_leave_earlier_versions_and_returned_copies_as_they_were() -> None:
    async def run() -> None:
        kube = MemoryKube(seed=1)
        seen: list[dict[str, Any]] = []
        kube.subscribe(lambda kind, event: seen.append(event.object), copy=False)
        created = await kube.create(pod("a1", "n1"))
        created["spec"]["containers"][0]["image"] = "changed by the caller"
        await kube.patch(POD, "a1", {"status": {"phase": "Running"}}, "default", subresource="status")
        await kube.patch(POD, "a1", {"spec": {"nodeName": "n2"}}, "default")
        await kube.patch(POD, "a1", {"metadata": {"labels": {"app": "z"}}}, "default")
        await kube.delete(POD, "a1", "default")
        versions = [int(obj["metadata"]["resourceVersion"]) for obj in seen]
        assert versions == sorted(set(versions)), "an earlier stored version's resourceVersion changed"
        assert [obj["spec"].get("nodeName") for obj in seen] == ["n1", "n1", "n2", "n2", "n2"]
        assert [obj["status"].get("phase") for obj in seen] == ["Pending", "Running", "Running", "Running",
                                                                 "Running"]
        assert [obj["metadata"]["labels"]["app"] for obj in seen] == ["a", "a", "a", "z", "z"]
        assert all(obj["spec"]["containers"][0]["image"] == "x" for obj in seen)
        assert [obj["metadata"].get("generation") for obj in seen] == [1, 1, 2, 2, 2]

    asyncio.run(run())


def test_a_shared_load_never_changes_the_manifests_it_was_given() -> None:
    async def run() -> None:
        manifests = [pod(f"a{i}", random.Random(i).choice(NODES)) for i in range(6)]
        before = repr(manifests)
        kube = MemoryKube(seed=1)
        kube.load(manifests, share=True)
        for index in range(6):
            await kube.patch(POD, f"a{index}", {"spec": {"nodeName": "n3"}, "status": {"phase": "Running"}},
                             "default")
            await kube.patch(POD, f"a{index}", {"status": {"phase": "Failed"}}, "default", subresource="status")
        await kube.delete(POD, "a0", "default")
        assert repr(manifests) == before

    asyncio.run(run())


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_clone_is_an_independent_deep_copy(value: Any) -> None:
    import copy

    from reconciler.kube.semantics import clone

    before = copy.deepcopy(value)
    copied = clone(value)
    assert copied == value

    def containers(item: Any) -> list[Any]:
        found = [item] if isinstance(item, dict | list) else []
        members = item.values() if isinstance(item, dict) else item if isinstance(item, list) else []
        return found + [c for member in members for c in containers(member)]

    originals = {id(c) for c in containers(value)}
    assert not any(id(c) in originals for c in containers(copied))  # no container shared with the original
    for found in containers(copied):
        if isinstance(found, dict):
            found["new"] = 1
        else:
            found.append(1)
    assert value == before


scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3)


@settings(max_examples=100, deadline=None)
@given(st.lists(scalars, min_size=10, max_size=40), st.integers(0, 40), st.booleans())
def test_clone_copies_the_containers_in_long_lists(values: list[Any], place: int, nested: bool) -> None:
    """Long lists are checked for containers by C-level loops: one container anywhere is still copied."""
    from reconciler.kube.semantics import clone

    value = list(values)
    if nested:
        value.insert(min(place, len(value)), {"key": ["x"]})
    copied = clone(value)
    assert copied == value and copied is not value
    for original, copy_ in zip(value, copied, strict=True):
        assert copy_ is original if not isinstance(original, dict) else copy_ is not original


def test_an_unread_patch_writes_what_a_patch_writes() -> None:
    """``patch_unread`` (the simulator's writes whose result nobody reads) stores, versions and announces the same
    object as ``patch``, and hands nothing back."""

    async def run() -> None:
        kubes = [MemoryKube(seed=1), MemoryKube(seed=1)]
        events: list[list[Any]] = [[], []]
        for kube, seen in zip(kubes, events, strict=True):
            kube.subscribe(lambda kind, event, seen=seen: seen.append((event.type, event.object)))
            await kube.create(pod("a", None))
        writes = [({"spec": {"nodeName": "n1"}}, None), ({"status": {"phase": "Running"}}, "status"),
                  ({"metadata": {"labels": {"app": "b"}}}, None), ({"status": {"phase": "Running"}}, "status")]
        for patch, subresource in writes:
            returned = await kubes[0].patch(POD, "a", patch, "default", subresource=subresource)
            assert await kubes[1].patch_unread(POD, "a", patch, "default", subresource=subresource) is None
            assert kubes[1].peek(POD, "a") == returned
        assert events[0] == events[1] and kubes[0].resource_version == kubes[1].resource_version

    asyncio.run(run())
