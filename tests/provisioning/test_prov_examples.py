"""Karpenter's published examples: every v1 NodePool parses and every workload gets capacity (real catalogue)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_prov_scenarios import expand

from reconciler.provisioning.provisioner import plan
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState

EXAMPLES = Path(__file__).resolve().parents[3] / "shared" / "data" / "karpenter-examples"


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def files(kind: str) -> list[Path]:
    folder = EXAMPLES / kind
    return sorted(folder.glob("*.yaml")) if folder.is_dir() else []


@pytest.mark.parametrize("path", files("v1"), ids=lambda p: p.name)
def test_example_nodepools_parse(path: Path) -> None:
    pools = [d for d in documents(path) if d.get("kind") == "NodePool"]
    state = ClusterState.from_manifests(pools)
    assert set(state.nodepools) == {p["metadata"]["name"] for p in pools}


@pytest.fixture(scope="module")
def real_catalogue() -> list[Any]:
    preset = pytest.importorskip("reconciler.cloud.aws.preset")
    return preset.load_preset()


GENERAL_POOL = {
    "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
    "spec": {"template": {"spec": {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]}],
    }}},
}


@pytest.mark.parametrize("path", files("workloads"), ids=lambda p: p.name)
def test_example_workloads_get_capacity(path: Path, real_catalogue: list[Any]) -> None:
    objects = documents(path)
    for obj in objects:
        if obj.get("kind") == "Deployment":
            obj["spec"]["replicas"] = max(1, min(int(obj["spec"].get("replicas") or 0), 6))
    state = ClusterState.from_manifests([GENERAL_POOL, *expand(objects)])
    counter = itertools.count(1)
    result = plan(state, {"default": real_catalogue}, Settings(), datetime(2026, 1, 1, tzinfo=UTC),
                  lambda pool: f"{pool}-{next(counter)}")
    assert result.nodeclaims and not result.pending, result.pending
