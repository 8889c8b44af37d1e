"""The two API servers of the fidelity contract (``tests/control_plane/test_cp_fake_fidelity.py``) behind one
synchronous client: the fake (``fake_apiserver.FakeApiServer`` on its own event loop in a thread) and the real
kube-apiserver of ``support.control_plane``.

``ContractServer.call(method, path, body)`` answers ``(status, decoded body)`` over HTTP(S) exactly as sent;
``watch(path, resource_version, ...)`` collects the raw watch events of one stream. What differs between the
two is only what a server cannot do by itself and a cluster's other components do on the real one: running
pods (kube-scheduler binds, kwok reports Running/Ready; on the fake the test binds and reports, as a kubelet
would), PodDisruptionBudget status (the disruption controller; the fake's eviction computes it on the spot) and
making a resourceVersion too old (the real watch cache starts at the apiserver's start, so any earlier version
is too old; the fake's history is compacted).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import itertools
import json
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from support.cluster_watch import wait_for
from support.control_plane import KWOK_ANNOTATION, ControlPlane
from support.cp_manifests import PAUSE_IMAGE, is_ready
from support.fake_apiserver import FakeApiServer

CONTRACT_NODE = "contract-node"
Response = tuple[int, Any]


@dataclass
class Endpoint:
    """One server's address and credentials."""

    host: str
    port: int
    context: ssl.SSLContext | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def connection(self, timeout: float) -> http.client.HTTPConnection:
        if self.context is not None:
            return http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=timeout)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)


class ContractServer:
    """A server under the contract: ``call``, ``watch``, and the setup only a full cluster does by itself."""

    name = ""

    def __init__(self, endpoint: Endpoint, namespace: str) -> None:
        self.endpoint = endpoint
        self.namespace = namespace
        self._names = itertools.count(1)

    def unique(self, prefix: str) -> str:
        """A fresh object name; both servers get the same sequence, so their answers name the same objects."""
        return f"{prefix}-{next(self._names)}"

    def call(self, method: str, path: str, body: Any = None, *, query: dict[str, str] | None = None,
             content_type: str = "application/json") -> Response:
        connection = self.endpoint.connection(30)
        try:
            payload = None if body is None else json.dumps(body).encode()
            headers = {"Accept": "application/json", **self.endpoint.headers}
            if payload is not None:
                headers["Content-Type"] = content_type
            connection.request(method, path + ("?" + urlencode(query) if query else ""), body=payload,
                               headers=headers)
            response = connection.getresponse()
            raw = response.read()
        finally:
            connection.close()
        try:
            return response.status, json.loads(raw) if raw else None
        except json.JSONDecodeError:
            return response.status, raw.decode(errors="replace")

    def ok(self, method: str, path: str, body: Any = None, **options: Any) -> Any:
        status, answer = self.call(method, path, body, **options)
        assert status in (200, 201), f"{self.name}: {method} {path}: {status} {answer}"
        return answer

    def watch(self, path: str, resource_version: str, *, count: int, seconds: float = 5.0,
              query: dict[str, str] | None = None, during: Callable[[], None] | None = None
              ) -> tuple[int, list[dict[str, Any]]]:
        """The status and first ``count`` events (bookmarks left out) of one watch from ``resource_version``,
        within ``seconds``; ``during`` runs once the stream is open (changes the watch should see)."""
        params = {"watch": "1", "resourceVersion": resource_version, "timeoutSeconds": str(int(seconds)),
                  **(query or {})}
        connection = self.endpoint.connection(seconds + 10)
        events: list[dict[str, Any]] = []
        try:
            connection.request("GET", f"{path}?{urlencode(params)}",
                               headers={"Accept": "application/json", **self.endpoint.headers})
            response = connection.getresponse()
            if response.status != 200:
                raw = response.read()
                return response.status, [json.loads(raw)] if raw else []
            if during is not None:
                during()
            while len(events) < count:
                line = response.readline()
                if not line:
                    break
                event = json.loads(line)
                if event["type"] != "BOOKMARK":
                    events.append(event)
            return response.status, events
        finally:
            connection.close()

    # --- what the rest of a cluster does ------------------------------------------------------------

    def running_pods(self, names: list[str], labels: dict[str, str], grace: int = 30) -> None:
        raise NotImplementedError

    def replica_set(self, name: str, replicas: int, grace: int = 30) -> list[str]:
        """A ReplicaSet of ``replicas`` Running pods labelled ``app: name``; their names."""
        raise NotImplementedError

    def _replica_set_manifest(self, name: str, replicas: int, grace: int) -> dict[str, Any]:
        template = pod_manifest("", {"app": name}, node_selector={"kubernetes.io/hostname": CONTRACT_NODE},
                                grace=grace)
        return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name}, "spec": {
            "replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": template["spec"]}}}

    def pending_pod(self, name: str) -> None:
        """A pod no node takes (its nodeSelector matches none)."""
        self.ok("POST", f"/api/v1/namespaces/{self.namespace}/pods",
                pod_manifest(name, {}, node_selector={"contract/none": "true"}))

    def settled_budget(self, name: str, healthy: int) -> None:
        """Wait until the PodDisruptionBudget's status counts ``healthy`` pods (the real disruption controller)."""

    def too_old_resource_version(self) -> str:
        raise NotImplementedError


def pod_manifest(name: str, labels: dict[str, str], *, node_selector: dict[str, str] | None = None,
                 grace: int = 30) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": grace,
        "containers": [{"name": "app", "image": PAUSE_IMAGE,
                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}],
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": spec}


