"""The simulator's calls into Adze's pure engine (state, provisioning) in one place."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from reconciler.cloud.types import InstanceType
from reconciler.kube.api import NODECLAIM, Manifest
from reconciler.model.meta import ManifestError
from reconciler.model.nodeclaim_lookup import nodeclaim_for_node as lookup_nodeclaim
from reconciler.model.pod import Pod
from reconciler.model.taints import Toleration, parse_taints
from reconciler.provisioning.provisioner import ProvisioningPlan
from reconciler.provisioning.provisioner import plan as plan_provisioning
from reconciler.scheduling.templates import daemon_pod_fits_node
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState

# The DaemonSet controller adds these tolerations to every DaemonSet pod.
_DAEMONSET_AUTO_TOLERATIONS = tuple(
    Toleration(key=key, operator="Exists")
    for key in (
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/pid-pressure",
        "node.kubernetes.io/unschedulable",
        "node.kubernetes.io/network-unavailable",
    )
)


def plan(
    state: ClusterState,
    types: Mapping[str, Sequence[InstanceType]],
    settings: Settings,
    now: datetime,
    name_for: Callable[[str], str],
) -> ProvisioningPlan:
    return plan_provisioning(state, types, settings, now, name_for)


def bindable(
    state: ClusterState, types: Mapping[str, Sequence[InstanceType]], settings: Settings, now: datetime
) -> dict[str, str]:
    """Where kube-scheduler would bind pending pods right now: existing capacity only."""
    def no_new_names(nodepool: str) -> str:
        return f"{nodepool}-unlaunched"

    return dict(plan(state, types, settings, now, no_new_names).existing)


def daemon_pod_fits(template: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Would the DaemonSet controller run this pod template on this node?"""
    return daemon_pod_fits_on(daemon_pod(template), node)


def daemon_pod(template: Mapping[str, Any]) -> Pod | None:
    """The pod a DaemonSet's template makes, as the DaemonSet controller places it (None: unreadable)."""
    try:
        pod = Pod.from_manifest(
            {"metadata": {**(template.get("metadata") or {}), "name": "daemon"}, "spec": template.get("spec") or {}}
        )
    except (ManifestError, ValueError):
        return None
    return replace(pod, tolerations=(*pod.tolerations, *_DAEMONSET_AUTO_TOLERATIONS))


def daemon_pod_fits_on(pod: Pod | None, node: Mapping[str, Any]) -> bool:
    """``daemon_pod_fits`` for the template's pod (``daemon_pod``)."""
    if pod is None:
        return False
    try:
        taints = parse_taints((node.get("spec") or {}).get("taints"), path="spec.taints")
    except (ManifestError, ValueError):
        return False
    labels = (node.get("metadata") or {}).get("labels") or {}
    return daemon_pod_fits_node(pod, taints, labels)


def nodeclaim_for_node(kube: Any, node: Manifest) -> str | None:
    """The name of the node's NodeClaim in the simulated API server (the live controllers' lookup)."""
    claim = lookup_nodeclaim(node, kube.objects(NODECLAIM))
    return None if claim is None else str(claim["metadata"]["name"])


def implied_nodeclasses(objects: Iterable[Manifest]) -> list[Manifest]:
    """The EC2NodeClasses a scenario's NodePools name but do not define (docs/scenario-format.md: such a pool
    is still usable in simulation). The simulator's engine view holds them (never the API server, so no snapshot
    or result shows them), and the engine's one rule — a pool whose class is missing gets no instance types, as
    in Karpenter — holds in simulation too."""
    defined = {o["metadata"]["name"] for o in objects if o.get("kind") == "EC2NodeClass"}
    implied: dict[str, Manifest] = {}
    for obj in objects:
        if obj.get("kind") != "NodePool":
            continue
        ref = ((((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeClassRef") or {})
        name = str(ref.get("name") or "")
        if name and name not in defined and name not in implied:
            implied[name] = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
                             "metadata": {"name": name}, "spec": {}}
    return list(implied.values())
