"""Capacity-reservation upkeep of launched NodeClaims (Karpenter's ``capacityreservation`` controllers).

* **Expiration** (``capacity_block_expirations``): a NodeClaim in a capacity block is deleted 40 minutes
  before the block ends, 10 minutes before EC2 starts reclaiming its instances, so the node drains in
  order instead of vanishing. The decision is ``cloud.aws.capacityreservation.expiring_claims``.
* **Capacity type** (``demote_ended_reservations``): a ``reserved`` NodeClaim whose instance the cloud now
  reports as ``on-demand`` (its reservation ended or was cancelled; the instance keeps running) is
  relabelled ``on-demand`` without the reservation labels, on the NodeClaim and on its registered Node.
  Requirements pinned to ``reserved`` then no longer match, which shows as drift.

A cloud without reservations (no ``capacity_reservations`` method) has nothing to do here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from reconciler.cloud.aws.capacityreservation import CapacityReservation, expiring_claims
from reconciler.cloud.types import CloudError, InstanceNotFoundError
from reconciler.kube.api import NODE, NODECLAIM, KubeAPI, Manifest, NotFoundError
from reconciler.model import labels as wk


async def _reservations(cloud: Any, ids: Iterable[str]) -> Mapping[str, CapacityReservation]:
    describe = getattr(cloud, "capacity_reservations", None)
    wanted = sorted({i for i in ids if i})
    if describe is None or not wanted:
        return {}
    found: Mapping[str, CapacityReservation] = await describe(wanted)
    return found


async def capacity_block_expirations(nodeclaims: Iterable[Manifest], cloud: Any, now: datetime) -> list[str]:
    """Names of the NodeClaims to delete now because their capacity block is expiring."""
    claims = list(nodeclaims)
    ids = [str(((c.get("metadata") or {}).get("labels") or {}).get(wk.CAPACITY_RESERVATION_ID, "")) for c in claims]
    return expiring_claims(claims, await _reservations(cloud, ids), now)


async def demote_ended_reservations(
    kube: KubeAPI, cloud: Any, nodeclaims: Iterable[Manifest], nodes: Mapping[str, Manifest]
) -> list[str]:
    """Relabel reserved NodeClaims (and their registered Nodes) whose instance is on-demand now; returns
    the names changed. ``nodes``: Node manifests by name."""
    changed = []
    for claim in nodeclaims:
        metadata = claim.get("metadata") or {}
        labels = metadata.get("labels") or {}
        provider_id = (claim.get("status") or {}).get("providerID")
        if metadata.get("deletionTimestamp") or labels.get(wk.CAPACITY_TYPE) != wk.CAPACITY_TYPE_RESERVED:
            continue
        if not provider_id:
            continue
        try:
            instance = await cloud.get(provider_id)
        except (InstanceNotFoundError, CloudError):
            continue
        if instance.capacity_type != wk.CAPACITY_TYPE_ON_DEMAND:
            continue
        demoted: dict[str, Any] = {wk.CAPACITY_TYPE: wk.CAPACITY_TYPE_ON_DEMAND}
        demoted.update(dict.fromkeys(wk.RESERVATION_LABELS))  # merge patch: None removes the label
        with contextlib.suppress(NotFoundError):
            await kube.patch(NODECLAIM, metadata["name"], {"metadata": {"labels": demoted}})
        node_name = (claim.get("status") or {}).get("nodeName")
        node = nodes.get(node_name or "")
        node_labels = ((node or {}).get("metadata") or {}).get("labels") or {}
        if (
            node is not None and not node["metadata"].get("deletionTimestamp")
            and node_labels.get(wk.REGISTERED) == "true"
            and node_labels.get(wk.CAPACITY_TYPE) == wk.CAPACITY_TYPE_RESERVED
        ):
            with contextlib.suppress(NotFoundError):
                await kube.patch(NODE, node["metadata"]["name"], {"metadata": {"labels": demoted}})
        changed.append(str(metadata["name"]))
    return changed