class RealServer(ContractServer):
    name = "real"

    def __init__(self, plane: ControlPlane, namespace: str) -> None:
        assert plane.admin is not None
        host, port = plane.url.removeprefix("https://").rsplit(":", 1)
        super().__init__(Endpoint(host, int(port), plane.admin.context, plane.admin.headers()), namespace)
        self.plane = plane

    def start(self) -> RealServer:
        self.plane.create_namespace(self.namespace)
        self.ok("POST", "/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": CONTRACT_NODE, "annotations": {KWOK_ANNOTATION: "fake"},
                         "labels": {"kubernetes.io/hostname": CONTRACT_NODE, "kubernetes.io/os": "linux"}},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"},
                       "capacity": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
        })
        return self

    def stop(self) -> None:
        self.plane.delete_namespace(self.namespace)
        self.plane.request("DELETE", f"/api/v1/nodes/{CONTRACT_NODE}", expect=(200, 202, 404))

    def running_pods(self, names: list[str], labels: dict[str, str], grace: int = 30) -> None:
        for name in names:
            self.ok("POST", f"/api/v1/namespaces/{self.namespace}/pods",
                    pod_manifest(name, labels, node_selector={"kubernetes.io/hostname": CONTRACT_NODE}, grace=grace))
        wanted = {f"{self.namespace}/{n}" for n in names}
        wait_for(self.plane, f"/api/v1/namespaces/{self.namespace}/pods",
                 lambda pods: all(k in pods and is_ready(pods[k]) for k in wanted), timeout=60,
                 what=f"pods {sorted(names)} Running and Ready")

    def replica_set(self, name: str, replicas: int, grace: int = 30) -> list[str]:
        self.ok("POST", f"/apis/apps/v1/namespaces/{self.namespace}/replicasets",
                self._replica_set_manifest(name, replicas, grace))
        pods = wait_for(
            self.plane, f"/api/v1/namespaces/{self.namespace}/pods",
            lambda pods: pods if len(pods) == replicas and all(is_ready(p) for p in pods.values()) else None,
            timeout=60, what=f"ReplicaSet {name}: {replicas} pods Running and Ready", selector=f"app={name}")
        return sorted(p["metadata"]["name"] for p in pods.values())

    def settled_budget(self, name: str, healthy: int) -> None:
        def settled(budgets: dict[str, dict[str, Any]]) -> bool:
            budget = budgets.get(f"{self.namespace}/{name}") or {}
            status = budget.get("status") or {}
            return (status.get("observedGeneration") == budget.get("metadata", {}).get("generation")
                    and status.get("currentHealthy") == healthy and status.get("expectedPods") == healthy)

        wait_for(self.plane, f"/apis/policy/v1/namespaces/{self.namespace}/poddisruptionbudgets", settled,
                 timeout=60, what=f"PodDisruptionBudget {name} counting {healthy} healthy pods")

    def too_old_resource_version(self) -> str:
        return "1"  # before the watch cache's start (the apiserver's): too old on any running server


class FakeServer(ContractServer):
    name = "fake"

    def __init__(self, namespace: str) -> None:
        self.server = FakeApiServer()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fake-apiserver", daemon=True)
        super().__init__(Endpoint("127.0.0.1", 0), namespace)

    def start(self) -> FakeServer:
        self.thread.start()
        url = asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(30)
        self.endpoint.port = int(url.rsplit(":", 1)[1])
        return self

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)

    def running_pods(self, names: list[str], labels: dict[str, str], grace: int = 30,
                     owners: list[dict[str, Any]] | None = None) -> None:
        for name in names:  # bound as the scheduler would, Running and Ready as the kubelet reports
            manifest = pod_manifest(name, labels, grace=grace)
            manifest["spec"]["nodeName"] = CONTRACT_NODE
            if owners:
                manifest["metadata"]["ownerReferences"] = owners
            self.ok("POST", f"/api/v1/namespaces/{self.namespace}/pods", manifest)
            self.ok("PATCH", f"/api/v1/namespaces/{self.namespace}/pods/{name}/status", {"status": {
                "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
                content_type="application/merge-patch+json")

    def replica_set(self, name: str, replicas: int, grace: int = 30) -> list[str]:
        owner = self.ok("POST", f"/apis/apps/v1/namespaces/{self.namespace}/replicasets",
                        self._replica_set_manifest(name, replicas, grace))
        names = [f"{name}-{index}" for index in range(replicas)]
        owned = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name, "uid": owner["metadata"]["uid"],
                 "controller": True, "blockOwnerDeletion": True}
        self.running_pods(names, {"app": name}, grace=grace, owners=[owned])  # as the ReplicaSet controller would
        return names

    def too_old_resource_version(self) -> str:
        version = int(self.server.kube.resource_version) - 1
        self.server.kube.compact()
        return str(version)


@contextlib.contextmanager
def contract_servers(plane: ControlPlane | None, namespace: str) -> Iterator[dict[str, ContractServer]]:
    """Both servers (the real one only with a control plane), started, each with ``namespace``."""
    servers: dict[str, ContractServer] = {"fake": FakeServer(namespace).start()}
    try:
        if plane is not None:
            servers["real"] = RealServer(plane, namespace).start()
        yield servers
    finally:
        for server in servers.values():
            server.stop()  # type: ignore[attr-defined]

