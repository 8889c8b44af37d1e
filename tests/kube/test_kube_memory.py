"""MemoryKube: the in-process cluster keeps the API server's semantics."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from support.timescale import scaled

from reconciler.kube.api import (
    LEASE,
    NODE,
    NODECLAIM,
    PDB,
    POD,
    ApiError,
    ConflictError,
    ForbiddenError,
    GoneError,
    NotFoundError,
    TooManyRequestsError,
    WatchEvent,
)
from reconciler.kube.memory import MemoryKube


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def nodeclaim(name: str, **spec: object) -> dict:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}, **spec},
        "status": {"providerID": "should-be-dropped"},
    }


def pod(name: str, labels: dict[str, str] | None = None, *, node: str = "", ready: bool = True) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "apps", "labels": labels or {"app": "web"}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "nginx"}]},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pdb(name: str, **spec: object) -> dict:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "apps"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
    }


async def test_create_assigns_identity_from_the_injected_clock() -> None:
    clock = Clock()
    kube = MemoryKube(clock, seed=1)
    created = await kube.create(nodeclaim("a"))
    meta = created["metadata"]
    assert meta["creationTimestamp"] == "2026-01-01T00:00:00Z"
    assert meta["generation"] == 1
    assert len(meta["uid"]) == 36
    assert "namespace" not in meta
    assert "status" not in created, "a CRD with a status subresource drops status on create"
    assert MemoryKube(clock, seed=1).resource_version == "0"
    again = MemoryKube(clock, seed=1)
    assert (await again.create(nodeclaim("a")))["metadata"]["uid"] == meta["uid"], (
        "seeded uids are reproducible"
    )


async def test_nothing_new_is_admitted_into_a_namespace_being_deleted() -> None:
    """NamespaceLifecycle: 403 for a create in a terminating namespace; an active one, or one the store does not
    hold (most tests never create Namespaces), admits; cluster-scoped kinds are unaffected."""
    kube = MemoryKube(clock=Clock())
    kube.load([{"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "apps", "deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["kubernetes"]}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "live"}}])
    with pytest.raises(ForbiddenError) as refused:
        await kube.create(pod("web-1"))
    assert refused.value.status == 403 and "apps because it is being terminated" in refused.value.message
    assert not kube.has(POD, "web-1", "apps")
    await kube.create({**pod("web-2"), "metadata": {"name": "web-2", "namespace": "live"}})
    await kube.create({**pod("web-3"), "metadata": {"name": "web-3", "namespace": "elsewhere"}})
    await kube.create(nodeclaim("c1"))


async def test_resource_versions_increase_and_stale_replace_conflicts() -> None:
    kube = MemoryKube()
    first = await kube.create(nodeclaim("a"))
    with pytest.raises(ConflictError) as duplicate:
        await kube.create(nodeclaim("a"))
    assert duplicate.value.reason == "AlreadyExists"
    changed = dict(first, spec={**first["spec"], "expireAfter": "720h"})
    second = await kube.replace(changed)
    assert int(second["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    assert second["metadata"]["generation"] == 2
    with pytest.raises(ConflictError, match="the object has been modified"):
        await kube.replace(changed)  # still carries the first resourceVersion
    unconditional = dict(second)
    unconditional["metadata"] = {k: v for k, v in second["metadata"].items() if k != "resourceVersion"}
    unconditional["metadata"]["labels"] = {"x": "y"}
    third = await kube.replace(unconditional)
    assert third["metadata"]["generation"] == 2, "metadata changes do not bump generation"
    assert third["metadata"]["uid"] == first["metadata"]["uid"]


async def test_noop_write_keeps_resource_version() -> None:
    kube = MemoryKube()
    created = await kube.create(nodeclaim("a"))
    same = await kube.patch(NODECLAIM, "a", {"metadata": {"labels": {"karpenter.sh/nodepool": "default"}}})
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_merge_patch_and_status_subresource_are_separate() -> None:
    kube = MemoryKube()
    await kube.create(nodeclaim("a"))
    patched = await kube.patch(
        NODECLAIM, "a", {"metadata": {"labels": {"karpenter.sh/nodepool": None, "k": "v"}}}
    )
    assert patched["metadata"]["labels"] == {"k": "v"}
    ignored = await kube.patch(NODECLAIM, "a", {"status": {"providerID": "aws:///x"}})
    assert "status" not in ignored, "the main resource ignores status"
    status = await kube.patch(
        NODECLAIM, "a", {"status": {"providerID": "aws:///x"}, "spec": {"taints": []}}, subresource="status"
    )
    assert status["status"] == {"providerID": "aws:///x"}
    assert "taints" not in status["spec"], "the status subresource ignores spec"
    with pytest.raises(ConflictError):
        await kube.patch(
            NODECLAIM, "a", {"metadata": {"resourceVersion": "1"}, "spec": {"expireAfter": "1h"}}
        )
    with pytest.raises(NotFoundError, match=r'nodeclaims\.karpenter\.sh "nope" not found'):
        await kube.patch(NODECLAIM, "nope", {"spec": {}})


async def test_finalizers_keep_a_deleted_object_until_released() -> None:
    clock = Clock()
    kube = MemoryKube(clock)
    claim = nodeclaim("a")
    claim["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    await kube.create(claim)
    clock.now += timedelta(minutes=3)
    await kube.delete(NODECLAIM, "a")
    terminating = await kube.get(NODECLAIM, "a")
    assert terminating["metadata"]["deletionTimestamp"] == "2026-01-01T00:03:00Z"
    with pytest.raises(ApiError, match="no new finalizers"):
        await kube.patch(NODECLAIM, "a", {"metadata": {"finalizers": ["karpenter.sh/termination", "other"]}})
    await kube.delete(NODECLAIM, "a")  # repeated delete is harmless
    await kube.patch(NODECLAIM, "a", {"metadata": {"finalizers": None}})
    with pytest.raises(NotFoundError):
        await kube.get(NODECLAIM, "a")
    with pytest.raises(NotFoundError):
        await kube.delete(NODECLAIM, "a")


async def test_label_and_field_selectors_on_list() -> None:
    kube = MemoryKube()
    await kube.create(pod("a", {"app": "web", "tier": "front"}, node="n1"))
    await kube.create(pod("b", {"app": "web", "tier": "back"}, node="n2"))
    await kube.create(pod("c", {"app": "db"}, node="n1"))

    async def names(**selectors: str) -> list[str]:
        items, _ = await kube.list(POD, "apps", **selectors)
        return sorted(item["metadata"]["name"] for item in items)

    assert await names(label_selector="app=web") == ["a", "b"]
    assert await names(label_selector="app=web,tier notin (back)") == ["a"]
    assert await names(label_selector="tier in (front, back)") == ["a", "b"]
    assert await names(label_selector="!tier") == ["c"]
    assert await names(label_selector="app!=web") == ["c"]
    assert await names(field_selector="spec.nodeName=n1") == ["a", "c"]
    assert await names(field_selector="spec.nodeName=n1,metadata.name!=a") == ["c"]
    assert (await kube.list(POD, "elsewhere"))[0] == []
    with pytest.raises(ApiError) as bad:
        await kube.list(POD, label_selector="app in web")
    assert bad.value.status == 400


async def collect(stream: object, count: int) -> list[WatchEvent]:
    events: list[WatchEvent] = []
    async for event in stream:  # type: ignore[attr-defined]
        events.append(event)
        if len(events) == count:
            break
    return events


async def test_watch_replays_from_a_resource_version_and_follows_live_writes() -> None:
    kube = MemoryKube()
    await kube.create(nodeclaim("a"))
    _, list_version = await kube.list(NODECLAIM)
    await kube.create(nodeclaim("b"))
    await kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}})
    watcher = asyncio.create_task(collect(kube.watch(NODECLAIM, list_version), 3))
    await asyncio.sleep(0)
    await kube.patch(NODECLAIM, "b", {"metadata": {"labels": {"x": "1"}}})
    await kube.delete(NODECLAIM, "a")
    events = await asyncio.wait_for(watcher, scaled(2))
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [
        ("ADDED", "b"),
        ("MODIFIED", "b"),
        ("DELETED", "a"),
    ]
    versions = [int(e.object["metadata"]["resourceVersion"]) for e in events]
    assert versions == sorted(versions)


async def test_selector_watch_reports_objects_leaving_and_entering_the_selection() -> None:
    kube = MemoryKube()
    await kube.create(pod("a", {"app": "web"}))
    _, version = await kube.list(POD)
    stream = kube.watch(POD, version, "apps", label_selector="app=web")
    watcher = asyncio.create_task(collect(stream, 2))
    await asyncio.sleep(0)
    await kube.patch(POD, "a", {"metadata": {"labels": {"app": "other"}}}, namespace="apps")
    await kube.patch(POD, "a", {"metadata": {"labels": {"app": "web"}}}, namespace="apps")
    assert [e.type for e in await asyncio.wait_for(watcher, scaled(2))] == ["DELETED", "ADDED"]


async def test_watch_from_a_compacted_version_is_gone() -> None:
    kube = MemoryKube(history=2)
    await kube.create(nodeclaim("a"))
    for index in range(6):
        await kube.patch(NODECLAIM, "a", {"metadata": {"labels": {"i": str(index)}}})
    with pytest.raises(GoneError):
        await collect(kube.watch(NODECLAIM, "1"), 1)
    kube.compact()
    with pytest.raises(GoneError):
        await collect(kube.watch(NODECLAIM, "6"), 1)
    current = kube.resource_version
    watcher = asyncio.create_task(collect(kube.watch(NODECLAIM, current), 1))
    await asyncio.sleep(0)
    kube.break_watches(gone=True)
    with pytest.raises(GoneError):
        await asyncio.wait_for(watcher, scaled(2))


async def test_watch_without_version_starts_with_the_current_state() -> None:
    kube = MemoryKube()
    await kube.create(nodeclaim("a"))
    events = await collect(kube.watch(NODECLAIM, ""), 1)
    assert events[0].type == "ADDED"
    assert events[0].object["metadata"]["name"] == "a"


async def test_eviction_respects_pod_disruption_budgets() -> None:
    kube = MemoryKube()
    for name in ("a", "b", "c"):
        await kube.create(pod(name))
        await kube.patch(POD, name, {"status": pod(name)["status"]}, "apps", subresource="status")
    await kube.create(pdb("web", minAvailable=2))
    await kube.evict("a", "apps")
    with pytest.raises(TooManyRequestsError, match="needs 2 healthy pods and has 2 currently"):
        await kube.evict("b", "apps")
    assert len((await kube.list(POD, "apps"))[0]) == 2


async def test_eviction_with_percentages_and_unhealthy_pods() -> None:
    kube = MemoryKube()
    kube.load([pod("a"), pod("b"), pod("sick", ready=False), pdb("web", maxUnavailable="0%")])
    with pytest.raises(TooManyRequestsError):
        await kube.evict("a", "apps")
    with pytest.raises(TooManyRequestsError):
        await kube.evict("sick", "apps")  # IfHealthyBudget: 2 healthy < 3 desired
    await kube.patch(PDB, "web", {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}}, "apps")
    await kube.evict("sick", "apps")
    pending = pod("new")
    pending["status"] = {"phase": "Pending"}
    kube.load([pending])
    await kube.evict("new", "apps")  # pending pods never consult budgets
    with pytest.raises(NotFoundError):
        await kube.evict("gone", "apps")


def owned(name: str, owner: str) -> dict:
    manifest = pod(name)
    manifest["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": f"uid-{owner}", "controller": True}
    ]
    return manifest


def replicaset(name: str, replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": "apps", "uid": f"uid-{name}"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}}}


async def test_a_budget_over_pods_without_a_controller_allows_nothing() -> None:
    """maxUnavailable and percentages scale with the controllers' desired replicas; pods without a controller
    are left out of that count, so a budget over such pods only expects none and allows nothing. (Counting
    them as themselves would shrink the budget's base with every eviction.)"""
    for budget in ({"maxUnavailable": 1}, {"maxUnavailable": "50%"}, {"minAvailable": "50%"}):
        kube = MemoryKube()
        kube.load([pod("a"), pod("b"), pod("c"), pdb("web", **budget)])
        with pytest.raises(TooManyRequestsError, match="it expects 0 pods"):
            await kube.evict("a", "apps")
    kube = MemoryKube()
    kube.load([pod("a"), pod("b"), pod("c"), pdb("web", minAvailable=2)])
    await kube.evict("a", "apps")  # an integer minAvailable counts the pods themselves: no scale needed


async def test_a_budget_counts_from_the_controllers_scale() -> None:
    kube = MemoryKube()
    kube.load([owned("a", "web-rs"), owned("b", "web-rs"), owned("c", "web-rs"), replicaset("web-rs", 3),
               pdb("web", maxUnavailable=1)])
    await kube.evict("a", "apps")  # 3 expected, 2 desired, 3 healthy
    with pytest.raises(TooManyRequestsError, match="needs 2 healthy pods and has 2"):
        await kube.evict("b", "apps")  # still 3 expected: the evicted pod does not shrink the base
    unknown = MemoryKube()
    unknown.load([owned("a", "gone-rs"), owned("b", "gone-rs"), pdb("web", maxUnavailable=1)])
    with pytest.raises(TooManyRequestsError, match="found no controllers for pod"):
        await unknown.evict("a", "apps")


async def test_eviction_refuses_pods_under_two_budgets() -> None:
    kube = MemoryKube()
    kube.load([pod("a"), pdb("one", minAvailable=0), pdb("two", minAvailable=0)])
    with pytest.raises(ApiError) as error:
        await kube.evict("a", "apps")
    assert error.value.status == 500


async def test_pod_create_starts_pending_and_nodes_keep_status() -> None:
    kube = MemoryKube()
    created = await kube.create(pod("a"))
    assert created["status"] == {"phase": "Pending"}
    node = await kube.create(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "status": {"capacity": {"cpu": "2"}}}
    )
    assert node["status"] == {"capacity": {"cpu": "2"}}
    with pytest.raises(NotFoundError):
        await kube.patch(LEASE, "x", {"spec": {}}, "default", subresource="status")
    assert (await kube.get(NODE, "n"))["metadata"]["name"] == "n"


