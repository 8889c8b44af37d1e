"""The shared example scenarios' provisioning outcomes, computed by ``plan`` directly.

Deployments are expanded into pending pods here (replicas x template); the
catalogue is built by the simulator's catalogue loader. The expected outcomes
are the ones written in each scenario's comments.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.cloud.types import InstanceType
from reconciler.model import labels as wk
from reconciler.provisioning.provisioner import ProvisioningPlan, plan
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState

NOW = datetime(2026, 1, 1, 9, tzinfo=UTC)
SCENARIOS = Path(__file__).resolve().parents[3] / "shared" / "scenarios"


def expand(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    result = []
    for obj in objects:
        if obj.get("kind") != "Deployment":
            result.append(obj)
            continue
        template = obj["spec"]["template"]
        for i in range(obj["spec"].get("replicas", 1)):
            metadata = copy.deepcopy(template.get("metadata") or {})
            metadata.update(name=f"{obj['metadata']['name']}-{i}", namespace=obj["metadata"].get("namespace",
                                                                                                  "default"))
            metadata["creationTimestamp"] = "2026-01-01T00:00:00Z"
            metadata["uid"] = f"{obj['metadata']['name']}-{i:03d}"
            result.append({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
                           "spec": copy.deepcopy(template["spec"])})
    return result


def load(name: str) -> tuple[dict[str, Any], list[InstanceType]]:
    path = SCENARIOS / f"{name}.yaml"
    if not path.exists():
        pytest.skip(f"{path} not present")
    from reconciler.sim.catalog import build_catalog

    scenario = yaml.safe_load(path.read_text())
    return scenario, build_catalog(scenario["catalog"])


def run(scenario: dict[str, Any], types: list[InstanceType]) -> ProvisioningPlan:
    state = ClusterState.from_manifests(expand(scenario["objects"]))
    counter = itertools.count(1)
    return plan(state, {name: types for name in state.nodepools}, Settings(), NOW,
                lambda pool: f"{pool}-{next(counter):05d}")


def zone_of(claim) -> list[str]:
    requirement = next((r for r in claim.manifest()["spec"]["requirements"] if r["key"] == wk.ZONE), None)
    return requirement["values"] if requirement else []


def test_inflate_one_claim_on_the_8_vcpu_types():
    scenario, types = load("inflate")
    result = run(scenario, types)
    assert len(result.nodeclaims) == 1
    claim = result.nodeclaims[0]
    assert len(claim.pods) == 5
    assert claim.instance_type_options == ["c6g.2xlarge", "c5.2xlarge", "m5.2xlarge"]
    assert claim.claim.cheapest_price() == pytest.approx(0.0955)


def test_nodepool_limits_two_claims_and_a_reason_naming_the_limit():
    scenario, types = load("nodepool-limits")
    result = run(scenario, types)
    assert [len(c.pods) for c in result.nodeclaims] == [7, 7]
    assert all(c.instance_type_options[0] == "c5.2xlarge" for c in result.nodeclaims)
    assert len(result.pending) == 6
    assert all("cpu limit 16" in reason for reason in result.pending.values())


def test_zone_spread_one_cheap_claim_per_zone():
    scenario, types = load("zone-spread")
    result = run(scenario, types)
    assert sorted(zone_of(c)[0] for c in result.nodeclaims) == ["us-east-1a", "us-east-1b", "us-east-1c"]
    assert [len(c.pods) for c in result.nodeclaims] == [2, 2, 2]
    assert all(c.instance_type_options[0] == "c5.large" for c in result.nodeclaims)
    assert "m5.2xlarge" in result.nodeclaims[0].instance_type_options


def test_spot_and_on_demand_respects_capacity_type_and_unavailable_offerings():
    scenario, types = load("spot-and-on-demand")
    gone = {"c6g.xlarge"}
    types = [
        replace(t, offerings=tuple(replace(o, available=not (t.name in gone and o.capacity_type == "spot"))
                                   for o in t.offerings))
        for t in types
    ]
    result = run(scenario, types)
    by_app = {c.pods[0].split("/")[1].split("-")[0]: c for c in result.nodeclaims}
    api, batch = by_app["api"], by_app["batch"]
    assert api.claim.capacity_types == ["on-demand"] and api.instance_type_options[0] == "c6g.xlarge"
    assert set(api.instance_type_options) == {"c5.xlarge", "m5.xlarge", "c6g.xlarge", "c5.2xlarge", "m5.2xlarge",
                                              "c6g.2xlarge"}
    assert batch.claim.capacity_types == ["spot"] and "c6g.xlarge" not in batch.instance_type_options
    assert batch.instance_type_options[0] == "c5.xlarge" and batch.claim.cheapest_price() == pytest.approx(0.0642)
