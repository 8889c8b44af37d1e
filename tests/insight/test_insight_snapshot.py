"""Snapshots: what is kept and stripped, kubectl dumps, live clusters, and faithful round trips."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from insight_support import example_cluster, run_cli, write_snapshot
from support.fake_apiserver import FakeApiServer

from reconciler.insight.snapshot import sanitize_objects
from reconciler.insight.sources import load_snapshot

SECRET_VALUE = "hunter2-do-not-leak"


def kubectl_dump() -> dict[str, Any]:
    """What `kubectl get pods,nodes,secrets,... -A -o yaml` prints (a List), with things to strip."""
    last_applied = json.dumps({"spec": {"containers": [{"env": [{"name": "TOKEN", "value": SECRET_VALUE}]}]}})
    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "db", "namespace": "default"},
                "data": {"password": "aHVudGVyMg=="},
            },
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "cfg", "namespace": "default"},
                "data": {"token": SECRET_VALUE},
            },
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"replicas": 1},
            },
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": "ip-10-0-1-5.ec2.internal",
                    "creationTimestamp": "2026-02-02T08:00:00Z",
                    "managedFields": [{"manager": "kubelet"}],
                    "labels": {
                        "topology.kubernetes.io/zone": "us-east-1b",
                        "topology.kubernetes.io/region": "us-east-1",
                        "node.kubernetes.io/instance-type": "m5.large",
                        "karpenter.sh/capacity-type": "on-demand",
                        "karpenter.sh/nodepool": "default",
                    },
                },
                "spec": {"providerID": "aws:///us-east-1b/i-0abc", "podCIDR": "10.0.1.0/24"},
                "status": {
                    "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                    "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True",
                            "reason": "KubeletReady",
                            "lastHeartbeatTime": "2026-02-02T09:14:00Z",
                            "lastTransitionTime": "2026-02-02T08:01:00Z",
                        }
                    ],
                    "images": [{"names": ["nginx"], "sizeBytes": 1}],
                    "addresses": [{"type": "InternalIP", "address": "10.0.1.5"}],
                },
            },
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "web-7d9f-abcde",
                    "namespace": "default",
                    "creationTimestamp": "2026-02-02T09:15:00Z",
                    "annotations": {"kubectl.kubernetes.io/last-applied-configuration": last_applied},
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "ReplicaSet",
                            "name": "web-7d9f",
                            "uid": "u1",
                            "controller": True,
                        }
                    ],
                    "finalizers": ["example.com/hold"],
                },
                "spec": {
                    "nodeName": "ip-10-0-1-5.ec2.internal",
                    "containers": [
                        {
                            "name": "web",
                            "image": "nginx",
                            "command": ["serve", "--token", SECRET_VALUE],
                            "env": [{"name": "TOKEN", "value": SECRET_VALUE}],
                            "envFrom": [{"secretRef": {"name": "db"}}],
                            "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}},
                            "ports": [{"containerPort": 80, "hostPort": 8080}],
                        }
                    ],
                    "volumes": [
                        {
                            "name": "creds",
                            "secret": {"secretName": "db", "items": [{"key": "password", "path": "p"}]},
                        },
                        {"name": "data", "persistentVolumeClaim": {"claimName": "web-data"}},
                    ],
                },
                "status": {
                    "phase": "Running",
                    "podIP": "10.0.1.77",
                    "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": None}],
                },
            },
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "done", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
                "status": {"phase": "Succeeded"},
            },
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": "agent", "namespace": "kube-system"},
                "spec": {
                    "selector": {"matchLabels": {"app": "agent"}},
                    "template": {
                        "metadata": {"labels": {"app": "agent"}},
                        "spec": {
                            "containers": [
                                {
                                    "name": "a",
                                    "image": "agent",
                                    "env": [{"name": "K", "value": "v"}],
                                    "resources": {"requests": {"cpu": "100m"}},
                                }
                            ]
                        },
                    },
                },
            },
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "agent-x1",
                    "namespace": "kube-system",
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "DaemonSet",
                            "name": "agent",
                            "uid": "u2",
                            "controller": True,
                        }
                    ],
                },
                "spec": {
                    "nodeName": "ip-10-0-1-5.ec2.internal",
                    "containers": [
                        {"name": "a", "image": "agent", "resources": {"requests": {"cpu": "100m"}}}
                    ],
                },
                "status": {"phase": "Running"},
            },
        ],
    }


def test_sanitize_keeps_what_the_engine_reads_and_nothing_secret() -> None:
    kept, dropped = sanitize_objects(kubectl_dump()["items"])
    assert dropped == {"ConfigMap": 1, "Deployment": 1, "Pod": 1, "Secret": 1}
    text = yaml.safe_dump(kept)
    assert SECRET_VALUE not in text and "hunter2" not in text and "managedFields" not in text
    assert "last-applied-configuration" not in text and "10.0.1.77" not in text and "images" not in text
    by_name = {o["metadata"]["name"]: o for o in kept}
    (container,) = by_name["web-7d9f-abcde"]["spec"]["containers"]
    assert set(container) == {"name", "image", "resources", "ports"}
    assert container["ports"] == [{"containerPort": 80, "hostPort": 8080}]
    assert by_name["web-7d9f-abcde"]["spec"]["volumes"] == [
        {"name": "creds", "secret": {}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "web-data"}},
    ]
    assert "finalizers" not in by_name["web-7d9f-abcde"]["metadata"]
    assert by_name["web-7d9f-abcde"]["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
    node = by_name["ip-10-0-1-5.ec2.internal"]
    assert node["spec"] == {"providerID": "aws:///us-east-1b/i-0abc"}
    assert node["status"]["conditions"][0] == {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "lastTransitionTime": "2026-02-02T08:01:00Z",
    }
    daemon_template = by_name["agent"]["spec"]["template"]["spec"]["containers"][0]
    assert "env" not in daemon_template
    # The simulator's DaemonSet controller owns the running agent pod through its ownerReference (no duplicate:
    # see the node's 2 pods below); the Deployment without its ReplicaSets is left out (it would make new pods).
    assert by_name["agent-x1"]["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"
    assert "web" not in by_name


def test_kubectl_dump_becomes_a_scenario_at_the_dumps_time(tmp_path: Path, capsys: Any) -> None:
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump(kubectl_dump()))
    snapshot = load_snapshot(dump)
    assert snapshot.document["settings"]["clock"] == "2026-02-02T09:15:00Z"  # newest timestamp in the dump
    assert snapshot.document["catalog"] == {"preset": "aws-us-east-1", "zones": ["us-east-1b"]}

    code, out, _ = run_cli(capsys, "status", "--snapshot", str(dump), "--json")
    assert code == 0
    (node,) = json.loads(out)["nodes"]
    assert node["pods"] == 2 and node["cpuRequested"] == 0.6
    assert node["price"] > 0  # m5.large on-demand from the bundled catalogue

    code, out, err = run_cli(capsys, "snapshot", "--from", str(dump))
    assert code == 0 and SECRET_VALUE not in out
    assert "left out 1 ConfigMap, 1 Deployment, 1 Pod, 1 Secret" in err
    converted = tmp_path / "converted.yaml"
    converted.write_text(out)
    code, _, _ = run_cli(capsys, "simulate", str(converted), "--json")
    assert code == 0


def test_snapshot_of_a_cluster_reproduces_it(tmp_path: Path, capsys: Any) -> None:
    document = example_cluster()
    code, out, _ = run_cli(capsys, "simulate", str(write_yaml_file(tmp_path, document)), "--json")
    assert code == 0
    original = json.loads(out)["final"]
    snapshot = write_snapshot(tmp_path, document)
    code, out, _ = run_cli(capsys, "simulate", str(snapshot), "--json")
    assert code == 0
    replayed = json.loads(out)["final"]
    assert replayed == original  # same nodes, same pods on them (no duplicates), same cost


def write_yaml_file(directory: Path, document: dict[str, Any]) -> Path:
    path = directory / "scenario.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


@pytest.fixture
def live_cluster(tmp_path: Path) -> Iterator[Path]:
    """A fake API server (HTTP) holding a dump's objects, served from its own thread; yields a kubeconfig."""
    server = FakeApiServer()
    items = [dict(item) for item in kubectl_dump()["items"]]
    server.kube.load(items)
    loop = asyncio.new_event_loop()
    started = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert started.wait(10)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(server.kubeconfig()))
    yield kubeconfig
    asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def test_live_snapshot_through_the_kube_api(live_cluster: Path, capsys: Any) -> None:
    code, out, err = run_cli(capsys, "snapshot", "--kubeconfig", str(live_cluster), "--context", "fake")
    assert code == 0, err
    document = yaml.safe_load(out)
    kinds = sorted({o["kind"] for o in document["objects"]})
    assert kinds == ["DaemonSet", "Node", "Pod"]  # never Secrets/ConfigMaps (not even listed)
    assert SECRET_VALUE not in out and "managedFields" not in out
    assert document["name"] == "snapshot-fake"
    assert document["catalog"] == {"preset": "aws-us-east-1", "zones": ["us-east-1b"]}
    pods = sorted(o["metadata"]["name"] for o in document["objects"] if o["kind"] == "Pod")
    assert pods == ["agent-x1", "web-7d9f-abcde"]

    code, out, _ = run_cli(capsys, "status", "--kubeconfig", str(live_cluster))
    assert code == 0 and "ip-10-0-1-5.ec2.internal" in out and "1 nodes" in out


def test_unreadable_kubeconfig_is_a_one_line_error(tmp_path: Path, capsys: Any) -> None:
    code, out, err = run_cli(capsys, "snapshot", "--kubeconfig", str(tmp_path / "missing"))
    assert code == 2 and out == ""
    assert err.startswith("error: --kubeconfig: no Kubernetes configuration") and err.count("\n") == 1


def test_bad_snapshot_document_names_the_key(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"catalog": {"preset": "aws-us-east-1"}, "objects": [{"kind": "Pod"}]}))
    code, _, err = run_cli(capsys, "status", "--snapshot", str(path))
    assert code == 2 and err == f"error: {path}: objects[0].apiVersion: required\n"
