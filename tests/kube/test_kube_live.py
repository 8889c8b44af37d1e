"""The live client (kubernetes.aio transport) against the fake API server over HTTP."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support.fake_apiserver import FakeApiServer
from support.timescale import scaled

from reconciler.kube.api import (
    EVENT,
    LEASE,
    NODE,
    NODECLAIM,
    POD,
    ApiError,
    ConflictError,
    GoneError,
    NotFoundError,
    TooManyRequestsError,
    WatchEvent,
)
from reconciler.kube.live import LiveKube


def node(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}}}


def pod(name: str, node_name: str = "", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "apps", "labels": labels or {"app": "web"}},
        "spec": {"nodeName": node_name or None, "containers": [{"name": "c", "image": "nginx"}]},
    }


async def test_crud_round_trip_and_errors(live: LiveKube, server: FakeApiServer) -> None:
    created = await live.create(node("n1", {"zone": "a"}))
    assert created["metadata"]["resourceVersion"]
    fetched = await live.get(NODE, "n1")
    assert fetched == created
    fetched["metadata"]["labels"]["zone"] = "b"
    replaced = await live.replace(fetched)
    assert replaced["metadata"]["labels"] == {"zone": "b"}
    with pytest.raises(ConflictError, match="the object has been modified"):
        await live.replace(fetched)  # stale resourceVersion
    with pytest.raises(ConflictError) as exists:
        await live.create(node("n1"))
    assert exists.value.reason == "AlreadyExists"
    patched = await live.patch(NODE, "n1", {"metadata": {"labels": {"zone": None, "k": "v"}}})
    assert patched["metadata"]["labels"] == {"k": "v"}
    await live.delete(NODE, "n1")
    with pytest.raises(NotFoundError):
        await live.get(NODE, "n1")
    assert {r.content_type for r in server.requests if r.method == "PATCH"} == {
        "application/merge-patch+json"
    }


async def test_list_pages_selectors_and_fills_in_kinds(live: LiveKube, server: FakeApiServer) -> None:
    for index in range(7):
        await live.create(pod(f"p{index}", node_name="n1" if index % 2 else "n2"))
    await live.create(pod("other", labels={"app": "db"}))
    from reconciler.kube import live as live_module

    original = live_module.LIST_PAGE_SIZE
    live_module.LIST_PAGE_SIZE = 3
    try:
        items, version = await live.list(POD, "apps", label_selector="app=web")
    finally:
        live_module.LIST_PAGE_SIZE = original
    assert len(items) == 7
    assert all(item["kind"] == "Pod" and item["apiVersion"] == "v1" for item in items)
    assert int(version) >= 8
    assert sum(1 for r in server.requests if r.query.get("continue")) == 2, "three pages were fetched"
    on_n1, _ = await live.list(POD, field_selector="spec.nodeName=n1")
    assert sorted(p["metadata"]["name"] for p in on_n1) == ["p1", "p3", "p5"]


async def test_status_subresource_and_custom_resources(live: LiveKube, server: FakeApiServer) -> None:
    claim = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": "default-abc", "finalizers": ["karpenter.sh/termination"]},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [],
        },
    }
    created = await live.create(claim)
    assert "status" not in created
    updated = await live.patch(
        NODECLAIM, "default-abc", {"status": {"providerID": "aws:///us-east-1a/i-1"}}, subresource="status"
    )
    assert updated["status"]["providerID"] == "aws:///us-east-1a/i-1"
    await live.delete(NODECLAIM, "default-abc")
    terminating = await live.get(NODECLAIM, "default-abc")
    assert terminating["metadata"]["deletionTimestamp"]
    await live.patch(NODECLAIM, "default-abc", {"metadata": {"finalizers": None}})
    with pytest.raises(NotFoundError):
        await live.get(NODECLAIM, "default-abc")
    assert any(r.path.endswith("/nodeclaims/default-abc/status") for r in server.requests)


async def test_server_side_apply_creates_then_merges(live: LiveKube, server: FakeApiServer) -> None:
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "l", "namespace": "kube-system"},
        "spec": {"holderIdentity": "a"},
    }
    await live.apply(lease)
    lease["spec"] = {"leaseDurationSeconds": 15}
    merged = await live.apply(lease)
    assert merged["spec"] == {"holderIdentity": "a", "leaseDurationSeconds": 15}
    applies = [r for r in server.requests if r.content_type == "application/apply-patch+yaml"]
    assert applies and applies[0].query == {"fieldManager": "karpenter", "force": "true"}
    assert (await live.get(LEASE, "l", "kube-system"))["spec"]["holderIdentity"] == "a"


async def test_delete_with_uid_precondition(live: LiveKube) -> None:
    created = await live.create(node("n1"))
    with pytest.raises(ConflictError, match="the UID in the precondition"):
        await live.delete(NODE, "n1", uid="another-incarnation")
    await live.delete(NODE, "n1", uid=created["metadata"]["uid"])
    with pytest.raises(NotFoundError):
        await live.delete(NODE, "n1")


async def test_eviction_returns_429_with_a_budget_cause(live: LiveKube, server: FakeApiServer) -> None:
    running = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    replicaset = await live.create(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web-1", "namespace": "apps"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod("x")["spec"]},
            },
        }
    )
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "web-1",
        "controller": True,
        "uid": replicaset["metadata"]["uid"],
    }
    for name in ("a", "b"):
        owned = pod(name, node_name="n1")
        owned["metadata"]["ownerReferences"] = [owner]
        await live.create(owned)
        await live.patch(POD, name, {"status": running}, "apps", subresource="status")
    await live.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "apps"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        }
    )
    await live.evict("a", "apps")
    # The ReplicaSet still wants 2 pods, so with 1 healthy the budget (1 unavailable) is spent. As on a real
    # API server, the budget's own words are in the body's details.causes, not in its message.
    with pytest.raises(TooManyRequestsError, match="would violate the pod's disruption budget"):
        await live.evict("b", "apps")
    assert (await live.get(POD, "b", "apps"))["metadata"]["name"] == "b"
    evicted = await live.get(POD, "a", "apps")  # shutting down for its own grace period, marked as evicted
    assert evicted["metadata"]["deletionGracePeriodSeconds"] == 30
    assert any(c["type"] == "DisruptionTarget" for c in evicted["status"]["conditions"])


async def test_events_in_both_api_groups(live: LiveKube) -> None:
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "n1.1", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": "n1", "apiVersion": "v1"},
        "reason": "DisruptionBlocked",
        "message": "m",
        "type": "Normal",
        "count": 1,
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z",
        "source": {"component": "karpenter"},
    }
    await live.create(event)
    assert (await live.get(EVENT, "n1.1", "default"))["reason"] == "DisruptionBlocked"
    modern = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "n1.2", "namespace": "default"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "karpenter",
        "reportingInstance": "karpenter-0",
        "action": "Disrupting",
        "reason": "DisruptionBlocked",
        "regarding": {"kind": "Node", "name": "n1"},
        "type": "Normal",
    }
    assert (await live.create(modern))["action"] == "Disrupting"


async def test_schema_violations_are_refused_with_422(live: LiveKube, server: FakeApiServer) -> None:
    bad = pod("bad")
    bad["spec"]["containers"][0]["resourcez"] = {}
    with pytest.raises(ApiError) as error:
        await live.create(bad)
    assert error.value.status == 422
    assert "spec.containers[0]" in error.value.message and "resourcez" in error.value.message
    assert server.violations
    server.violations.clear()  # expected here; the fixture fails tests that leave violations


async def test_scripted_errors_and_transport_failures(live: LiveKube, server: FakeApiServer) -> None:
    server.script("GET", "/api/v1/nodes/n1", 500, reason="InternalError", message="etcd timeout")
    with pytest.raises(ApiError, match="etcd timeout") as error:
        await live.get(NODE, "n1")
    assert error.value.status == 500
    unreachable = LiveKube.for_url("http://127.0.0.1:9", request_timeout=2)
    try:
        with pytest.raises(ApiError) as down:
            await unreachable.get(NODE, "n1")
        assert down.value.status == 503
    finally:
        await unreachable.close()


async def next_events(stream: Any, count: int, *, skip_bookmarks: bool = True) -> list[WatchEvent]:
    events: list[WatchEvent] = []
    async for event in stream:
        if skip_bookmarks and event.type == "BOOKMARK":
            continue
        events.append(event)
        if len(events) == count:
            break
    return events


async def test_watch_streams_changes_and_bookmarks(live: LiveKube, server: FakeApiServer) -> None:
    await live.create(node("n1"))
    _, version = await live.list(NODE)
    stream = live.watch(NODE, version)
    collector = asyncio.create_task(next_events(stream, 3))
    await asyncio.sleep(0.1)
    await live.create(node("n2"))
    await live.patch(NODE, "n1", {"metadata": {"labels": {"a": "b"}}})
    await live.delete(NODE, "n2")
    events = await asyncio.wait_for(collector, scaled(5))
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [
        ("ADDED", "n2"),
        ("MODIFIED", "n1"),
        ("DELETED", "n2"),
    ]
    assert events[0].object["kind"] == "Node"
    await stream.aclose()
    await live.create(node("n3"))
    _, latest = await live.list(NODE)
    await live.create(pod("p"))  # another kind moves the global resourceVersion on
    bookmark = await asyncio.wait_for(next_events(live.watch(NODE, latest), 1, skip_bookmarks=False), scaled(5))
    assert bookmark[0].type == "BOOKMARK"
    assert int(bookmark[0].object["metadata"]["resourceVersion"]) > int(latest)
    watches = [r for r in server.requests if r.query.get("watch") == "true"]
    assert all(r.query.get("allowWatchBookmarks") == "true" for r in watches)


async def test_watch_expiry_raises_gone(live: LiveKube, server: FakeApiServer) -> None:
    await live.create(node("n1"))
    _, version = await live.list(NODE)
    await live.create(node("n2"))  # so that compaction below makes ``version`` unreachable
    collector = asyncio.create_task(next_events(live.watch(NODE, version), 2))
    await asyncio.sleep(0.05)
    server.expire_watches()  # an open stream gets an in-stream 410; a late one is refused with 410
    with pytest.raises(GoneError):
        await asyncio.wait_for(collector, scaled(5))
    with pytest.raises(GoneError):
        await asyncio.wait_for(next_events(live.watch(NODE, version), 1), scaled(5))


async def test_official_typed_client_works_against_the_fake_server(server: FakeApiServer) -> None:
    """The fake server is faithful enough for the kubernetes.aio typed API too."""
    from kubernetes.aio import client

    configuration = client.Configuration(host=server.url)
    async with client.ApiClient(configuration) as api_client:
        core = client.CoreV1Api(api_client)
        await core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="typed")))
        nodes = await core.list_node(label_selector="")
        assert [n.metadata.name for n in nodes.items] == ["typed"]
        with pytest.raises(client.ApiException) as error:
            await core.read_node("missing")
        assert error.value.status == 404


async def test_custom_resources_are_defaulted_and_schema_checked(
    live: LiveKube, server: FakeApiServer
) -> None:
    if server.crd_validation_skipped:
        pytest.skip(server.crd_validation_skipped)
    spec = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
        "requirements": [],
    }
    created = await live.create(
        {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "x"}, "spec": spec}
    )
    assert created["spec"]["expireAfter"] == "720h", "CRD defaults are applied as the API server does"
    bad = {**spec, "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "Bogus"}], "tains": []}
    with pytest.raises(ApiError) as error:
        await live.create(
            {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "y"}, "spec": bad}
        )
    assert error.value.status == 422
    assert "spec.requirements[0].operator" in error.value.message and "tains" in error.value.message
    server.violations.clear()


async def test_from_environment_reads_a_kubeconfig(server: FakeApiServer, tmp_path, monkeypatch) -> None:
    import yaml

    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(server.kubeconfig(token="secret")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(path))
    async with await LiveKube.from_environment() as client:
        await client.create(node("from-kubeconfig"))
        assert (await client.get(NODE, "from-kubeconfig"))["metadata"]["name"] == "from-kubeconfig"
    assert server.requests[-1].authorization == "Bearer secret"


async def test_missing_configuration_is_a_clear_error(tmp_path, monkeypatch) -> None:
    from reconciler.kube.live import ConfigError

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match="does not exist and KUBERNETES_SERVICE_HOST is not set"):
        await LiveKube.from_environment()
    (tmp_path / "broken").write_text("apiVersion: v1\nkind: Config\ncontexts: []\n")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "broken"))
    with pytest.raises(ConfigError, match="invalid Kubernetes configuration"):
        await LiveKube.from_environment()
