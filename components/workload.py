"""The reconciler's Deployment, PodDisruptionBudget and Service as plain manifests.

Pure functions: values may be Pulumi Inputs (image, endpoint...), which Pulumi
resolves when the manifest is passed to a resource.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from components.common import (
    CRITICAL_ADDONS_TAINT,
    LEADER_ELECTION_LEASE,
    SYSTEM_NODE_LABEL,
    SYSTEM_NODE_LABEL_VALUE,
)
from reconciler.model.labels import NODEPOOL as NODEPOOL_LABEL

METRICS_PORT = 8080
HEALTH_PORT = 8081
NONROOT_UID = 65532
APP_LABELS = {"app.kubernetes.io/name": "adze-reconciler", "app.kubernetes.io/part-of": "adze"}

Manifest = dict[str, Any]


@dataclass(slots=True)
class WorkloadSpec:
    namespace: str
    service_account: str
    image: Any
    replicas: int
    resources: dict[str, dict[str, Any]]
    # Stack-derived settings (CLUSTER_NAME ...) first, then the user's; values may be Inputs.
    settings: dict[str, Any] = field(default_factory=dict)


def environment(spec: WorkloadSpec) -> list[Manifest]:
    env: list[Manifest] = [{"name": key, "value": value} for key, value in spec.settings.items()]
    env += [
        {"name": "METRICS_PORT", "value": str(METRICS_PORT)},
        {"name": "HEALTH_PROBE_PORT", "value": str(HEALTH_PORT)},
        {"name": "LEADER_ELECTION_NAME", "value": LEADER_ELECTION_LEASE},
        {"name": "LEADER_ELECTION_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "SYSTEM_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {
            "name": "MEMORY_LIMIT",
            "valueFrom": {"resourceFieldRef": {"containerName": "reconciler", "resource": "limits.memory"}},
        },
        # The root filesystem is read-only.
        {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
    ]
    return env


def _container(spec: WorkloadSpec) -> Manifest:
    return {
        "name": "reconciler",
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-m", "reconciler"],
        "args": ["run"],
        "env": environment(spec),
        "ports": [
            {"name": "http-metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
            {"name": "http", "containerPort": HEALTH_PORT, "protocol": "TCP"},
        ],
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": "http"},
            "initialDelaySeconds": 30,
            "timeoutSeconds": 30,
        },
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": "http"},
            "initialDelaySeconds": 5,
            "timeoutSeconds": 30,
        },
        "resources": spec.resources,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": NONROOT_UID,
            "runAsGroup": NONROOT_UID,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }


def pod_spec(spec: WorkloadSpec) -> Manifest:
    selector = {"matchLabels": dict(APP_LABELS)}
    return {
        "serviceAccountName": spec.service_account,
        "automountServiceAccountToken": True,
        "priorityClassName": "system-cluster-critical",
        "dnsPolicy": "ClusterFirst",
        "securityContext": {
            "fsGroup": NONROOT_UID,
            "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "affinity": {
            # Only the system node group, and never a node Adze itself manages.
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": NODEPOOL_LABEL, "operator": "DoesNotExist"},
                                {
                                    "key": SYSTEM_NODE_LABEL,
                                    "operator": "In",
                                    "values": [SYSTEM_NODE_LABEL_VALUE],
                                },
                            ]
                        }
                    ]
                }
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "labelSelector": selector}
                ]
            },
        },
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": selector,
            }
        ],
        "tolerations": [{"key": CRITICAL_ADDONS_TAINT, "operator": "Exists"}],
        "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
        "containers": [_container(spec)],
    }


def deployment_spec(spec: WorkloadSpec) -> Manifest:
    return {
        "replicas": spec.replicas,
        "revisionHistoryLimit": 10,
        # No surge: required anti-affinity leaves no free system node for an extra pod.
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
        "selector": {"matchLabels": dict(APP_LABELS)},
        "template": {"metadata": {"labels": dict(APP_LABELS)}, "spec": pod_spec(spec)},
    }


def disruption_budget_spec() -> Manifest:
    return {"maxUnavailable": 1, "selector": {"matchLabels": dict(APP_LABELS)}}


def metrics_service_spec() -> Manifest:
    return {
        "type": "ClusterIP",
        "selector": dict(APP_LABELS),
        "ports": [{"name": "http-metrics", "port": METRICS_PORT, "targetPort": "http-metrics", "protocol": "TCP"}],
    }
