"""``StateStore``: reflector events and our own writes, in any order, never regress or resurrect state."""

from __future__ import annotations

from typing import Any

from ctrl_cluster import utc

from reconciler.model import labels as wk
from reconciler.state.store import StateStore


def claim(name: str, version: int, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "resourceVersion": str(version), "labels": {wk.NODEPOOL: "default"}},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": []},
        "status": status,
    }


def test_an_older_watch_event_does_not_overwrite_a_newer_write_through() -> None:
    store = StateStore()
    store.write_through(claim("a", 7, providerID="aws:///z/i-1"))
    store.upsert(claim("a", 5))  # the watch event for an earlier write arrives late
    assert store.get("NodeClaim", "a")["status"] == {"providerID": "aws:///z/i-1"}
    assert store.state.nodeclaims["a"].provider_id == "aws:///z/i-1"


def test_a_deleted_object_is_not_resurrected_by_a_late_copy() -> None:
    store = StateStore()
    store.upsert(claim("a", 3))
    store.remove(claim("a", 9))
    store.write_through(claim("a", 8))  # the answer to a write made just before the deletion
    assert store.get("NodeClaim", "a") is None
    assert "a" not in store.state.nodeclaims
    store.upsert(claim("a", 12))  # re-created later: a newer version is accepted
    assert store.get("NodeClaim", "a") is not None


def test_an_unreadable_object_is_left_out_and_reported_not_raised() -> None:
    store = StateStore()
    bad_pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
               "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]}}
    store.upsert(bad_pod)
    assert ("Pod", "default/p") in store.rejected
    assert "cpu" in store.rejected[("Pod", "default/p")]
    assert store.state.pods == {}
    assert store.snapshot().pods == {}


def test_listeners_hear_changes_and_snapshots_are_private_copies_with_flags() -> None:
    store = StateStore()
    heard: list[tuple[str, bool]] = []
    store.subscribe(lambda kind, manifest, deleted: heard.append((manifest["metadata"]["name"], deleted)))
    store.upsert(claim("a", 1, providerID="aws:///z/i-1"))
    store.nominate("a", utc(hour=10))
    store.mark_for_deletion(["a"])
    snapshot = store.snapshot()
    store.remove(claim("a", 2))
    assert heard == [("a", False), ("a", True)]
    node = snapshot.state_node("a")
    assert node is not None and node.marked_for_deletion and node.nominated(utc(hour=9))
    assert store.snapshot().state_node("a") is None
