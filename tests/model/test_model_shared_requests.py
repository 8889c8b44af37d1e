"""A pod's ``scheduling_requests`` is one object per shape (its items in their order): the savings bound keys
its per-candidate answers by them and finds a workload's pods by identity; values and order are the pod's own."""

from __future__ import annotations

from typing import Any

from reconciler.model.pod import Pod


def _pod(name: str, requests: dict[str, str]) -> Pod:
    manifest: dict[str, Any] = {"metadata": {"name": name, "namespace": "default"},
                                "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}}
    return Pod.from_manifest(manifest)


def test_pods_of_one_shape_share_their_scheduling_requests() -> None:
    first, second = _pod("a", {"cpu": "500m", "memory": "1Gi"}), _pod("b", {"cpu": "500m", "memory": "1Gi"})
    assert first.scheduling_requests is second.scheduling_requests
    assert dict(first.scheduling_requests) == {"cpu": 500, "memory": 1024**3 * 1000, "pods": 1000}


def test_another_shape_or_order_keeps_its_own() -> None:
    first = _pod("a", {"cpu": "500m", "memory": "1Gi"})
    other = _pod("b", {"cpu": "250m", "memory": "1Gi"})
    reordered = _pod("c", {"memory": "1Gi", "cpu": "500m"})
    assert other.scheduling_requests != first.scheduling_requests
    assert reordered.scheduling_requests == first.scheduling_requests
    assert list(reordered.scheduling_requests) == list(reordered.requests + {"pods": 1000})
    assert list(first.scheduling_requests) == list(first.requests + {"pods": 1000})
