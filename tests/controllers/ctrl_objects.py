"""Small manifests and a catalogue shared by the controller and end-to-end tests."""

from __future__ import annotations

from typing import Any

from reconciler.cloud.types import InstanceType
from reconciler.controllers.runtime.context import Timings
from reconciler.model import labels as wk
from reconciler.settings import Settings
from reconciler.sim.catalog import build_catalog

ZONES = ("us-east-1a", "us-east-1b")


def catalog() -> list[InstanceType]:
    """Three on-demand sizes in two zones (prices proportional to size)."""
    types = []
    for name, cpu, memory, price in (
        ("c5.large", "2", "4Gi", 0.085),
        ("c5.xlarge", "4", "8Gi", 0.17),
        ("c5.2xlarge", "8", "16Gi", 0.34),
    ):
        types.append(
            {
                "name": name,
                "capacity": {"cpu": cpu, "memory": memory, "pods": "29"},
                "offerings": [{"capacityType": "on-demand", "zone": zone, "price": price} for zone in ZONES],
            }
        )
    return build_catalog({"region": "us-east-1", "instanceTypes": types})


def nodepool(
    name: str = "default",
    *,
    consolidate_after: str = "0s",
    expire_after: str = "720h",
    capacity_types: tuple[str, ...] = ("on-demand",),
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": list(capacity_types)}],
                "expireAfter": expire_after,
            }
        },
        "disruption": {
            "consolidationPolicy": "WhenEmptyOrUnderutilized",
            "consolidateAfter": consolidate_after,
            "budgets": [{"nodes": "100%"}],
        },
    }
    body.update(spec)
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": body}


def nodeclass(name: str = "default", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "role": "KarpenterNodeRole-test",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
    }
    body.update(spec)
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": body,
    }


def deployment(
    name: str = "inflate", replicas: int = 5, cpu: str = "1", memory: str = "1Gi"
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "app",
                            "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}},
                        }
                    ],
                },
            },
        },
    }


def fast_settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "cluster_name": "test",
        "aws_region": "us-east-1",
        "batch_idle_duration": 0.05,
        "batch_max_duration": 0.3,
        "consolidation_validation_wait": 0.1,
        "disruption_poll_period": 0.1,
    }
    values.update(overrides)
    return Settings(**values)


def fast_timings(**overrides: Any) -> Timings:
    values: dict[str, Any] = {
        "lifecycle_resync": 0.1,
        "termination_requeue": 0.05,
        "instance_termination_poll": 0.05,
        "min_drain_time": 0.2,
        "command_poll": 0.05,
        "gc_fast_interval": 0.2,
        "gc_min_age": 0.5,
        "status_interval": 0.2,
        "pod_event_dedupe": 0.05,
        "provisioner_recheck": 0.3,
        "sync_poll": 0.02,
        "expiration_max_wait": 0.2,
        "decision_timeout": 10.0,
        "state_sync_timeout": 10.0,
        "nomination": 0.5,
    }
    values.update(overrides)
    return Timings(**values)
