"""bench/lp_bound.py: the LP lower bound the quality benchmarks divide costs by."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from bench.lp_bound import lower_bound
from reconciler.cloud.types import InstanceType, Offering
from reconciler.model.resources import Resources
from reconciler.state.cluster import ClusterState

# 2 CPUs, 4Gi, 110 pods: 1.00 $/h on demand, 0.40 spot; nothing reserved, so allocatable is capacity.
TWO_CPU = InstanceType("two", Resources.from_manifest({"cpu": "2", "memory": "4Gi", "pods": "110"}),
                       offerings=(Offering("z1", "on-demand", 1.0), Offering("z1", "spot", 0.4)))


def pending(count: int, *, apart: bool = False) -> list[Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}
    if apart:
        term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "a"}}}
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    manifests = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "default",
                  "uid": f"u{i}", "labels": {"app": "a"}}, "spec": spec, "status": {"phase": "Pending"}}
                 for i in range(count)]
    return ClusterState.from_manifests(manifests).pending_pods()


def test_the_bound_buys_capacity_fractionally_at_the_cheapest_allowed_offering() -> None:
    # 10 CPUs of demand on 2-CPU nodes: 5 nodes' worth.
    assert lower_bound(pending(10), [TWO_CPU], {"on-demand"}) == pytest.approx(5.0)
    assert lower_bound(pending(10), [TWO_CPU]) == pytest.approx(2.0)  # spot allowed
    assert lower_bound(pending(3), [TWO_CPU], {"on-demand"}) == pytest.approx(1.5)  # half a node is allowed


def test_pods_kept_apart_by_hostname_anti_affinity_need_a_node_each() -> None:
    assert lower_bound(pending(6, apart=True), [TWO_CPU], {"on-demand"}) == pytest.approx(6.0)
