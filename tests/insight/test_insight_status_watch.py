"""``status --watch`` against a live cluster: the fake API server over HTTP, redrawn as the cluster changes."""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from insight_support import example_cluster, run_cli, write_snapshot
from support.fake_apiserver import FakeApiServer

from reconciler.insight import watch as watch_module

CLEAR = "\x1b[H\x1b[2J"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[FakeApiServer, asyncio.AbstractEventLoop, Path, list[dict[str, Any]]]]:
    """The example cluster's objects served by a fake API server on its own thread; yields the kubeconfig."""
    objects = yaml.safe_load(write_snapshot(tmp_path, example_cluster()).read_text())["objects"]
    server = FakeApiServer()
    server.kube.load([copy.deepcopy(o) for o in objects])
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
    yield server, loop, kubeconfig, objects
    asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


MNG_NODE = {
    "apiVersion": "v1", "kind": "Node",
    "metadata": {"name": "ip-10-0-9-9.ec2.internal", "labels": {
        "node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": "us-east-1a",
        "kubernetes.io/arch": "amd64", "eks.amazonaws.com/nodegroup": "system",
        "eks.amazonaws.com/capacityType": "SPOT"}},
    "spec": {"providerID": "aws:///us-east-1a/i-0mng"},
    "status": {"capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
               "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"},
               "conditions": [{"type": "Ready", "status": "True"}]},
}  # fmt: skip


def test_watch_redraws_the_live_cluster_as_it_changes(cluster: Any, capsys: Any, monkeypatch: Any) -> None:
    server, loop, kubeconfig, _ = cluster
    waits: list[float] = []

    def a_node_group_node_joins_between_refreshes(seconds: float) -> None:
        waits.append(seconds)
        asyncio.run_coroutine_threadsafe(server.kube.create(copy.deepcopy(MNG_NODE)), loop).result(10)

    monkeypatch.setattr(watch_module, "pause", a_node_group_node_joins_between_refreshes)
    code, out, err = run_cli(capsys, "status", "--kubeconfig", str(kubeconfig), "--context", "fake", "--watch",
                             "--interval", "2", "--count", "2")
    assert code == 0, err
    assert waits == [2.0]
    views = out.split("\n\nfake (live")
    assert len(views) == 2
    first, second = views[0], "fake (live" + views[1]
    assert first.startswith("fake (live, every 2s; Ctrl-C to stop)")
    assert first.splitlines()[1].startswith("4 nodes") and second.splitlines()[1].startswith("5 nodes")
    assert "ip-10-0-9-9.ec2.internal" not in first
    [mng] = [line for line in second.splitlines() if line.startswith("ip-10-0-9-9.ec2.internal")]
    assert " Spot " in mng and "(unmanaged)" in mng and "$0.0000/h" not in mng  # priced as the spot offering
    assert "$2.4370/h ($1,779.01/month)" in first and "$2.4370/h ($1,779.01/month)" not in second
    assert CLEAR not in out and "\x1b[" not in out  # piped: no screen clearing, no colour


def test_watch_needs_a_live_cluster(capsys: Any, tmp_path: Path) -> None:
    snapshot = write_snapshot(tmp_path, example_cluster())
    code, _, err = run_cli(capsys, "status", "--snapshot", str(snapshot), "--watch")
    assert code == 2 and err.strip() == ("error: --watch: redraws a live cluster; it takes neither --snapshot "
                                         "nor --json")