async def test_generate_name_subscribers_faults_and_snapshots() -> None:
    kube = MemoryKube(seed=3)
    seen: list[tuple[str, str]] = []
    unsubscribe = kube.subscribe(lambda kind, event: seen.append((kind.kind, event.type)))
    created = await kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"generateName": "node-"}})
    assert created["metadata"]["name"].startswith("node-") and len(created["metadata"]["name"]) == 10
    assert seen == [("Node", "ADDED")]
    unsubscribe()
    kube.inject_fault("create", ConflictError("scripted"), kind=NODECLAIM)
    with pytest.raises(ConflictError, match="scripted"):
        await kube.create(nodeclaim("a"))
    await kube.create(nodeclaim("a"))  # the fault fired once
    snapshot = kube.objects(NODECLAIM)
    snapshot[0]["metadata"]["name"] = "mutated"
    assert kube.peek(NODECLAIM, "a") is not None, "snapshots are copies"
    assert len(kube.objects()) == 2
    assert seen == [("Node", "ADDED")]


async def test_missing_name_is_a_clear_error() -> None:
    kube = MemoryKube()
    with pytest.raises(ApiError) as error:
        await kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {}})
    assert error.value.status == 422
    assert "metadata.name" in error.value.message


async def test_watch_sends_bookmarks_when_idle() -> None:
    kube = MemoryKube()
    await kube.create(nodeclaim("a"))
    await kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}})
    events = await asyncio.wait_for(collect(kube.watch(NODECLAIM, "1", bookmark_interval=0.01), 1), scaled(2))
    assert events[0].type == "BOOKMARK"
    assert events[0].object["metadata"]["resourceVersion"] == "2", "bookmarks carry the latest version"


async def test_status_replace_changes_only_status() -> None:
    kube = MemoryKube()
    created = await kube.create(nodeclaim("a"))
    body = dict(created, status={"providerID": "aws:///z/i-1"}, spec={"taints": []})
    updated = await kube.replace(body, subresource="status")
    assert updated["status"] == {"providerID": "aws:///z/i-1"}
    assert updated["spec"] == created["spec"]
    with pytest.raises(ConflictError):
        await kube.replace(body, subresource="status")


async def test_delete_with_a_uid_precondition_spares_a_recreated_object() -> None:
    from reconciler.kube.api import NODECLAIM, ConflictError

    kube = MemoryKube()
    claim = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "a"}, "spec": {}}
    old_uid = (await kube.create(claim))["metadata"]["uid"]
    await kube.delete(NODECLAIM, "a")
    await kube.create(claim)
    with pytest.raises(ConflictError, match="Precondition failed"):
        await kube.delete(NODECLAIM, "a", uid=old_uid)
    assert kube.peek(NODECLAIM, "a") is not None
