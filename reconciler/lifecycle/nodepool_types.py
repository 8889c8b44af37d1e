"""Each NodePool's instance types, asked of the cloud once per pass and per EC2NodeClass.

The one place both the live controllers (provisioner, disruption, metrics) and the simulator get a
pool's types. As in Karpenter's provisioner, a NodePool whose EC2NodeClass is missing gets no instance
types, so nothing is launched for it and it is skipped (its ``NodeClassReady`` condition says why); a
class that exists but is not ready gets none from the cloud provider itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.cloud.overlay import publish
from reconciler.cloud.types import CloudProvider, InstanceType
from reconciler.observability.logs import get_logger
from reconciler.scheduling.overlay_evaluation import overlaid
from reconciler.settings import Settings
from reconciler.state.cluster import ClusterState


async def instance_types_by_nodepool(
    cloud: CloudProvider, state: ClusterState, settings: Settings | None = None
) -> dict[str, Sequence[InstanceType]]:
    """Each NodePool's usable instance types; a pool whose EC2NodeClass is missing gets none.

    With the NodeOverlay gate (``settings``) the cluster's NodeOverlays are in effect, and are published
    to the cloud (``publish``) so a simulated cloud prices nodes as the engine decided on them."""
    by_nodeclass: dict[str, Sequence[InstanceType]] = {}
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
                get_logger("instancetypes").error(
                    "listing instance types failed", EC2NodeClass={"name": nodeclass_name}, error=str(err))
                by_nodeclass[nodeclass_name] = []
        result[name] = by_nodeclass[nodeclass_name]
    if settings is not None and settings.gate("NodeOverlay"):
        result, book = overlaid(state, result)
        publish(cloud, book)
    return result
