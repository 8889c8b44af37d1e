"""An interruption's I/O, the one path live and simulated runs share: whose instance, and carrying it out.

``nodeclaims_by_instance`` indexes NodeClaims by the EC2 instance in their
providerID (what ``actions.decide`` looks messages up in). ``execute`` marks
the interrupted offering (or capacity reservation) unavailable in the cloud
provider's cache, records Karpenter's event on the NodeClaim, cordons the node
for a cordon-and-drain action, stamps the termination timestamp for a forceful
one and deletes the NodeClaim; the termination finalizer then drains it. The
live queue consumer and health poller pass the AWS provider's
``UnavailableOfferings``; the simulator passes its cloud's.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, Protocol

from reconciler.cloud.aws.instances import parse_provider_id
from reconciler.cloud.aws.interruption_metrics import InterruptionMetrics
from reconciler.interruption.actions import Action, ActionKind
from reconciler.kube.api import NODECLAIM, KubeAPI, Manifest, NotFoundError
from reconciler.kube.edits import edit_node
from reconciler.model import labels as wk
from reconciler.model.meta import format_time

log = logging.getLogger(__name__)


# Where the NodeClaims come from: the live controller's informer cache (None while it has none: then a LIST).
NodeClaimSource = Callable[[], Iterable[Manifest] | None]


async def nodeclaims_by_instance(kube: KubeAPI, cached: NodeClaimSource | None = None) -> dict[str, dict[str, Any]]:
    """NodeClaims keyed by the EC2 instance ID in their ``status.providerID``, from ``cached`` when it has them
    (as Karpenter's interruption controller reads its cache), else listed through the API."""
    claims = cached() if cached is not None else None
    if claims is None:
        claims, _ = await kube.list(NODECLAIM)
    index = {}
    for claim in claims:
        provider_id = (claim.get("status") or {}).get("providerID")
        if not provider_id:
            continue
        try:
            index[parse_provider_id(str(provider_id))[1]] = claim
        except ValueError:
            continue
    return index


class OfferingMarks(Protocol):
    """Where a provider keeps offerings and reservations to avoid for a while (cloud.aws.ice's cache)."""

    def mark_unavailable(self, capacity_type: str, instance_type: str, zone: str, reason: str = "") -> None: ...

    def mark_reservation_unavailable(self, reservation_id: str) -> None: ...


async def execute(
    kube: KubeAPI, action: Action, now: datetime, unavailable: OfferingMarks | None = None,
    metrics: InterruptionMetrics | None = None,
) -> None:
    """Carry out one action through the Kubernetes API (idempotent: a vanished object is fine)."""
    if metrics is not None:
        metrics.actions_performed.labels(action_type=action.kind.value).inc()
    if action.unavailable_offering and unavailable is not None:
        unavailable.mark_unavailable(*action.unavailable_offering, reason=action.reason)
    if action.unavailable_reservation and unavailable is not None:
        unavailable.mark_reservation_unavailable(action.unavailable_reservation)
    if action.reason and action.nodeclaim:
        await record_event(kube, action, now)
    if action.kind is ActionKind.NO_OP:
        return
    try:
        if action.kind is ActionKind.CORDON_DRAIN and action.node:
            await _cordon(kube, action.node)
        if action.forceful:
            stamp = format_time(now)
            await kube.patch(
                NODECLAIM,
                action.nodeclaim,
                {"metadata": {"annotations": {wk.NODECLAIM_TERMINATION_TIMESTAMP: stamp}}},
            )
        await kube.delete(NODECLAIM, action.nodeclaim)
    except NotFoundError:
        return


async def _cordon(kube: KubeAPI, node_name: str) -> None:
    def edit(node: Manifest) -> Manifest:
        spec = node.setdefault("spec", {})
        taints = list(spec.get("taints") or [])
        if not any(t.get("key") == wk.DISRUPTED_TAINT_KEY for t in taints):
            taints.append({"key": wk.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"})
        spec.update(unschedulable=True, taints=taints)
        return node

    with contextlib.suppress(NotFoundError):
        await edit_node(kube, node_name, edit)


async def record_event(kube: KubeAPI, action: Action, now: datetime) -> None:
    """A Kubernetes Event on the NodeClaim (best effort: events must never block handling)."""
    stamp = format_time(now)
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{action.nodeclaim}.", "namespace": "default"},
        "involvedObject": {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": action.nodeclaim},
        "reason": action.reason,
        "message": action.message,
        "type": "Warning" if action.kind is not ActionKind.NO_OP else "Normal",
        "source": {"component": "karpenter"},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
    try:
        await kube.create(event)
    except Exception as err:
        log.debug("could not record event %s: %s", action.reason, err)
