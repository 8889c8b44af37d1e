"""Instance types per NodePool, asked of the cloud once per pass and per EC2NodeClass."""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.cloud.overlay import publish
from reconciler.cloud.types import CloudProvider, InstanceType
from reconciler.controllers.runtime import ControllerLog
from reconciler.scheduling.overlay_evaluation import overlaid
from reconciler.settings import Settings
from reconciler.state import ClusterState

log = ControllerLog("instancetypes")


async def instance_types_by_nodepool(
    cloud: CloudProvider, state: ClusterState, settings: Settings | None = None
) -> dict[str, Sequence[InstanceType]]:
    """Each NodePool's usable instance types; a pool whose EC2NodeClass is missing gets none (not Ready).
    With the NodeOverlay gate (``settings``), the cluster's NodeOverlays are in effect."""
    by_nodeclass: dict[str, list[InstanceType]] = {}
    result: dict[str, Sequence[InstanceType]] = {}
    for name, pool in state.nodepools.items():
        nodeclass_name = str(pool.node_class_ref.get("name", ""))
        nodeclass = state.nodeclass(pool)
        if nodeclass is None:
            result[name] = []
            continue
        if nodeclass_name not in by_nodeclass:
            try:
                by_nodeclass[nodeclass_name] = await cloud.instance_types(nodeclass)
            except Exception as err:  # a cloud outage leaves this pass without the pool, never crashes it
                log.error("listing instance types failed", EC2NodeClass={"name": nodeclass_name}, error=str(err))
                by_nodeclass[nodeclass_name] = []
        result[name] = by_nodeclass[nodeclass_name]
    if settings is not None and settings.gate("NodeOverlay"):
        result, book = overlaid(state, result)
        publish(cloud, book)
    return result
