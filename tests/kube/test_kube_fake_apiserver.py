"""The fake API server's wire behaviour, seen with a plain HTTP client."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
from support.fake_apiserver import FakeApiServer


async def call(
    server: FakeApiServer, method: str, path: str, body: Any = None, content_type: str = "application/json"
) -> tuple[int, str, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.request(
            method,
            server.url + path,
            data=None if body is None else json.dumps(body),
            headers={"Content-Type": content_type},
        ) as response,
    ):
        text = await response.text()
        return response.status, response.headers.get("Content-Type", ""), json.loads(text) if text else None


async def test_discovery_documents(server: FakeApiServer) -> None:
    assert (await call(server, "GET", "/api"))[2]["versions"] == ["v1"]
    groups = {g["name"] for g in (await call(server, "GET", "/apis"))[2]["groups"]}
    assert {"karpenter.sh", "karpenter.k8s.aws", "coordination.k8s.io", "policy", "events.k8s.io"} <= groups
    core = {r["name"] for r in (await call(server, "GET", "/api/v1"))[2]["resources"]}
    assert {"pods", "pods/eviction", "pods/status", "nodes", "events"} <= core
    karpenter = (await call(server, "GET", "/apis/karpenter.sh/v1"))[2]["resources"]
    assert {(r["name"], r["namespaced"]) for r in karpenter} >= {("nodeclaims", False), ("nodepools", False)}
    status, content_type, body = await call(server, "GET", "/apis/nope/v1/things")
    assert (status, content_type, body["kind"], body["code"]) == (404, "application/json", "Status", 404)
    assert body["message"]


async def test_patch_flavours(server: FakeApiServer) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": {"a": "1"}}}
    assert (await call(server, "POST", "/api/v1/nodes", node))[0] == 201
    status, _, patched = await call(
        server,
        "PATCH",
        "/api/v1/nodes/n",
        [
            {"op": "add", "path": "/metadata/labels/b", "value": "2"},
            {"op": "remove", "path": "/metadata/labels/a"},
        ],
        "application/json-patch+json",
    )
    assert status == 200 and patched["metadata"]["labels"] == {"b": "2"}
    status, _, failed = await call(
        server,
        "PATCH",
        "/api/v1/nodes/n",
        [{"op": "test", "path": "/metadata/labels/b", "value": "9"}],
        "application/json-patch+json",
    )
    assert status == 422 and "testing value" in failed["message"]
    status, _, smp = await call(
        server,
        "PATCH",
        "/api/v1/nodes/n",
        {"spec": {"unschedulable": True}},
        "application/strategic-merge-patch+json",
    )
    assert status == 200 and smp["spec"]["unschedulable"] is True
    directive = {"metadata": {"$patch": "replace"}}
    assert (
        await call(server, "PATCH", "/api/v1/nodes/n", directive, "application/strategic-merge-patch+json")
    )[0] == 400
    assert (await call(server, "PATCH", "/api/v1/nodes/n", {}, "text/plain"))[0] == 415
    status, _, body = await call(server, "PATCH", "/api/v1/nodes/n", node, "application/apply-patch+yaml")
    assert status == 400 and "fieldManager is required" in body["message"]
    status, _, _ = await call(
        server,
        "PATCH",
        "/api/v1/nodes/m?fieldManager=t",
        {**node, "metadata": {"name": "m"}},
        "application/apply-patch+yaml",
    )
    assert status == 200, "apply creates a missing object"


async def test_lists_strip_kinds_of_built_ins_and_page(server: FakeApiServer) -> None:
    for name in ("a", "b", "c"):
        await call(
            server, "POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
        )
    _, _, first = await call(server, "GET", "/api/v1/nodes?limit=2")
    assert first["kind"] == "NodeList" and [i["metadata"]["name"] for i in first["items"]] == ["a", "b"]
    assert "kind" not in first["items"][0], "like the real server, built-in list items omit apiVersion/kind"
    assert first["metadata"]["remainingItemCount"] == 1
    _, _, second = await call(
        server, "GET", f"/api/v1/nodes?limit=2&continue={first['metadata']['continue']}"
    )
    assert [i["metadata"]["name"] for i in second["items"]] == ["c"] and "continue" not in second["metadata"]


async def test_namespace_mismatch_and_body_kind_mismatch_are_refused(server: FakeApiServer) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "other"},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }
    status, _, body = await call(server, "POST", "/api/v1/namespaces/apps/pods", pod)
    assert status == 400 and "does not match the namespace" in body["message"]
    status, _, _ = await call(server, "POST", "/api/v1/nodes", pod)
    assert status == 400
