"""The simulator's calls into Adze's pure engine (state, provisioning) in one place."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from reconciler.cloud.overlay import publish
from reconciler.cloud.types import InstanceType
from reconciler.kube.api import NODECLAIM, Manifest
from reconciler.model.meta import ManifestError, format_time
from reconciler.model.pod import Pod
from reconciler.model.taints import Toleration, parse_taints
from reconciler.provisioning.provisioner import ProvisioningPlan
from reconciler.provisioning.provisioner import plan as plan_provisioning
from reconciler.scheduling.overlay_evaluation import overlaid
from reconciler.scheduling.templates import daemon_pod_fits_node
from reconciler.settings import Settings
from reconciler.state import ClusterState

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


async def types_by_nodepool(
    state: ClusterState, cloud: Any, settings: Settings | None = None
) -> dict[str, Sequence[InstanceType]]:
    """Each NodePool's instance types as the cloud offers them to its EC2NodeClass (asked once per
    NodeClass, as the live controller does). A pool whose NodeClass is not in the cluster still gets
    the catalogue's defaults: the scenario format keeps such pools usable in simulation.

    With the NodeOverlay gate (``settings``) the NodeOverlays are in effect, and the simulated cloud
    prices nodes with them too (``price_of(..., nodepool=)``), so costs match what the engine decided on."""
    by_nodeclass: dict[str, Sequence[InstanceType]] = {}
    result: dict[str, Sequence[InstanceType]] = {}
    for name, pool in state.nodepools.items():
        nodeclass = state.nodeclass(pool)
        key = "" if nodeclass is None else str((nodeclass.get("metadata") or {}).get("name", ""))
        if key not in by_nodeclass:
            by_nodeclass[key] = await cloud.instance_types(nodeclass)
        result[name] = by_nodeclass[key]
    if settings is not None and settings.gate("NodeOverlay"):
        result, book = overlaid(state, result)
        publish(cloud, book)
    return result


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
    try:
        pod = Pod.from_manifest(
            {"metadata": {**(template.get("metadata") or {}), "name": "daemon"}, "spec": template.get("spec") or {}}
        )
        taints = parse_taints((node.get("spec") or {}).get("taints"), path="spec.taints")
    except (ManifestError, ValueError):
        return False
    labels = (node.get("metadata") or {}).get("labels") or {}
    pod = replace(pod, tolerations=(*pod.tolerations, *_DAEMONSET_AUTO_TOLERATIONS))
    return daemon_pod_fits_node(pod, taints, labels)


async def record_pod_events(kube: Any, state: ClusterState, node_names: Iterable[str], now: datetime) -> None:
    """A pod bound to a managed node is a pod event: it resets that node's consolidateAfter clock."""
    stamp = format_time(now)
    claims = {claim.node_name: claim.name for claim in state.nodeclaims.values() if claim.node_name}
    for node_name in sorted(set(node_names)):
        claim = claims.get(node_name)
        if claim:
            await kube.patch(NODECLAIM, claim, {"status": {"lastPodEventTime": stamp}}, subresource="status")


def nodeclaim_for_node(kube: Any, node: Manifest) -> str | None:
    provider_id = (node.get("spec") or {}).get("providerID")
    for claim in kube.objects(NODECLAIM):
        status = claim.get("status") or {}
        if status.get("nodeName") == node["metadata"]["name"] or (
            provider_id and status.get("providerID") == provider_id
        ):
            return str(claim["metadata"]["name"])
    return None
